package query

import (
	"context"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Response headers that say where an answer stands.
const (
	HeaderSeq        = api.HeaderSeq
	HeaderBlockSlot  = api.HeaderBlockSlot
	HeaderBlockNo    = api.HeaderBlockNo
	HeaderBlockHash  = api.HeaderBlockHash
	HeaderNodeTip    = api.HeaderNodeTip
	HeaderNodeTipNo  = api.HeaderNodeTipNo
	HeaderRetryAfter = api.HeaderRetryAfter
)

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	api.WriteJSON(w, code, apiError{Code: errCode, Message: message})
}

// httpError is an answer of the native API's own: its status and code.
type httpError struct {
	status        int
	code, message string
}

func (e *httpError) Error() string { return e.message }

// tipJSON is the node's tip as answers show it.
type tipJSON struct {
	Slot    uint64       `json:"slot"`
	BlockNo uint64       `json:"blockNo"`
	Hash    chain.Hash32 `json:"hash"`
}

func tipOf(t chain.Tip) tipJSON {
	return tipJSON{Slot: t.Point.Slot, BlockNo: t.BlockNo, Hash: t.Point.Hash}
}

// envelope wraps every list.
type envelope struct {
	Results any               `json:"results"`
	Next    *string           `json:"next"`
	Cursor  *string           `json:"cursor"`
	Total   *int64            `json:"total,omitempty"`
	Seq     int64             `json:"seq"`
	Block   chain.BlockHeader `json:"block"`
	NodeTip tipJSON           `json:"nodeTip"`
}

// native is the native API's dialect of api.Handle.
type native struct{ s *Server }

// Position writes the position headers.
func (n native) Position(w http.ResponseWriter, at contractstore.Position) {
	api.SetPosition(w, at, n.s.cfg.Status().NodeTip)
}

// Fail answers an error: 400 for a client's mistake, 404 for an unknown
// id, 503 when the projection did not reach minSeq in time or the store
// cannot answer (logged).
func (n native) Fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var br *api.BadRequest
	var nf *api.NotFoundError
	var ny *api.NotYetApplied
	var ie *api.IntervalError
	switch {
	case errors.As(err, &he):
		writeError(w, he.status, he.code, he.message)
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, br.Code, br.Message)
	case errors.As(err, &ie):
		writeError(w, http.StatusBadRequest, "bad_interval", "the validity interval: "+ie.Error())
	case errors.As(err, &nf):
		writeError(w, http.StatusNotFound, "not_found", nf.Error())
	case errors.Is(err, contractstore.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", "not found")
	case errors.As(err, &ny):
		w.Header().Set(HeaderRetryAfter, "1")
		writeError(w, http.StatusServiceUnavailable, "not_yet_applied", ny.Error())
	case api.Canceled(r, err):
		writeError(w, 499, "canceled", "the request was canceled")
	default:
		n.s.log.Error("a read failed", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set(HeaderRetryAfter, "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the store could not answer; retry later")
	}
}

// handle is api.Handle in the native dialect.
func handle[P any](s *Server, parse func(r *http.Request, q *api.Query) (P, error),
	read func(ctx context.Context, p P) (api.Answer, error)) http.HandlerFunc {
	return api.Handle(s.env, native{s}, parse, read)
}
