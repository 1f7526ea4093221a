package query_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
)

// TestContractCacheIsExact: lookups served through the cache answer
// exactly what the store holds at the seq they report, through blocks and
// rollbacks; during ingestion no answer shows a contract newer than its
// reported seq.
func TestContractCacheIsExact(t *testing.T) {
	cache := query.NewContractCache(1 << 20)
	p := projectiontest.Start(t, projectiontest.Options{Backend: projectiontest.SQLite,
		Generator: projectiontest.DefaultGenerator(17), Batch: true, OnCommit: cache.Invalidate})
	cached := grow(t, p, 60, func(c *query.Config) { c.Cache = cache })
	plain := newFixtureFor(t, p, nil)
	for round := range 6 {
		var stop sync.WaitGroup
		done := make(chan struct{})
		stop.Add(1)
		go func() {
			defer stop.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				ids := contractIDs(t, plain)
				for _, id := range ids[:min(len(ids), 20)] {
					a := cached.get("/contracts/"+pathEscape(id), http.StatusOK)
					var c struct{ LastSeq int64 }
					a.decode(t, &c)
					if seq, _ := strconv.ParseInt(a.header.Get(query.HeaderSeq), 10, 64); c.LastSeq > seq {
						t.Errorf("contract %s at lastSeq %d answered as of seq %d", id, c.LastSeq, seq)
					}
				}
			}
		}()
		p.Advance(40)
		p.Sync()
		close(done)
		stop.Wait()
		head := strconv.FormatInt(p.Projection.Applied().Seq, 10)
		for _, id := range contractIDs(t, plain) {
			a := cached.get("/contracts/"+pathEscape(id), http.StatusOK)
			b := plain.get("/contracts/"+pathEscape(id), http.StatusOK)
			if !bytes.Equal(a.body, b.body) || a.header.Get(query.HeaderSeq) != head || b.header.Get(query.HeaderSeq) != head {
				t.Fatalf("round %d, contract %s: the cache answers at seq %s\n%s\nthe store at seq %s\n%s", round, id,
					a.header.Get(query.HeaderSeq), clip(a.body), b.header.Get(query.HeaderSeq), clip(b.body))
			}
		}
	}
	if hits, misses := cache.Stats(); hits == 0 || misses == 0 {
		t.Fatalf("hits %d, misses %d", hits, misses)
	}
}

func contractIDs(t testing.TB, f *fixture) []string {
	var page struct {
		Results []struct {
			ContractID string `json:"contractId"`
		} `json:"results"`
	}
	must(t, json.Unmarshal(f.get("/contracts?limit=1000", http.StatusOK).body, &page))
	var out []string
	for _, c := range page.Results {
		out = append(out, c.ContractID)
	}
	return out
}
