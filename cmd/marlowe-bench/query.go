package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/query/querytest"
)

// contractsParams is a contracts phase: the service resumes from its store
// (empty on the first phase), follows the node at Socket to Tip, then
// answers query load.
type contractsParams struct {
	Socket      string    `json:"socket"`
	Tip         uint64    `json:"tip"`
	Store       storeSpec `json:"store"`
	Concurrency []int     `json:"concurrency"`
	Seconds     float64   `json:"seconds"`
}

// ContractsPhase is what one contracts phase measured: the cost of
// ingesting the blocks since the previous phase, then query load against
// the store at that size.
type ContractsPhase struct {
	Backend   string `json:"backend"`
	Contracts int64  `json:"contracts"`
	// Blocks and Records were ingested in this phase; the chain holds
	// ChainBlocks blocks at its end.
	ChainBlocks uint64  `json:"chainBlocks"`
	Blocks      uint64  `json:"blocks"`
	Records     uint64  `json:"records"`
	HistorySeq  int64   `json:"historySeq"`
	IngestSecs  float64 `json:"ingestSeconds"`
	IngestCPU   float64 `json:"ingestCpuSeconds"`
	PostgresCPU float64 `json:"postgresCpuSeconds,omitempty"`
	// CommitMsPerRecord is the history store's commit time per record in
	// this phase.
	CommitMsPerRecord float64    `json:"commitMsPerRecord"`
	CPUMsPerRecord    float64    `json:"cpuMsPerRecord"`
	RecordsPerSec     float64    `json:"recordsPerSecond"`
	RSSPeak           int64      `json:"rssPeakBytes"`
	StoreBytes        int64      `json:"storeBytes"`
	Query             []QueryRow `json:"query"`
}

// QueryRow is one query load: Clients goroutines asking in a loop for
// Seconds over loopback HTTP.
type QueryRow struct {
	Backend      string  `json:"backend"`
	Contracts    int64   `json:"contracts"`
	Op           string  `json:"op"`
	Clients      int     `json:"clients"`
	Requests     int     `json:"requests"`
	Errors       int     `json:"errors"`
	Seconds      float64 `json:"seconds"`
	RequestsPerS float64 `json:"requestsPerSecond"`
	// ContractsPerS counts contracts returned (one per lookup, up to 100
	// per list page).
	ContractsPerS float64 `json:"contractsPerSecond"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
	// Filters break a list load down by filter.
	Filters []FilterLatency `json:"filters,omitempty"`
}

// FilterLatency is the latency of the list requests with one filter.
type FilterLatency struct {
	Filter   string  `json:"filter"`
	Pages    int     `json:"pages"` // pages the requests started from
	Requests int     `json:"requests"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
}

// Query operations.
const (
	opLookup = "lookup"
	opList   = "filtered list"
)

// runContractsJob runs one contracts phase.
func runContractsJob(ctx context.Context, prm contractsParams) (any, error) {
	res := &ContractsPhase{Backend: prm.Store.backendName(), ChainBlocks: prm.Tip}
	m := startMeter(prm.Store.DBName)
	svc, err := startService(ctx, prm.Socket, prm.Store)
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = svc.Stop(config.DefaultShutdownGrace)
		}
	}()
	if err := waitSynced(ctx, svc, prm.Tip, "contracts", 30*time.Minute); err != nil {
		return nil, err
	}
	res.IngestSecs, res.IngestCPU = m.elapsed()
	res.PostgresCPU = m.postgresCPU()
	st := svc.Handle().Stats()
	res.Blocks, res.Records, res.HistorySeq = st.BlocksCommitted.Load(), st.RecordsCommitted.Load(), st.Head.Load()
	if res.Records > 0 {
		res.CommitMsPerRecord = float64(st.CommitNanos.Load()) / 1e6 / float64(res.Records)
		res.CPUMsPerRecord = res.IngestCPU * 1000 / float64(res.Records)
		res.RecordsPerSec = float64(res.Records) / res.IngestSecs
	}
	base := "http://" + svc.QueryAddr()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128}, Timeout: 60 * time.Second}
	defer client.CloseIdleConnections()
	w, err := surveyContracts(ctx, client, base)
	if err != nil {
		return nil, err
	}
	res.Contracts = int64(len(w.ids))
	progress("  %s: %d contracts, %d records, ingested %d blocks in %.1fs", res.Backend, res.Contracts, res.HistorySeq, res.Blocks, res.IngestSecs)
	if len(w.ids) > 0 {
		for _, clients := range prm.Concurrency {
			for _, op := range []string{opLookup, opList} {
				row := runQueryLoad(ctx, client, base, op, clients, time.Duration(prm.Seconds*float64(time.Second)), w)
				row.Backend, row.Contracts = res.Backend, res.Contracts
				res.Query = append(res.Query, row)
				progress("  %s, %d contracts, %s, %d clients: %.0f requests/s, p50 %.2f ms, p99 %.2f ms", res.Backend, res.Contracts,
					op, clients, row.RequestsPerS, row.P50Ms, row.P99Ms)
			}
		}
	}
	res.RSSPeak = readMem().Peak
	stopped = true
	if err := svc.Stop(config.DefaultShutdownGrace); err != nil {
		return nil, err
	}
	res.StoreBytes = prm.Store.size(ctx)
	return res, nil
}

// workload is what the query load asks for: every contract id, and for
// each list filter the cursors of its pages.
type workload struct {
	ids     []string
	filters []listFilter
}

// listFilter is a filter of /contracts with the cursors of its pages ("" for
// the first page).
type listFilter struct {
	query   string
	cursors []string
}

// surveyContracts lists every contract and, for each filter, up to 50
// pages of 100.
func surveyContracts(ctx context.Context, client *http.Client, base string) (*workload, error) {
	w := &workload{}
	tags := map[string]int{}
	for path := "/contracts?limit=1000"; path != ""; {
		var page struct {
			Results []struct {
				ContractID string                     `json:"contractId"`
				Tags       map[string]json.RawMessage `json:"tags"`
			} `json:"results"`
			Next *string `json:"next"`
		}
		if err := getJSON(ctx, client, base+path, &page); err != nil {
			return nil, err
		}
		for _, c := range page.Results {
			w.ids = append(w.ids, c.ContractID)
			for t := range c.Tags {
				tags[t]++
			}
		}
		path = ""
		if page.Next != nil {
			path = *page.Next
		}
	}
	queries := []string{"status=open", "status=closed", "roleCurrency="}
	// The most common tag: a selective filter that needs the tag index.
	if len(tags) > 0 {
		keys := make([]string, 0, len(tags))
		for t := range tags {
			keys = append(keys, t)
		}
		slices.Sort(keys)
		best := keys[0]
		for _, t := range keys {
			if tags[t] > tags[best] {
				best = t
			}
		}
		queries = append(queries, "tag="+url.QueryEscape(best))
	}
	for _, q := range queries {
		f := listFilter{query: q, cursors: []string{""}}
		path := "/contracts?limit=100&" + q
		for range 50 {
			var page struct {
				Cursor *string `json:"cursor"`
			}
			if err := getJSON(ctx, client, base+path, &page); err != nil {
				return nil, err
			}
			if page.Cursor == nil || *page.Cursor == "" {
				break
			}
			f.cursors = append(f.cursors, *page.Cursor)
			path = "/contracts?limit=100&" + q + "&cursor=" + url.QueryEscape(*page.Cursor)
		}
		w.filters = append(w.filters, f)
	}
	return w, nil
}

// getJSON asks for u and decodes a 200 answer.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("GET %s: %d %s", u, res.StatusCode, body)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// runQueryLoad runs clients goroutines asking for op in a loop for dur.
// Lookups ask for a random contract; lists for a random filter and a random
// page of it.
func runQueryLoad(ctx context.Context, client *http.Client, base, op string, clients int, dur time.Duration, w *workload) QueryRow {
	row := QueryRow{Op: op, Clients: clients}
	byFilter := make([]latencies, len(w.filters))
	res := querytest.Load(ctx, client, clients, 8, dur, func(rng *rand.Rand) querytest.Request {
		if op == opLookup {
			return querytest.Request{URL: base + "/contracts/" + url.PathEscape(w.ids[rng.IntN(len(w.ids))])}
		}
		fi := rng.IntN(len(w.filters))
		f := w.filters[fi]
		path := "/contracts?limit=100&" + f.query
		if cur := f.cursors[rng.IntN(len(f.cursors))]; cur != "" {
			path += "&cursor=" + url.QueryEscape(cur)
		}
		return querytest.Request{URL: base + path, List: op == opList, Took: func(d time.Duration) { byFilter[fi].add(d) }}
	})
	var lat latencies
	lat.add(res.Latencies...)
	row.Requests, row.Errors = res.Requests, res.Errors
	row.Seconds = res.Elapsed.Seconds()
	row.RequestsPerS = float64(row.Requests) / row.Seconds
	row.ContractsPerS = float64(res.Contracts) / row.Seconds
	row.P50Ms, row.P99Ms, _ = lat.quantiles()
	if op == opList {
		for i, f := range w.filters {
			fl := FilterLatency{Filter: f.query, Pages: len(f.cursors)}
			fl.P50Ms, fl.P99Ms, fl.Requests = byFilter[i].quantiles()
			row.Filters = append(row.Filters, fl)
		}
	}
	return row
}
