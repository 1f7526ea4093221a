package querytest

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// A Request is one request of a load: its URL, whether it asks for a list
// (FetchCount's isList) and, when Took is set, where its latency goes
// besides the load's.
type Request struct {
	URL  string
	List bool
	Took func(time.Duration)
}

// LoadResult is what a load measured.
type LoadResult struct {
	Requests  int
	Contracts int // the contracts of the answers
	Errors    int
	Elapsed   time.Duration
	Latencies []time.Duration // every request's, in no order
}

// Load runs clients goroutines for dur (or until ctx ends), each asking in
// a loop for next(rng) through FetchCount, with a random source of its own
// (client c's seeded with c and seed), and sums up what they got.
func Load(ctx context.Context, client *http.Client, clients int, seed uint64, dur time.Duration, next func(rng *rand.Rand) Request) *LoadResult {
	res := &LoadResult{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), seed))
			var lat []time.Duration
			n, contracts, errs := 0, 0, 0
			for time.Now().Before(deadline) && ctx.Err() == nil {
				req := next(rng)
				t0 := time.Now()
				got, err := FetchCount(ctx, client, req.URL, req.List)
				took := time.Since(t0)
				lat = append(lat, took)
				if req.Took != nil {
					req.Took(took)
				}
				n++
				if err != nil {
					errs++
					continue
				}
				contracts += got
			}
			mu.Lock()
			res.Requests += n
			res.Contracts += contracts
			res.Errors += errs
			res.Latencies = append(res.Latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res
}
