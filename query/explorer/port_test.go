package explorer_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/explorer"
)

// TestOnTheQueryPort mounts the explorer on a query server as the service
// does: the pages answer, every API route still answers as before, unknown
// API paths and methods still get JSON errors; without the explorer (--no-ui)
// / is the API's 404.
func TestOnTheQueryPort(t *testing.T) {
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite, Generator: projectiontest.DefaultGenerator(3), Batch: true})
	p.Advance(60)
	p.Sync()
	serve := func(ui bool) http.Handler {
		cfg := query.Config{
			Contracts: p.Projection, History: p.Handle, Projection: p.Projection,
			Status: func() query.Status {
				tip := p.Tip()
				return query.Status{Network: "devnet", NetworkMagic: 42, Connected: true, NodeTip: chain.Tip{Point: tip.Point(), BlockNo: tip.BlockNo}, Follower: tip, SyncProgress: 1}
			},
			Slots:    &chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis},
			Metrics:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "up 1\n") }),
			Handlers: map[string]http.Handler{"GET /events": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("Content-Type", "text/event-stream") })},
		}
		if ui {
			for pattern, h := range newHandler(t).Routes() {
				cfg.Handlers[pattern] = h
			}
		}
		srv, err := query.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return srv.Handler()
	}
	on, off := serve(true), serve(false)
	type answer struct {
		code  int
		ctype string
		code2 string // the error code of a JSON error
	}
	ask := func(h http.Handler, method, target string) answer {
		rec := get(t, h, method, target, nil)
		a := answer{code: rec.Code, ctype: rec.Header().Get("Content-Type")}
		if rec.Code >= 400 {
			var body struct{ Code string }
			_ = json.Unmarshal(rec.Body.Bytes(), &body)
			a.code2 = body.Code
		}
		return a
	}
	var list struct {
		Results []struct{ ContractID string }
	}
	rec := get(t, on, http.MethodGet, "/contracts?limit=1", nil)
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list.Results) == 0 {
		t.Fatalf("GET /contracts: %d %s", rec.Code, rec.Body)
	}
	id := url.PathEscape(list.Results[0].ContractID)
	// The API answers the same with and without the explorer.
	for _, target := range []string{"/contracts", "/contracts/" + id, "/contracts/" + id + "/transactions", "/contracts/" + id + "/history",
		"/payouts", "/withdrawals", "/status", "/healthz", "/openapi.json", "/metrics", "/events", "/runtime/contracts",
		"/nope", "/ui", "/uix", "/contracts/" + id + "/nope", "/contracts/nope", "/index.html", "/favicon.ico", "/runtime/nope"} {
		a, b := ask(on, http.MethodGet, target), ask(off, http.MethodGet, target)
		if a != b {
			t.Errorf("GET %s: %+v with the explorer, %+v without", target, a, b)
		}
		if a.code == http.StatusNotFound && (a.ctype != "application/json" || (a.code2 != "not_found" && a.code2 != "")) {
			t.Errorf("GET %s: %+v", target, a)
		}
	}
	for _, target := range []string{"/nope", "/contracts/" + id + "/nope"} {
		if a := ask(on, http.MethodGet, target); a.code != http.StatusNotFound || a.code2 != "not_found" {
			t.Errorf("GET %s: %+v, want the API's JSON 404", target, a)
		}
	}
	// The pages and files.
	for _, target := range []string{"/", "/?status=open", "/ui/contract?id=" + id, "/ui/status", "/ui/style.css", "/ui/js/api.js"} {
		a := ask(on, http.MethodGet, target)
		if a.code != http.StatusOK || (!strings.HasPrefix(a.ctype, "text/") && a.ctype != "image/svg+xml") {
			t.Errorf("GET %s: %+v", target, a)
		}
		if a := ask(off, http.MethodGet, target); a.code != http.StatusNotFound || a.ctype != "application/json" || a.code2 != "not_found" {
			t.Errorf("GET %s without the explorer: %+v", target, a)
		}
	}
	if a := ask(on, http.MethodGet, "/ui/nope.js"); a.code != http.StatusNotFound || a.code2 != "not_found" {
		t.Errorf("GET /ui/nope.js: %+v", a)
	}
	// Other methods: the API's 405 on the pages, as on the API's paths.
	for _, target := range []string{"/", "/ui/style.css", "/contracts"} {
		if a := ask(on, http.MethodPost, target); a.code != http.StatusMethodNotAllowed || a.code2 != "method_not_allowed" {
			t.Errorf("POST %s: %+v", target, a)
		}
	}
	// The position headers come with the pages too, as with every answer.
	if rec := get(t, on, http.MethodGet, "/", nil); rec.Header().Get(query.HeaderSeq) == "" || !strings.Contains(rec.Body.String(), "<title>") {
		t.Errorf("GET /: %v", rec.Header())
	}
}

// TestConfig: config.json names the network and its explorer links, from
// query.uiLinks: the default explorer on the public networks, none on the
// devnet, a named explorer, templates, none; bad settings are refused.
func TestConfig(t *testing.T) {
	read := func(opts explorer.Options) map[string]any {
		t.Helper()
		h, err := explorer.New(opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(get(t, h, http.MethodGet, explorer.ConfigPath, nil).Body.Bytes(), &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	links := func(opts explorer.Options) string {
		t.Helper()
		b, _ := json.Marshal(read(opts)["links"])
		return string(b)
	}
	for _, c := range []struct {
		opts explorer.Options
		want string
	}{
		{explorer.Options{Network: "mainnet"}, `{"address":"https://cardanoscan.io/address/{id}","policy":"https://cardanoscan.io/tokenPolicy/{id}","tx":"https://cardanoscan.io/transaction/{id}"}`},
		{explorer.Options{Network: "preprod"}, `{"address":"https://preprod.cardanoscan.io/address/{id}","policy":"https://preprod.cardanoscan.io/tokenPolicy/{id}","tx":"https://preprod.cardanoscan.io/transaction/{id}"}`},
		{explorer.Options{Network: "preview", Links: "cexplorer"}, `{"address":"https://preview.cexplorer.io/address/{id}","policy":"https://preview.cexplorer.io/policy/{id}","tx":"https://preview.cexplorer.io/tx/{id}"}`},
		{explorer.Options{Network: "devnet"}, `{}`},
		{explorer.Options{Network: "mainnet", Links: "none"}, `{}`},
		{explorer.Options{Network: "devnet", Links: "tx=http://127.0.0.1:9000/tx/{id}"}, `{"tx":"http://127.0.0.1:9000/tx/{id}"}`},
		{explorer.Options{Network: "1097911063", Links: " tx=https://x.example/t/{id} , policy=https://x.example/p/{id}?net=1"}, `{"policy":"https://x.example/p/{id}?net=1","tx":"https://x.example/t/{id}"}`},
	} {
		if got := links(c.opts); got != c.want {
			t.Errorf("%+v: links %s, want %s", c.opts, got, c.want)
		}
	}
	if n := read(explorer.Options{Network: "preprod"})["network"]; n != "preprod" {
		t.Errorf("network %v", n)
	}
	for _, bad := range []explorer.Options{
		{Network: "devnet", Links: "cardanoscan"},
		{Network: "mainnet", Links: "cardanoscan.io"},
		{Network: "mainnet", Links: "tx=https://x.example/tx/"},
		{Network: "mainnet", Links: "tx=ftp://x.example/{id}"},
		{Network: "mainnet", Links: "block=https://x.example/{id}"},
		{Network: "mainnet", Links: "tx=https://x.example/{id},tx=https://y.example/{id}"},
		{Network: "mainnet", Links: "tx=/relative/{id}"},
	} {
		if _, err := explorer.New(bad); err == nil || !strings.HasPrefix(err.Error(), "query.uiLinks: ") {
			t.Errorf("%+v: %v, want a query.uiLinks error", bad, err)
		}
	}
	// The setting alone (config validation, before the network is known).
	if _, err := explorer.ParseLinks("cardanoscan", ""); err != nil {
		t.Errorf("cardanoscan alone: %v", err)
	}
}
