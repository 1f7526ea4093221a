package query_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
)

// TestMalformedInput: every kind of bad input gets 400 with its code.
func TestMalformedInput(t *testing.T) {
	f := newFixture(t, projectiontest.SQLite, 12, 120, nil)
	var contracts struct {
		Results []struct {
			ContractID string `json:"contractId"`
		} `json:"results"`
		Cursor *string `json:"cursor"`
	}
	f.get("/contracts?limit=1", http.StatusOK).decode(t, &contracts)
	id := pathEscape(contracts.Results[0].ContractID)
	hex64 := strings.Repeat("ab", 32)
	policy := strings.Repeat("cd", 28)
	cur := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	many := strings.Repeat("tag=x&", 101)
	cases := []struct{ path, code string }{
		{"/contracts?bogus=1", "unknown_parameter"},
		{"/contracts?limit=0", "bad_limit"},
		{"/contracts?limit=1001", "bad_limit"},
		{"/contracts?limit=ten", "bad_limit"},
		{"/contracts?limit=-3", "bad_limit"},
		{"/contracts?limit=1&limit=2", "repeated_parameter"},
		{"/contracts?cursor=!!!", "bad_cursor"},
		{"/contracts?cursor=" + cur("w:5"), "bad_cursor"},
		{"/contracts?cursor=" + cur("ca:-5"), "bad_cursor"},
		{"/contracts?cursor=" + cur("ca:5:6"), "bad_cursor"},
		{"/contracts?order=desc&cursor=" + cur("ca:5"), "bad_cursor"},
		{"/contracts?cursor=" + strings.Repeat("A", 400), "bad_cursor"},
		{"/contracts?roleCurrency=xyz", "bad_policy"},
		{"/contracts?roleCurrency=" + policy + "00", "bad_policy"},
		{"/contracts?partyRole=abc", "bad_role"},
		{"/contracts?partyRole=" + policy[:54] + "zz.a", "bad_role"},
		{"/contracts?partyRole=" + policy + ".%00bad", "bad_role"},
		{"/contracts?partyRole=" + policy + "." + strings.Repeat("n", 33), "bad_role"},
		{"/contracts?partyAddress=notanaddress", "bad_address"},
		{"/contracts?partyAddress=addr_test1qqqqqq", "bad_address"},
		{"/contracts?status=maybe", "bad_status"},
		{"/contracts?order=sideways", "bad_order"},
		{"/contracts?tag=", "bad_tag"},
		{"/contracts?tag=%ff", "bad_tag"},
		{"/contracts?" + many, "too_many_values"},
		{"/contracts?minSeq=-1", "bad_min_seq"},
		{"/contracts?minSeq=1e3", "bad_min_seq"},
		{"/contracts?%zz", "bad_query"},
		{"/contracts/xyz", "bad_contract_id"},
		{"/contracts/" + hex64 + "%23abc", "bad_contract_id"},
		{"/contracts/" + hex64, "bad_contract_id"},
		{"/contracts/" + hex64 + "%2399999999999", "bad_contract_id"},
		{"/contracts/" + id + "?limit=1", "unknown_parameter"},
		{"/contracts/" + id + "/transactions?cursor=" + cur("p:1:2:3"), "bad_cursor"},
		{"/contracts/" + id + "/transactions/xyz", "bad_tx_id"},
		{"/contracts/" + id + "/transactions/" + hex64 + "00", "bad_tx_id"},
		{"/contracts/" + id + "/history?includeRolledBack=maybe", "bad_parameter"},
		{"/contracts/" + id + "/history?includeRolledBack=true&cursor=" + cur("h:1:5:0"), "bad_cursor"},
		{"/payouts?status=gone", "bad_status"},
		{"/payouts?roleToken=x", "bad_role"},
		{"/payouts?contractId=x", "bad_contract_id"},
		{"/payouts?cursor=" + cur("p:1:zz:3"), "bad_cursor"},
		{"/payouts/x", "bad_payout_id"},
		{"/withdrawals/x", "bad_tx_id"},
		{"/withdrawals?contractId=bad", "bad_contract_id"},
		{"/withdrawals?cursor=" + cur("w:x"), "bad_cursor"},
		{"/status?x=1", "unknown_parameter"},
		{"/healthz?verbose=1", "unknown_parameter"},
		{"/readyz?x", "unknown_parameter"},
		{"/openapi.json?v=2", "unknown_parameter"},
	}
	if contracts.Cursor != nil {
		cases = append(cases, struct{ path, code string }{"/contracts?order=desc&cursor=" + *contracts.Cursor, "bad_cursor"})
	}
	for _, c := range cases {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		f.get(c.path, http.StatusBadRequest).decode(t, &e)
		if e.Code != c.code || e.Message == "" {
			t.Errorf("%s: code %q (%s), want %s", c.path, e.Code, e.Message, c.code)
		}
	}
	// Limits of the server: headers and bodies.
	req, _ := http.NewRequest(http.MethodGet, f.base+"/contracts", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 100<<10))
	res, err := f.client.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 100 KiB header: %d", res.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, f.base+"/contracts", strings.NewReader(strings.Repeat("x", 64<<10)))
	res, err = f.client.Do(req)
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 64 KiB body: %d", res.StatusCode)
	}
}

// gate is a projection that reports each wait.
type gate struct {
	query.Projection
	entered chan int64
}

func (g *gate) WaitFor(ctx context.Context, seq int64) error {
	select {
	case g.entered <- seq:
	default:
	}
	return g.Projection.WaitFor(ctx, seq)
}

// TestMinSeqReadYourWrites: an answer asked with minSeq waits until the
// projection has applied that seq, then reflects it; a seq that does not
// come in time gets 503 with Retry-After.
func TestMinSeqReadYourWrites(t *testing.T) {
	var g *gate
	f := newFixture(t, projectiontest.SQLite, 13, 80, func(c *query.Config) {
		g = &gate{Projection: c.Projection, entered: make(chan int64, 1)}
		c.Projection, c.MinSeqWait = g, 20*time.Second
	})
	head := f.p.Projection.Applied().Seq
	a := f.get("/contracts?minSeq="+strconv.FormatInt(head, 10), http.StatusOK)
	if a.header.Get(query.HeaderSeq) != strconv.FormatInt(head, 10) {
		t.Fatalf("seq %s, want %d", a.header.Get(query.HeaderSeq), head)
	}
	<-g.entered // that request's wait, which returned at once
	want := head + 1
	done := make(chan *answer, 1)
	go func() {
		res, err := f.client.Get(f.base + "/contracts?limit=1000&minSeq=" + strconv.FormatInt(want, 10))
		if err != nil {
			done <- &answer{code: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		var p pageJSON
		_ = json.NewDecoder(res.Body).Decode(&p)
		done <- &answer{code: res.StatusCode, header: res.Header, body: []byte(strconv.FormatInt(p.Seq, 10))}
	}()
	if got := <-g.entered; got != want {
		t.Fatalf("waiting for %d, want %d", got, want)
	}
	// The request waits; now the chain grows past the seq it asked for.
	for f.p.Handle.Head() < want {
		f.p.Advance(3)
		f.p.SyncHistory()
	}
	r := <-done
	if r.code != http.StatusOK {
		t.Fatalf("minSeq %d: %d %s", want, r.code, r.body)
	}
	seq, _ := strconv.ParseInt(r.header.Get(query.HeaderSeq), 10, 64)
	if seq < want || string(r.body) != r.header.Get(query.HeaderSeq) {
		t.Fatalf("minSeq %d answered at seq %d (envelope %s)", want, seq, r.body)
	}
	f.p.Sync()

	short := newFixture(t, projectiontest.SQLite, 14, 20, func(c *query.Config) { c.MinSeqWait = 30 * time.Millisecond })
	far := short.p.Projection.Applied().Seq + 1_000_000
	a = short.get("/contracts/"+strings.Repeat("0", 64)+"%230?minSeq="+strconv.FormatInt(far, 10), http.StatusServiceUnavailable)
	var e struct{ Code string }
	a.decode(t, &e)
	if e.Code != "not_yet_applied" || a.header.Get("Retry-After") == "" {
		t.Fatalf("code %q, Retry-After %q", e.Code, a.header.Get("Retry-After"))
	}
}

// TestShutdownWaitsForRequests: Shutdown lets a request in flight finish.
func TestShutdownWaitsForRequests(t *testing.T) {
	var g *gate
	f := newFixture(t, projectiontest.SQLite, 15, 10, func(c *query.Config) {
		g = &gate{Projection: c.Projection, entered: make(chan int64, 1)}
		c.Projection, c.MinSeqWait = g, 200*time.Millisecond
	})
	done := make(chan int, 1)
	go func() {
		res, err := f.client.Get(f.base + "/contracts?minSeq=999999999")
		if err != nil {
			done <- -1
			return
		}
		res.Body.Close()
		done <- res.StatusCode
	}()
	<-g.entered
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusServiceUnavailable {
		t.Fatalf("the request in flight got %d", code)
	}
	if _, err := f.client.Get(f.base + "/healthz"); err == nil {
		t.Fatal("the server still answers after Shutdown")
	}
}

// FuzzQueryParams: no path or query string a client sends makes the API
// answer 5xx (except 503 for a minSeq that does not come), and every error
// answer is {"code","message"}.
func FuzzQueryParams(f *testing.F) {
	fx := newFixture(f, projectiontest.SQLite, 16, 60, func(c *query.Config) { c.MinSeqWait = time.Millisecond })
	handler := fx.srv.Handler()
	var first struct {
		Results []struct {
			ContractID string `json:"contractId"`
		} `json:"results"`
	}
	fx.get("/contracts?limit=1", http.StatusOK).decode(f, &first)
	id := first.Results[0].ContractID
	routes := []string{"/contracts", "/contracts/%s", "/contracts/%s/transactions", "/contracts/%s/transactions/%s",
		"/contracts/%s/history", "/payouts", "/payouts/%s", "/withdrawals", "/withdrawals/%s", "/status", "/readyz"}
	for i := range routes {
		f.Add(uint8(i), id, "limit=5&tag=a&partyRole="+strings.Repeat("ab", 28)+".x&status=open&cursor=Y2E6Mw")
		f.Add(uint8(i), strings.Repeat("0", 64), "minSeq=3&includeRolledBack=true&order=desc&roleToken=x.y")
	}
	f.Add(uint8(0), "", "partyAddress=addr_test1&roleCurrency=&limit=1000&contractId="+url.QueryEscape(id))
	f.Fuzz(func(t *testing.T, route uint8, part, rawQuery string) {
		path := strings.ReplaceAll(routes[int(route)%len(routes)], "%s", url.PathEscape(part))
		u, err := url.Parse(path)
		if err != nil {
			return
		}
		u.RawQuery = rawQuery
		req := (&http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}, Host: "test", Body: http.NoBody,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, RequestURI: u.RequestURI()}).WithContext(context.Background())
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if rec.Code >= 500 {
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusServiceUnavailable || e.Code != "not_yet_applied" {
				t.Fatalf("GET %s: %d %s", u, rec.Code, rec.Body.Bytes())
			}
		}
		if rec.Code >= 400 {
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" {
				t.Fatalf("GET %s: %d without a JSON error: %s", u, rec.Code, rec.Body.Bytes())
			}
		}
		if rec.Header().Get(query.HeaderSeq) == "" {
			t.Fatalf("GET %s: no position headers", u)
		}
	})
}
