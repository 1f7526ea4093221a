package query_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/querytest"
)

// loadResult is what one load phase measured.
type loadResult struct {
	name string
	*querytest.LoadResult
}

func (r *loadResult) quantile(q float64) time.Duration { return quantile(r.Latencies, q) }

// quantile sorts lat and returns its q-quantile (0 when empty).
func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, int(q*float64(len(lat))))]
}

// haskellContractsPerSecond is the Marlowe Runtime's query protocol
// throughput (marlowe-benchmark, preprod, page size 256).
const haskellContractsPerSecond = 3050

// BenchmarkQueryLoad measures the query API on PostgreSQL under 64
// concurrent clients over loopback HTTP while the pipeline ingests new
// blocks: contract lookups, then filtered lists of 100. It reports requests
// and contracts per second, p50 and p99 latency, and the ratio of contracts
// per second to the Haskell runtime's query protocol.
//
//	go test -run '^$' -bench BenchmarkQueryLoad -benchtime 1x ./query/
//
// LOAD_BLOCKS (default 20000) sets the chain's length before the load,
// LOAD_SECONDS (default 10) each phase's duration, LOAD_INGEST (default 20)
// the blocks per second ingested meanwhile.
func BenchmarkQueryLoad(b *testing.B) {
	blocks := envInt("LOAD_BLOCKS", 20000)
	seconds := envInt("LOAD_SECONDS", 10)
	ingest := envInt("LOAD_INGEST", 20)
	gen := projectiontest.DefaultGenerator(21)
	gen.RollbackEvery, gen.MaxActive, gen.MarloweShare = 200, 400, 0.6
	cache := query.NewContractCache(query.DefaultCacheBytes)
	p := projectiontest.Start(b, projectiontest.Options{Backend: projectiontest.Postgres, Generator: gen, Batch: true, Quiet: true,
		OnCommit: cache.Invalidate})
	start := time.Now()
	for done := 0; done < blocks; done += 500 {
		p.Advance(500)
		p.SyncHistory()
	}
	p.Sync()
	fx := newFixtureFor(b, p, nil)
	cached := newFixtureFor(b, p, func(c *query.Config) { c.Cache = cache })
	var ids []string
	var total int64
	for path := "/contracts?limit=1000"; ; {
		a := fx.get(path, http.StatusOK)
		var page struct {
			Results []struct {
				ContractID string `json:"contractId"`
			} `json:"results"`
			Next  *string `json:"next"`
			Total *int64  `json:"total"`
		}
		a.decode(b, &page)
		if page.Total != nil {
			total = *page.Total
		}
		for _, c := range page.Results {
			ids = append(ids, c.ContractID)
		}
		if page.Next == nil {
			break
		}
		path = *page.Next
	}
	b.Logf("chain of %d blocks: %d contracts (total %d), head seq %d, built in %s", p.Tip().BlockNo, len(ids), total,
		p.Projection.Applied().Seq, time.Since(start).Round(time.Second))

	// Ingest meanwhile: new blocks at a steady rate.
	ctx, cancel := context.WithCancel(context.Background())
	var ingestWG sync.WaitGroup
	var ingested atomic.Int64
	ingestWG.Add(1)
	go func() {
		defer ingestWG.Done()
		tick := time.NewTicker(time.Second / time.Duration(max(1, ingest)))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				p.Advance(1)
				ingested.Add(1)
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	dur := time.Duration(seconds) * time.Second
	lookup := runLoad(client, fx.base, "lookup", dur, func(rng *rand.Rand) string {
		return "/contracts/" + pathEscape(ids[rng.IntN(len(ids))])
	}, false)
	lookupCached := runLoad(client, cached.base, "lookup, with the contract cache", dur, func(rng *rand.Rand) string {
		return "/contracts/" + pathEscape(ids[rng.IntN(len(ids))])
	}, false)
	hits, misses := cache.Stats()
	filters := []string{"status=closed", "status=open", "roleCurrency=", "tag=" + url.QueryEscape(firstTag(fx))}
	list := runLoad(client, fx.base, "filtered list, page 100", dur, func(rng *rand.Rand) string {
		cursor := ""
		if n := rng.IntN(3); n > 0 {
			// Start at a random place of the list, as later pages do.
			cursor = "&cursor=" + encodeContractCursor(int64(rng.IntN(int(p.Projection.Applied().Seq)+1)))
		}
		return "/contracts?limit=100&" + filters[rng.IntN(len(filters))] + cursor
	}, true)
	cancel()
	ingestWG.Wait()
	p.Sync()
	b.Logf("ingested %d blocks during the load; cache hits %d, misses %d", ingested.Load(), hits, misses)
	b.Logf("| case | requests/s | contracts/s | p50 | p99 | errors | contracts/s vs Haskell query (3,050/s) |")
	b.Logf("|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range []*loadResult{lookup, lookupCached, list} {
		rps := float64(r.Requests) / r.Elapsed.Seconds()
		cps := float64(r.Contracts) / r.Elapsed.Seconds()
		b.Logf("| %s | %.0f | %.0f | %.2f ms | %.2f ms | %d | %.1fx |", r.name, rps, cps,
			ms(r.quantile(0.5)), ms(r.quantile(0.99)), r.Errors, cps/haskellContractsPerSecond)
		if r.Errors > 0 {
			b.Errorf("%s: %d failed requests", r.name, r.Errors)
		}
	}
	b.ReportMetric(float64(lookup.Requests)/lookup.Elapsed.Seconds(), "lookups/s")
	b.ReportMetric(ms(lookup.quantile(0.99)), "lookup-p99-ms")
	b.ReportMetric(float64(lookupCached.Requests)/lookupCached.Elapsed.Seconds(), "cached-lookups/s")
	b.ReportMetric(ms(lookupCached.quantile(0.99)), "cached-lookup-p99-ms")
	b.ReportMetric(float64(list.Contracts)/list.Elapsed.Seconds(), "list-contracts/s")
	b.ReportMetric(ms(list.quantile(0.99)), "list-p99-ms")
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// encodeContractCursor makes the cursor of an ascending contract list that
// starts after creation seq n (the API's cursors are opaque to clients; the
// load tool makes them to start pages anywhere).
func encodeContractCursor(n int64) string {
	return base64URL("ca:" + strconv.FormatInt(n, 10))
}

// firstTag returns a tag some contract has.
func firstTag(f *fixture) string {
	var page struct {
		Results []struct {
			Tags map[string]json.RawMessage `json:"tags"`
		} `json:"results"`
	}
	f.get("/contracts?limit=1000", http.StatusOK).decode(f.t, &page)
	for _, c := range page.Results {
		for t := range c.Tags {
			return t
		}
	}
	return "none"
}

// runLoad runs 64 clients for dur, each asking next(rng) in a loop.
func runLoad(client *http.Client, base, name string, dur time.Duration, next func(*rand.Rand) string, isList bool) *loadResult {
	return &loadResult{name: name, LoadResult: querytest.Load(context.Background(), client, 64, 99, dur, func(rng *rand.Rand) querytest.Request {
		return querytest.Request{URL: base + next(rng), List: isList}
	})}
}
