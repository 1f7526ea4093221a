package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/protocol"
)

// BenchmarkRoundTrip measures what a client costs per batch, apart from
// the server: a stand-in server sends each of conns connections a batch
// (the devnet's records of the fuzz corpus, as at the tip: one to three
// records) as soon as the one before is acknowledged, from frames encoded
// once. client=raw reads each frame with the WebSocket library and takes
// the batch number out of its text; client=go is the Go client (Next,
// Ack). Same run, same stand-in: the difference is the client's. Reported:
// the time per batch over all connections, the process's CPU per batch
// (the stand-in's share is the same for both) and the 99th percentile of a
// batch's round trip, from the stand-in writing it to its reading the ack.
func BenchmarkRoundTrip(b *testing.B) {
	records := corpusRecords(b)
	for _, conns := range []int{1, 100} {
		for _, kind := range []string{"raw", "go"} {
			b.Run(fmt.Sprintf("conns=%d/client=%s", conns, kind), func(b *testing.B) {
				roundTrips(b, kind, conns, records)
			})
		}
	}
}

func roundTrips(b *testing.B, kind string, conns int, records [][]byte) {
	per := max(1, b.N/conns)
	// Every connection gets the same batches, encoded before the clock
	// starts: the stand-in only writes them and reads the acks.
	frames := make([][]byte, per+1)
	for n := 1; n <= per; n++ {
		var f strings.Builder
		f.WriteString(`{"type":"batch","stream":"s","batch":` + strconv.Itoa(n) + `,"records":[`)
		for k := range 1 + n%3 {
			if k > 0 {
				f.WriteByte(',')
			}
			f.Write(records[(n+k)%len(records)])
		}
		f.WriteString(`],"cursor":"` + strconv.Itoa(n) + `","tip":{"slot":5,"blockNo":5,"seq":` + strconv.Itoa(n) + `}}`)
		frames[n] = []byte(f.String())
	}
	// Each batch's round trip, from the stand-in's write to its reading
	// the ack: what the client takes to answer, queueing included.
	var mu sync.Mutex
	var trips []time.Duration
	var served sync.WaitGroup
	served.Add(conns)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			served.Done()
			return
		}
		defer ws.CloseNow()
		ctx := context.Background()
		if _, _, err := ws.Read(ctx); err != nil { // the subscribe
			return
		}
		_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribed","stream":"s","cursor":"0","mode":"ack","tip":{"slot":1,"blockNo":1,"seq":1}}`))
		mine := make([]time.Duration, 0, per)
		func() {
			defer served.Done()
			defer func() {
				mu.Lock()
				trips = append(trips, mine...)
				mu.Unlock()
			}()
			for n := 1; n <= per; n++ {
				t0 := time.Now()
				if err := ws.Write(ctx, websocket.MessageText, frames[n]); err != nil {
					return
				}
				if _, _, err := ws.Read(ctx); err != nil { // the ack
					return
				}
				mine = append(mine, time.Since(t0))
			}
		}()
		_, _, _ = ws.Read(ctx) // until the client goes
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, conns)
	for range conns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			if kind == "raw" {
				errs <- rawClient(url, per, &ready, start)
			} else {
				errs <- goClient(url, per, &ready, start)
			}
		}()
	}
	ready.Wait()
	cpu0 := cpuNow()
	b.ResetTimer()
	close(start)
	done.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	served.Wait() // every connection got as far as its last ack
	b.ReportMetric(float64((cpuNow()-cpu0).Nanoseconds())/float64(per*conns)/1000, "cpu-µs/batch")
	slices.Sort(trips)
	if len(trips) > 0 {
		b.ReportMetric(float64(trips[len(trips)*99/100].Microseconds()), "p99-µs")
	}
}

func rawClient(url string, n int, ready *sync.WaitGroup, start chan struct{}) error {
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		ready.Done()
		return err
	}
	defer ws.CloseNow()
	ws.SetReadLimit(-1)
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"subscribe","stream":"s","filter":{"all":true}}`))
	if _, _, err := ws.Read(ctx); err != nil {
		ready.Done()
		return err
	}
	ready.Done()
	<-start
	var buf bytes.Buffer
	key := []byte(`"batch":`)
	for range n {
		_, r, err := ws.Reader(ctx)
		if err != nil {
			return err
		}
		buf.Reset()
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		data := buf.Bytes()
		k := bytes.Index(data, key)
		end := k + len(key)
		for end < len(data) && data[end] >= '0' && data[end] <= '9' {
			end++
		}
		ack := `{"type":"ack","stream":"s","batch":` + string(data[k+len(key):end]) + `}`
		if err := ws.Write(ctx, websocket.MessageText, []byte(ack)); err != nil {
			return err
		}
	}
	return nil
}

func goClient(url string, n int, ready *sync.WaitGroup, start chan struct{}) error {
	ctx := context.Background()
	c, err := New(Options{URL: url})
	if err != nil {
		ready.Done()
		return err
	}
	defer c.Close()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := c.Subscribe(sctx, Request{Stream: "s", Filter: protocol.Filter{All: true}})
	ready.Done()
	if err != nil {
		return err
	}
	<-start
	for range n {
		bt, err := s.Next(ctx)
		if err != nil {
			return err
		}
		if len(bt.Records) == 0 {
			return fmt.Errorf("batch %d without records", bt.Number)
		}
		if err := s.Ack(ctx, bt); err != nil {
			return err
		}
	}
	return nil
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
