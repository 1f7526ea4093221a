package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// TestFilterVocabularyAcrossSurfaces puts the same filters to the four
// surfaces of a devnet pipeline (generated chain with rollbacks, history
// store, contract projection): the query API's /contracts, GET /events,
// the WebSocket (Go client) and tail. The records of /events, the
// WebSocket and tail are the ones the backend says the filter selects, and
// the contracts /contracts lists are those whose creation those records
// hold.
func TestFilterVocabularyAcrossSurfaces(t *testing.T) {
	ctx := context.Background()
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite, Generator: projectiontest.DefaultGenerator(21), Batch: true})
	p.Advance(300)
	head := p.Sync()
	if p.Rollbacks() == 0 {
		t.Fatal("the chain has no rollbacks")
	}
	cfg := streamingtest.TestConfig()
	tip := func() chain.Tip { t := p.Tip(); return chain.Tip{Point: t.Point(), BlockNo: t.BlockNo} }
	ws, err := streaming.New(cfg, streaming.Deps{History: p.Handle, System: p.System, Tip: tip})
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = ws.Shutdown(sctx)
	})
	wsURL := "ws://" + ws.Addr().String() + "/"
	qs, err := query.New(query.Config{Addr: "127.0.0.1:0", Contracts: p.Projection, History: p.Handle, Projection: p.Projection,
		Handlers: map[string]http.Handler{"GET /events": ws.EventsHandler()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = qs.Shutdown(sctx)
	})
	base := "http://" + qs.Addr()
	c, err := client.New(client.Options{URL: wsURL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	sample, err := streamtest.SampleFilters(ctx, p.History)
	if err != nil {
		t.Fatal(err)
	}
	filters := sample.Filters()
	if len(filters) < 8 {
		t.Fatalf("the chain lacks values for some filter: %+v", sample)
	}
	for i, f := range filters {
		want := selected(t, p.History, f, head)
		if len(want) == 0 {
			t.Fatalf("filter %d %+v selects nothing", i, f)
		}
		t.Logf("filter %s: %d records", f.Query().Encode(), len(want))
		// The query API (kind is not one of its filters).
		if len(f.Kinds) == 0 {
			var created []string
			for _, r := range want {
				if r.Kind == record.KindContractCreated {
					created = append(created, r.Contract.String())
				}
			}
			listed := listContracts(t, base, f.Query())
			slices.Sort(created)
			slices.Sort(listed)
			if !slices.Equal(created, listed) {
				t.Fatalf("filter %s: /contracts lists %d contracts %v, the records create %d %v", f.Query().Encode(), len(listed), listed, len(created), created)
			}
		}
		// GET /events.
		if err := streamtest.Same(streamtest.EventRecords(t, base, f.Query(), len(want)), want); err != nil {
			t.Fatalf("/events?%s: %v", f.Query().Encode(), err)
		}
		// The WebSocket.
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		s, err := c.Subscribe(sctx, client.Request{Stream: "f", Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		var got []record.Record
		for len(got) < len(want) {
			b, err := s.Next(sctx)
			if err != nil {
				t.Fatalf("WebSocket %+v: %v", f, err)
			}
			got = append(got, b.Records...)
			_ = s.Ack(sctx, b)
		}
		_ = s.Close(sctx)
		cancel()
		if err := streamtest.Same(got, want); err != nil {
			t.Fatalf("WebSocket %+v: %v", f, err)
		}
		// tail.
		args := append(tailArgs(f, false), "--url", wsURL, "--limit", strconv.Itoa(len(want)))
		out, stderr, err := runTail(t, args...)
		if err != nil {
			t.Fatalf("tail %v: %v: %s", args, err, stderr)
		}
		if err := streamtest.Same(parseLines(t, out), want); err != nil {
			t.Fatalf("tail %v: %v", args, err)
		}
	}
}

// listContracts pages through /contracts with a filter and returns the ids.
func listContracts(t *testing.T, base string, q url.Values) []string {
	t.Helper()
	var out []string
	path := "/contracts?" + q.Encode() + "&limit=7"
	for path != "" {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %s", path, resp.Status, body)
		}
		var page struct {
			Results []struct {
				ContractID string `json:"contractId"`
			} `json:"results"`
			Next *string `json:"next"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Results {
			out = append(out, c.ContractID)
		}
		path = ""
		if page.Next != nil {
			path = *page.Next
		}
	}
	return out
}
