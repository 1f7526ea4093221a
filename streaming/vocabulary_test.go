package streaming_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// aliasJSON writes a filter with the older keys of the subscribe filter
// object (contracts, rolesCurrencies, tags, partyAddresses, partyRoles as
// objects, kinds).
func aliasJSON(f protocol.Filter) string {
	m := map[string]any{}
	if f.All {
		m["all"] = true
	}
	set := func(k string, v []string) {
		if len(v) > 0 {
			m[k] = v
		}
	}
	set("contracts", f.Contracts)
	set("rolesCurrencies", f.RolesCurrencies)
	set("tags", f.Tags)
	set("partyAddresses", f.PartyAddresses)
	set("kinds", f.Kinds)
	if len(f.PartyRoles) > 0 {
		m["partyRoles"] = f.PartyRoles
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// aliasQuery writes a filter as a query string with /events' older names
// contract and rolesCurrency.
func aliasQuery(f protocol.Filter) url.Values {
	q := f.Query()
	for name, alias := range map[string]string{protocol.ParamContractID: protocol.ParamContract, protocol.ParamRoleCurrency: protocol.ParamRolesCurrency} {
		if vs, ok := q[name]; ok {
			delete(q, name)
			q[alias] = vs
		}
	}
	return q
}

// subscribeRaw subscribes with a filter object as text and collects n
// records.
func subscribeRaw(t *testing.T, raw *streamtest.Raw, stream, filter string, n int) []record.Record {
	t.Helper()
	raw.SendText(`{"type":"subscribe","stream":"` + stream + `","filter":` + filter + `,"batchSize":50}`)
	f := raw.Expect(protocol.TypeSubscribed, 5*time.Second)
	if f.Filter == nil {
		t.Fatalf("%s: subscribed without its filter", filter)
	}
	var got streamtest.Collector
	if n > 0 {
		drain(t, raw, &got, n)
	}
	raw.Send(&protocol.Command{Type: protocol.TypeUnsubscribe, Stream: stream})
	for {
		if fr := raw.Next(5 * time.Second); fr.Type == protocol.TypeUnsubscribed {
			break
		}
	}
	return got.Records
}

// TestFilterVocabulary puts the same filters, spelled with the vocabulary's
// names and with the older aliases, to the WebSocket and to GET /events:
// each spelling selects the records the backend says it must.
func TestFilterVocabulary(t *testing.T) {
	sf := newSeedFixture(t, 150)
	ctx := context.Background()
	sample, err := streamtest.SampleFilters(ctx, sf.h.Backend)
	if err != nil {
		t.Fatal(err)
	}
	filters := sample.Filters()
	if len(sample.Tags) == 0 || len(sample.PartyAddresses) == 0 || len(sample.PartyRoles) == 0 || len(sample.ContractIDs) == 0 {
		t.Fatalf("the chain lacks values for some filter: %+v", sample)
	}
	filters = append(filters, protocol.Filter{All: true}, protocol.Filter{Kinds: []string{"contract_created"}})
	ts := httptest.NewServer(sf.srv.EventsHandler())
	defer ts.Close()
	raw := streamtest.Dial(t, sf.srv.URL, nil)
	head := sf.h.Handle.Head()
	for i, f := range filters {
		hf, err := f.History()
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		want := sf.expected(t, hf, record.Cursor{Snapshot: head})
		if len(want) == 0 {
			t.Fatalf("filter %d %+v selects nothing", i, f)
		}
		canonical, _ := json.Marshal(f)
		for _, spelling := range []string{string(canonical), aliasJSON(f)} {
			got := subscribeRaw(t, raw, "v", spelling, len(want))
			if err := streamtest.Same(got, want); err != nil {
				t.Fatalf("WebSocket %s: %v", spelling, err)
			}
		}
		for _, q := range []url.Values{f.Query(), aliasQuery(f)} {
			got := streamtest.EventRecords(t, ts.URL, q, len(want))
			if err := streamtest.Same(got, want); err != nil {
				t.Fatalf("/events?%s: %v", q.Encode(), err)
			}
		}
	}
	// The canonical spelling is what the server echoes.
	raw.SendText(`{"type":"subscribe","stream":"echo","filter":` + aliasJSON(filters[0]) + `}`)
	f := raw.Expect(protocol.TypeSubscribed, 5*time.Second)
	if b, _ := json.Marshal(f.Filter); !strings.Contains(string(b), `"contractId":`) {
		t.Fatalf("subscribed echoes %s", b)
	}
}

// TestFilterVocabularyRefusals: a name outside the vocabulary, or one
// name in two spellings, is refused on both surfaces, never ignored.
func TestFilterVocabularyRefusals(t *testing.T) {
	sf := newSeedFixture(t, 20)
	cur := strings.Repeat("ab", 28)
	for _, filter := range []string{
		`{"roleCurrencies":["` + cur + `"]}`,
		`{"contract":["x"]}`,
		`{"tag":["a"],"tags":["b"]}`,
		`{"contractId":[],"contracts":[]}`,
		`{"partyRole":["` + cur + `.a"],"partyRoles":[{"currency":"` + cur + `","name":"b"}]}`,
		`{"partyRole":["nodot"]}`,
		`{"partyRoles":[{"currency":"` + cur + `","name":"b","extra":1}]}`,
		`{"partyRole":[{"currency":"` + cur + `","name":"b"}]}`,
		`{"kind":"contract_created"}`,
		`{"all":"yes"}`,
		`{"roleCurrency":["00"]}`,
		`{"partyAddress":["addr_test1nope"]}`,
		`{"tag":[""]}`,
		`[]`,
	} {
		raw := streamtest.Dial(t, sf.srv.URL, nil)
		raw.SendText(`{"type":"subscribe","stream":"x","filter":` + filter + `}`)
		f := raw.Expect(protocol.TypeError, 5*time.Second)
		if f.Code != protocol.CodeBadFilter || f.Stream != "x" {
			t.Errorf("%s: %s %s (stream %q), want bad_filter for stream x", filter, f.Code, f.Message, f.Stream)
		}
	}
	ts := httptest.NewServer(sf.srv.EventsHandler())
	defer ts.Close()
	for query, code := range map[string]string{
		"roleCurrencies=" + cur:                         "unknown_parameter",
		"all=true&limit=3":                              "unknown_parameter",
		"contracts=x":                                   "unknown_parameter",
		"kinds=contract_created":                        "unknown_parameter",
		"status=open&all=true":                          "unknown_parameter",
		"contract=x&contractId=y":                       protocol.CodeBadFilter,
		"rolesCurrency=" + cur + "&roleCurrency=" + cur: protocol.CodeBadFilter,
		"all=true&all=false":                            protocol.CodeBadFilter,
		"all=true&from=tip&from=origin":                 "repeated_parameter",
		"partyRole=nodot":                               protocol.CodeBadFilter,
		"partyAddress=nope":                             protocol.CodeBadFilter,
		"tag=":                                          protocol.CodeBadFilter,
		"%zz":                                           "bad_query",
	} {
		resp, err := http.Get(ts.URL + "/events?" + query)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Code, Message string }
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || e.Code != code || e.Message == "" ||
			resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("/events?%s: %s %+v %v, want 400 %s", query, resp.Status, e, err, code)
		}
	}
	// An empty roleCurrency (contracts without roles) is a filter, as on
	// the query API.
	resp, err := http.Get(ts.URL + "/events?roleCurrency=&from=tip")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/events?roleCurrency=: %s", resp.Status)
	}
}

// TestErrorBodiesAreJSON: /events, /streams and the WebSocket handshake
// answer refusals with {"code", "message"}.
func TestErrorBodiesAreJSON(t *testing.T) {
	sf := newSeedFixture(t, 5)
	tok := streamingtest.StartServer(t, sf.h, streamingtest.ServerOptions{Config: func(c *streaming.Config) { c.Token = "s3cret" }})
	streams := httptest.NewServer(sf.srv.StreamsHandler())
	defer streams.Close()
	events := httptest.NewServer(tok.EventsHandler())
	defer events.Close()
	ws := strings.Replace(tok.URL, "ws://", "http://", 1)
	check := func(method, u string, header http.Header, status int, code string) {
		t.Helper()
		resp, body := roundTrip(t, newRequest(t, method, u, header))
		var e struct{ Code, Message string }
		err := json.Unmarshal([]byte(body), &e)
		if resp.StatusCode != status || err != nil || e.Code != code || e.Message == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %s %+v %v, want %d %s", method, u, resp.Status, e, err, status, code)
		}
	}
	check(http.MethodGet, events.URL+"/events?all=true", nil, http.StatusUnauthorized, "unauthorized")
	check(http.MethodGet, ws, nil, http.StatusUnauthorized, "unauthorized")
	check(http.MethodGet, ws+"?access_token=s3cret", http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden, "origin_not_allowed")
	check(http.MethodGet, streams.URL+"/streams?sort=name", nil, http.StatusBadRequest, "unknown_parameter")
	check(http.MethodGet, streams.URL+"/streams?limit=1&limit=2", nil, http.StatusBadRequest, "repeated_parameter")
	check(http.MethodGet, streams.URL+"/streams?limit=0", nil, http.StatusBadRequest, "bad_request")
	check(http.MethodGet, streams.URL+"/streams/x?verbose=1", nil, http.StatusBadRequest, "unknown_parameter")
	check(http.MethodDelete, streams.URL+"/streams/x?force=true", nil, http.StatusBadRequest, "unknown_parameter")
	check(http.MethodGet, streams.URL+"/streams/nope", nil, http.StatusNotFound, "not_found")
	// Known parameters pass.
	getJSON(t, streams.URL+"/streams?after=a&limit=5", http.StatusOK, nil)
	getJSON(t, streams.URL+"/streams?access_token=x", http.StatusOK, nil)
}
