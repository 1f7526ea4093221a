package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReaderQueryThroughput measures query throughput against one reader
// and against two readers of the same database, the same clients and
// queries in both, rounds alternating: a measurement, not a check (it
// fails only when queries fail). Run it with
//
//	MARLOWE_BENCH_READERS=1 MARLOWE_TEST_DATABASE_URL=... go test -run TestReaderQueryThroughput -v ./cmd/marlowe-follower/
//
// (MARLOWE_BENCH_SECONDS sets each round's length, default 10).
func TestReaderQueryThroughput(t *testing.T) {
	if os.Getenv("MARLOWE_BENCH_READERS") != "1" {
		t.Skip("a measurement: set MARLOWE_BENCH_READERS=1")
	}
	base := testDatabaseURL(t)
	bin := buildBinary(t)
	dbURL, _ := soakDatabase(t, base)
	socket := filepath.Join(t.TempDir(), "node.socket")
	const blocks = 3000
	startDevnetProc(t, bin, socket, "devnet", "--socket", socket, "--block-rate", "0", "--blocks", strconv.Itoa(blocks),
		"--rollback-every", "0", "--marlowe-share", "0.5", "--seed", "17", "--log-level", "error")
	writer := startService(t, bin, "all", dbURL, socket)
	waitUntil(t, 5*time.Minute, "the writer at the devnet's last block", func() bool {
		st, err := writer.status()
		return err == nil && st.Committed.BlockNo >= blocks
	})
	readers := []*child{startService(t, bin, "reader", dbURL, ""), startService(t, bin, "reader", dbURL, "")}
	for _, r := range readers {
		waitUntil(t, time.Minute, "a reader answers", func() bool { _, err := r.status(); return err == nil })
	}
	seconds := 10
	if s, err := strconv.Atoi(os.Getenv("MARLOWE_BENCH_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	const clients = 16
	paths := []string{"/contracts?limit=50", "/contracts?limit=10&status=open", "/payouts?limit=50", "/status"}
	round := func(targets []*child) float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
		defer cancel()
		var done, failed atomic.Int64
		var wg sync.WaitGroup
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
		start := time.Now()
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				target := targets[i%len(targets)]
				for n := 0; ctx.Err() == nil; n++ {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.base+paths[(i+n)%len(paths)], nil)
					resp, err := client.Do(req)
					if err != nil {
						if ctx.Err() == nil {
							failed.Add(1)
						}
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						failed.Add(1)
						continue
					}
					done.Add(1)
				}
			}()
		}
		wg.Wait()
		if f := failed.Load(); f > 0 {
			t.Fatalf("%d queries failed", f)
		}
		return float64(done.Load()) / time.Since(start).Seconds()
	}
	var one, two []float64
	measured := func(name string, targets []*child) float64 {
		busy0, total0 := machineCPU(t)
		cpu0 := procCPU(t, readers)
		qps := round(targets)
		busy1, total1 := machineCPU(t)
		cpu1 := procCPU(t, readers)
		t.Logf("%s: %.0f queries/s; machine CPU busy %.0f%%; the readers used %.1f CPU s (%.2f cores)", name, qps,
			100*(busy1-busy0)/(total1-total0), cpu1-cpu0, (cpu1-cpu0)/float64(seconds))
		return qps
	}
	for range 2 {
		one = append(one, measured("one reader", readers[:1]))
		two = append(two, measured("two readers", readers))
	}
	mean := func(v []float64) float64 { return (v[0] + v[1]) / 2 }
	t.Logf("queries/s, %d clients, %d s rounds: one reader %.0f, %.0f; two readers %.0f, %.0f; two over one %.2f",
		clients, seconds, one[0], one[1], two[0], two[1], mean(two)/mean(one))
}

// machineCPU returns the machine's busy and total CPU time so far, in
// clock ticks (/proc/stat).
func machineCPU(t *testing.T) (busy, total float64) {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(string(data), "\n", 2)[0]
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// procCPU returns the CPU seconds the processes used so far.
func procCPU(t *testing.T, ps []*child) float64 {
	t.Helper()
	var sum float64
	for _, p := range ps {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// The fields after the command's closing parenthesis; utime and
		// stime are the 12th and 13th of them, in clock ticks (100/s).
		rest := string(data)[strings.LastIndexByte(string(data), ')')+2:]
		f := strings.Fields(rest)
		u, _ := strconv.ParseFloat(f[11], 64)
		s, _ := strconv.ParseFloat(f[12], 64)
		sum += (u + s) / 100
	}
	return sum
}
