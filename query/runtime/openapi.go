package runtime

import (
	_ "embed"
	"net/http"

	"github.com/marlowe-follower/follower/query/internal/api"
)

// openAPIDocument is the view's OpenAPI document, served at
// Prefix/openapi.json: the read operations of the Runtime's golden
// document (testdata/marlowe-runtime/openapi-1.0.0.json) with the
// corrections and extras TestOpenAPIDocument writes (go test
// ./query/runtime -run TestOpenAPIDocument -update makes it again);
// the query tests check every answer of the view against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the view's OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func (v *View) openAPI(w http.ResponseWriter, r *http.Request) {
	v.setHeaders(w, v.env.Projection.Applied())
	w.Header().Set("Cache-Control", "public, max-age=300")
	api.WriteBody(w, http.StatusOK, "application/json", openAPIDocument)
}
