package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// BenchmarkListPaging compares the Runtime view's contract list with the
// native one: PAGING_CLIENTS clients (16) each page through all of
// PAGING_CONTRACTS contracts (6,000) in pages of 100, newest first, over
// loopback HTTP, the native list following its next links
// (/contracts?order=desc&limit=100) and the view following Next-Range
// (/runtime/contracts, Range contractId;limit 100). The two alternate in
// phases of PAGING_SECONDS (3) for PAGING_ROUNDS rounds (3), so that both
// see the same machine; it reports each one's pages/s and p99 and the
// view's pages/s as a ratio to the native list's. The store is PostgreSQL
// (PAGING_BACKEND=sqlite for SQLite), filled directly.
//
//	go test -run '^$' -bench BenchmarkListPaging -benchtime 1x ./query/
func BenchmarkListPaging(b *testing.B) {
	n := envInt("PAGING_CONTRACTS", 6000)
	clients := envInt("PAGING_CLIENTS", 16)
	phase := time.Duration(envInt("PAGING_SECONDS", 3)) * time.Second
	rounds := envInt("PAGING_ROUNDS", 3)
	store := openPagingStore(b)
	defer store.Close()
	head := fillContracts(b, store, n)
	f := serveStore(b, store, head)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	native := func(ctx context.Context) (int, error) {
		pages := 0
		var buf bytes.Buffer
		for path := "/contracts?order=desc&limit=100"; path != ""; pages++ {
			body, _, err := getPage(ctx, client, &buf, f.base+path, "", http.StatusOK)
			if err != nil {
				return pages, err
			}
			// The next link, read as cheaply as the view's Next-Range
			// header: the clients' share of the CPU stays the same.
			path = ""
			if i := bytes.Index(body, []byte(`],"next":"`)); i >= 0 {
				rest := body[i+len(`],"next":"`):]
				path = string(rest[:bytes.IndexByte(rest, '"')])
			}
		}
		return pages, nil
	}
	view := func(ctx context.Context) (int, error) {
		pages := 0
		var buf bytes.Buffer
		for rng := "contractId;limit 100"; rng != ""; pages++ {
			_, h, err := getPage(ctx, client, &buf, f.base+"/runtime/contracts", rng, http.StatusPartialContent)
			if err != nil {
				return pages, err
			}
			rng = h.Get("Next-Range")
		}
		return pages, nil
	}
	for _, check := range []func(context.Context) (int, error){native, view} {
		if pages, err := check(context.Background()); err != nil || pages < n/100 {
			b.Fatalf("a listing: %d pages, %v", pages, err)
		}
	}
	var nat, rt pagingResult
	for b.Loop() {
		for range rounds {
			nat.add(runPaging(clients, phase, native))
			rt.add(runPaging(clients, phase, view))
		}
	}
	if nat.errors+rt.errors > 0 {
		b.Fatalf("failed pages: %d native, %d view", nat.errors, rt.errors)
	}
	b.Logf("%d contracts, %d clients, %d rounds of %s each: native %.0f pages/s (p99 %.1f ms, %.2f ms CPU/page), "+
		"view %.0f pages/s (p99 %.1f ms, %.2f ms CPU/page): %.2fx the pages/s, %.2fx the CPU/page",
		n, clients, rounds, phase, nat.rate(), ms(nat.p99()), nat.cpuPerPage(), rt.rate(), ms(rt.p99()), rt.cpuPerPage(),
		rt.rate()/nat.rate(), rt.cpuPerPage()/nat.cpuPerPage())
	b.ReportMetric(nat.rate(), "native-pages/s")
	b.ReportMetric(rt.rate(), "view-pages/s")
	b.ReportMetric(rt.rate()/nat.rate(), "view/native")
	b.ReportMetric(ms(nat.p99()), "native-p99-ms")
	b.ReportMetric(ms(rt.p99()), "view-p99-ms")
	b.ReportMetric(nat.cpuPerPage(), "native-cpu-ms/page")
	b.ReportMetric(rt.cpuPerPage(), "view-cpu-ms/page")
}

// getPage asks for one page (with a Range header when rng is set) and
// reads its body into buf, whose bytes it returns (valid until the next
// read into buf). A client reads its pages into one buffer: the clients
// share the process with the server, and reading each page into a fresh
// one would cost them, and the collector, in proportion to the page's size
// (a view page is 1.5x the bytes of a native one: its items carry the
// Runtime's resource and links wrappers).
func getPage(ctx context.Context, client *http.Client, buf *bytes.Buffer, u, rng string, want int) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	buf.Reset()
	_, err = buf.ReadFrom(res.Body)
	if err == nil && res.StatusCode != want {
		err = fmt.Errorf("%s: %d", u, res.StatusCode)
	}
	return buf.Bytes(), res.Header, err
}

// pagingResult is what phases of one list measured.
type pagingResult struct {
	pages, errors int
	elapsed       time.Duration
	cpu           time.Duration   // the process's (server and clients)
	lat           []time.Duration // per page
}

func (r *pagingResult) add(o pagingResult) {
	r.pages += o.pages
	r.errors += o.errors
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.lat = append(r.lat, o.lat...)
}

func (r *pagingResult) rate() float64 { return float64(r.pages) / r.elapsed.Seconds() }

// cpuPerPage is the process's CPU time per page, in ms.
func (r *pagingResult) cpuPerPage() float64 { return ms(r.cpu) / float64(max(1, r.pages)) }

// processCPU is the CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (r *pagingResult) p99() time.Duration {
	return quantile(r.lat, 0.99)
}

// runPaging runs clients that list until the phase ends (a listing cut by
// the end counts its pages).
func runPaging(clients int, phase time.Duration, list func(context.Context) (int, error)) pagingResult {
	ctx, cancel := context.WithTimeout(context.Background(), phase)
	defer cancel()
	var mu sync.Mutex
	var res pagingResult
	var wg sync.WaitGroup
	start, cpu := time.Now(), processCPU()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				pages, err := list(ctx)
				d := time.Since(t0)
				mu.Lock()
				res.pages += pages
				if err != nil && ctx.Err() == nil {
					res.errors++
				}
				for range pages {
					res.lat = append(res.lat, d/time.Duration(max(1, pages)))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed, res.cpu = time.Since(start), processCPU()-cpu
	return res
}

// fillContracts commits n contracts (tagged, with metadata, a third with
// roles) in batches, as the projection would have, and returns the head.
func fillContracts(b testing.TB, store contractstore.Backend, n int) contractstore.Head {
	var head contractstore.Head
	for seq := 1; seq <= n; {
		p := &contractstore.CommitParams{PrevSeq: head.Seq, Head: head}
		for ; seq <= n && len(p.Contracts) < 500; seq++ {
			var h chain.Hash32
			copy(h[:], fmt.Sprintf("%032d", seq))
			id := chain.TxOutRef{TxID: h, Index: uint32(seq % 3)}
			blk := chain.BlockHeader{Slot: uint64(seq) * 20, BlockNo: uint64(seq), Hash: h}
			var rc []byte
			if seq%3 == 0 {
				rc = h[:28]
			}
			p.Contracts = append(p.Contracts, contractstore.Contract{ID: id, Seq: int64(seq), Block: blk, Version: "v5",
				RolesCurrency: rc, Address: "addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs",
				Tags: json.RawMessage(`{"devnet":null}`), Metadata: json.RawMessage(`{"1564":[2,[["devnet"]]]}`),
				Status: contractstore.StatusOpen, Steps: seq % 4, LastSeq: int64(seq), LastBlock: blk,
				Body: &contractstore.ContractBody{InitialContract: json.RawMessage(`"close"`), InitialState: json.RawMessage(`{}`),
					Contract: json.RawMessage(`"close"`), State: json.RawMessage(`{}`),
					Assets: record.Assets{Tokens: map[string]map[string]json.Number{}}, Payouts: []contractstore.PayoutSummary{}}})
			p.Tags = append(p.Tags, contractstore.ContractTag{ContractID: id, Seq: int64(seq), Tag: "devnet"})
			p.Head.Contracts++
			p.Head.OpenContracts++
			p.Head.Position = contractstore.Position{Seq: int64(seq), Block: blk}
		}
		if err := store.Commit(context.Background(), p); err != nil {
			b.Fatal(err)
		}
		head = p.Head
	}
	return head
}

// openPagingStore opens the paging benchmarks' contract store: PostgreSQL,
// or SQLite with PAGING_BACKEND=sqlite.
func openPagingStore(b *testing.B) contractstore.Backend {
	if os.Getenv("PAGING_BACKEND") == "sqlite" {
		return contractstoretest.OpenSQLite(b, b.TempDir())
	}
	u := storagetest.PostgresURL(b)
	return contractstoretest.OpenPostgres(b, u, storagetest.NewSchema(b, u, "cvtest"))
}

// BenchmarkListPage measures one page of 100 contracts of each list in the
// handler (no network, one goroutine), from a place in the middle of the
// list: the server's cost per page, and its allocations, alone.
//
//	go test -run '^$' -bench BenchmarkListPage -benchmem ./query/
func BenchmarkListPage(b *testing.B) {
	store := openPagingStore(b)
	defer store.Close()
	head := fillContracts(b, store, 2000)
	f := serveStore(b, store, head)
	h := f.srv.Handler()
	// The next page of the first, on each list.
	first := httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/runtime/contracts", nil))
	nextRange := first.Header().Get("Next-Range")
	first = httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/contracts?order=desc&limit=100", nil))
	var env struct {
		Next string `json:"next"`
	}
	if err := json.Unmarshal(first.Body.Bytes(), &env); err != nil || env.Next == "" || nextRange == "" {
		b.Fatalf("no second page: %v %q %q", err, env.Next, nextRange)
	}
	for _, c := range []struct {
		name, path, rng string
		want            int
	}{{"native", env.Next, "", http.StatusOK}, {"view", "/runtime/contracts", nextRange, http.StatusPartialContent}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, c.path, nil)
				if c.rng != "" {
					req.Header.Set("Range", c.rng)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != c.want {
					b.Fatalf("%s: %d %s", c.path, w.Code, w.Body.Bytes())
				}
			}
		})
	}
}
