package query_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
)

// TestRuntimeErrorPaths walks every operation of the view's document
// through its error paths: each path parameter malformed (400), ids of
// nothing (404), a malformed and an unreached minSeq (400, 503), and the
// methods the view has no use for (405). Every answer is the Runtime's
// error body with details.code, and matches both documents (rtGet).
func TestRuntimeErrorPaths(t *testing.T) {
	f := newFixture(t, projectiontest.SQLite, 24, 60, func(c *query.Config) {
		withRuntime(c)
		c.MinSeqWait = 30 * time.Millisecond
	})
	unknown := map[string]string{ // well made, naming nothing
		"contractId": strings.Repeat("ab", 32) + "%230", "payoutId": strings.Repeat("ab", 32) + "%231",
		"transactionId": strings.Repeat("cd", 32), "withdrawalId": strings.Repeat("cd", 32),
		"contractSourceId": strings.Repeat("ef", 32),
	}
	param := regexp.MustCompile(`\{([A-Za-z]+)\}`)
	for _, tmpl := range slices.Sorted(maps.Keys(loadViewSpec(t).doc.Paths.Map())) {
		fill := func(bad string) string {
			return param.ReplaceAllStringFunc(tmpl, func(m string) string {
				name := m[1 : len(m)-1]
				if name == bad {
					return "nothex"
				}
				v, ok := unknown[name]
				if !ok {
					t.Fatalf("%s: no value for %s", tmpl, name)
				}
				return v
			})
		}
		qs := ""
		if strings.HasSuffix(tmpl, "/next") {
			qs = "validityStart=2024-01-01T00:00:00Z&validityEnd=2024-01-01T00:01:00Z&"
		}
		for _, m := range param.FindAllStringSubmatch(tmpl, -1) {
			runtimeError(t, f.rtGet(fill(m[1])+"?"+qs, nil, http.StatusBadRequest), "BadRequest")
		}
		if strings.Contains(tmpl, "{") {
			a := f.rtGet(fill("")+"?"+qs, nil, http.StatusNotFound)
			runtimeError(t, a, map[bool]string{true: "contractNotFound", false: "NotFound"}[strings.HasSuffix(tmpl, "/next")])
		}
		if tmpl != "/healthcheck" && tmpl != "/openapi.json" {
			runtimeError(t, f.rtGet(fill("")+"?"+qs+"minSeq=x", nil, http.StatusBadRequest), "BadRequest")
			a := f.rtGet(fill("")+"?"+qs+"minSeq=9000000000", nil, http.StatusServiceUnavailable)
			runtimeError(t, a, "NotYetApplied")
			if a.header.Get("Retry-After") == "" {
				t.Fatalf("GET /runtime%s?minSeq=9000000000: no Retry-After", tmpl)
			}
		}
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			a := f.do(method, query.RuntimePrefix+fill(""), nil)
			if a.code != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, HEAD" {
				t.Fatalf("%s /runtime%s: %d, Allow %q", method, fill(""), a.code, a.header.Get("Allow"))
			}
			runtimeError(t, a, "MethodNotAllowed")
		}
	}
}

// runtimeError checks an error answer of the view: the Runtime's body
// (message, errorCode) with the follower's code in details.code.
func runtimeError(t *testing.T, a *answer, errorCode string) {
	t.Helper()
	var e struct {
		Message   string `json:"message"`
		ErrorCode string `json:"errorCode"`
		Details   struct {
			Code string `json:"code"`
		} `json:"details"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil || e.Message == "" || e.ErrorCode != errorCode || e.Details.Code == "" {
		t.Fatalf("%d %s: want errorCode %s and details.code (%v)", a.code, clip(a.body), errorCode, err)
	}
}
