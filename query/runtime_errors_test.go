package query_test

import (
	"bytes"
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

// TestRuntimeRangeRefusals: Range headers the view cannot satisfy are 416
// with the Runtime's error body and the status headers, on every list.
func TestRuntimeRangeRefusals(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) { checkRangeRefusals(t, newFixture(t, backend, 27, 300, withRuntime)) })
	}
}

func checkRangeRefusals(t *testing.T, f *fixture) {
	refused := func(path string, rng []string) {
		t.Helper()
		a := f.rtGet(path, http.Header{"Range": rng}, http.StatusRequestedRangeNotSatisfiable)
		var e struct{ ErrorCode, Message string }
		a.decode(t, &e)
		if e.ErrorCode != "RangeNotSatisfiable" || e.Message == "" {
			t.Fatalf("%s Range %q: %s", path, rng, a.body)
		}
	}
	all := rtPages(f, "/contracts", "contractId", "contractId;limit 10000", contractKey)
	contracts := keysOf(all, contractKey)
	lists := []struct{ path, field, unknown string }{
		{"/contracts", "contractId", strings.Repeat("ab", 32) + "%230"},
		{"/contracts/" + pathEscape(contracts[0]) + "/transactions", "transactionId", strings.Repeat("cd", 32)},
		{"/payouts", "payoutId", strings.Repeat("ab", 32) + "%231"},
		{"/withdrawals", "withdrawalId", strings.Repeat("cd", 32)},
	}
	for _, l := range lists {
		for _, rng := range [][]string{
			{l.field + " " + l.unknown},
			{l.field + " x"},
			{l.field + " a b"},
			{"other"},
			{""},
			{l.field + ";limit"},
			{l.field + ";limit x"},
			{l.field + ";limit 10001"},
			{l.field + ";offset -1"},
			{l.field + ";offset 100001"},
			{l.field + ";order up"},
			{l.field + ";limit 1;limit 2"},
			{l.field + ";from 3"},
			{l.field, l.field + ";limit 2"},
			{l.field + " " + strings.Repeat("a", 1100)},
		} {
			refused(l.path, rng)
		}
	}
	// A start that exists but is not in the filtered list.
	var untagged string
	for _, c := range all {
		if _, tagged := c.Resource.Tags["devnet"]; !tagged {
			untagged = c.Resource.ContractID
			break
		}
	}
	if untagged == "" {
		t.Fatal("every contract is tagged devnet")
	}
	refused("/contracts?tag=devnet", []string{"contractId " + pathEscape(untagged)})
	payouts := rtPages(f, "/payouts?status=withdrawn", "payoutId", "payoutId;limit 10000", payoutKey)
	if len(payouts) == 0 {
		t.Fatal("no payout was withdrawn")
	}
	refused("/payouts?status=available", []string{"payoutId " + pathEscape(payouts[0].Resource.PayoutID)})
	// Another contract's step.
	for _, id := range contracts[1:] {
		if steps := rtPages(f, "/contracts/"+pathEscape(id)+"/transactions", "transactionId", "", txKey); len(steps) > 0 {
			refused("/contracts/"+pathEscape(contracts[0])+"/transactions", []string{"transactionId " + steps[0].Resource.TransactionID})
			break
		}
	}
	// Writes are refused with the status headers too.
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		a := f.do(m, query.RuntimePrefix+"/contracts", nil)
		if a.code != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("%s /runtime/contracts: %d %v", m, a.code, a.header)
		}
		for _, h := range []string{"X-Runtime-Version", "X-Network-Id", "X-Node-Tip", "X-Runtime-Chain-Tip", "X-Runtime-Tip"} {
			if a.header.Get(h) == "" {
				t.Fatalf("%s /runtime/contracts: no %s", m, h)
			}
		}
	}
}

// checkRuntimeErrors checks the view's error answers.
func (f *fixture) checkRuntimeErrors(someContract string) {
	t := f.t
	id := pathEscape(someContract)
	unknown := strings.Repeat("ab", 32) + "%230"
	for _, c := range []struct {
		path   string
		header string
		code   int
		err    string
	}{
		{"/contracts/" + unknown, "", http.StatusNotFound, "NotFound"},
		{"/contracts/nothex", "", http.StatusBadRequest, "BadRequest"},
		{"/contracts/sources", "", http.StatusNotFound, "NotFound"},
		{"/contracts/sources/" + strings.Repeat("ab", 32), "", http.StatusNotFound, "NotFound"},
		{"/contracts/sources/" + strings.Repeat("ab", 32) + "/closure", "", http.StatusNotFound, "NotFound"},
		{"/contracts/" + unknown + "/transactions", "", http.StatusNotFound, "NotFound"},
		{"/contracts/" + id + "/transactions/" + strings.Repeat("cd", 32), "", http.StatusNotFound, "NotFound"},
		{"/payouts/" + unknown, "", http.StatusNotFound, "NotFound"},
		{"/withdrawals/" + strings.Repeat("cd", 32), "", http.StatusNotFound, "NotFound"},
		{"/contracts/" + unknown + "/next?validityStart=2024-01-01T00:00:00Z&validityEnd=2024-01-01T00:01:00Z", "", http.StatusNotFound, "contractNotFound"},
		{"/contracts/" + id + "/next?validityStart=2024-01-01T00:01:00Z&validityEnd=2024-01-01T00:00:00Z", "", 0, ""},
		{"/contracts/" + id + "/next?validityStart=yesterday&validityEnd=2024-01-01T00:00:00Z", "", http.StatusBadRequest, "BadRequest"},
		{"/contracts/" + id + "/next", "", http.StatusBadRequest, "BadRequest"},
		{"/contracts?roleCurrency=xyz", "", http.StatusBadRequest, "BadRequest"},
		{"/contracts?partyAddress=nope", "", http.StatusBadRequest, "BadRequest"},
		{"/payouts?status=paid", "", http.StatusBadRequest, "BadRequest"},
		{"/withdrawals?roleCurrency=zz", "", http.StatusBadRequest, "BadRequest"},
		{"/contracts", "contractId " + unknown, http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "payoutId", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "contractId;limit -1", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "contractId;limit 100;order sideways", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "contractId;skip 3", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "contractId notanid", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts", "contractId;limit 100001", http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/contracts/" + id + "/transactions", "transactionId " + strings.Repeat("cd", 32), http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/payouts", "payoutId " + unknown, http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/withdrawals", "withdrawalId " + strings.Repeat("cd", 32), http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable"},
		{"/nothing/here", "", http.StatusNotFound, "NotFound"},
	} {
		h := http.Header{}
		if c.header != "" {
			h.Set("Range", c.header)
		}
		a := f.rtGet(c.path, h, c.code)
		if c.err == "" {
			continue
		}
		var e struct {
			ErrorCode string `json:"errorCode"`
		}
		a.decode(t, &e)
		if e.ErrorCode != c.err {
			t.Fatalf("GET /runtime%s (Range %q): errorCode %q, want %q", c.path, c.header, e.ErrorCode, c.err)
		}
	}
	// Unknown parameters are ignored, as the Runtime ignores them.
	a := f.rtGet("/contracts?whatever=1", nil, http.StatusPartialContent)
	b := f.rtGet("/contracts", nil, http.StatusPartialContent)
	if !bytes.Equal(a.body, b.body) {
		t.Fatal("an unknown parameter changed the answer")
	}
	// Writes are not a follower's.
	req, _ := http.NewRequest(http.MethodPost, f.base+"/runtime/contracts", strings.NewReader("{}"))
	res, err := f.client.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /runtime/contracts: %d", res.StatusCode)
	}
}
