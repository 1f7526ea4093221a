package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	actorpipe "github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// timedBackend is a history backend that notes when each commit returned,
// so that a subscriber can tell how long a record took from its commit to
// the subscriber.
type timedBackend struct {
	history.Backend
	mu      sync.Mutex
	commits []commitTime // in seq order
}

// commitTime is when the commit whose last record is LastSeq returned.
type commitTime struct {
	LastSeq int64
	At      time.Time
}

// Commit implements history.Backend.
func (b *timedBackend) Commit(ctx context.Context, p *history.CommitParams) error {
	err := b.Backend.Commit(ctx, p)
	if err == nil && len(p.Records) > 0 {
		now := time.Now()
		b.mu.Lock()
		b.commits = append(b.commits, commitTime{LastSeq: p.Records[len(p.Records)-1].Seq, At: now})
		b.mu.Unlock()
	}
	return err
}

// committedAt returns when the record seq was committed.
func (b *timedBackend) committedAt(seq int64) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := sort.Search(len(b.commits), func(i int) bool { return b.commits[i].LastSeq >= seq })
	if i == len(b.commits) {
		return time.Time{}, false
	}
	return b.commits[i].At, true
}

// pipeline is the ingest side of the service (follower, processor,
// history store: pipeline.Start, as service.Start runs it) over a
// timedBackend.
type pipeline struct {
	pipe     *actorpipe.Pipeline
	stores   *stores.Stores // the backend's, closed with it
	backend  *timedBackend
	store    *history.Store
	handle   *history.Handle
	progress *chainsync.Progress
}

// startPipeline opens the store and starts following the node at socket.
func startPipeline(ctx context.Context, socket string, spec storeSpec) (*pipeline, error) {
	cfg, err := serviceConfig(socket, spec)
	if err != nil {
		return nil, err
	}
	st, err := stores.Open(ctx, cfg) // migrated, its network checked
	if err != nil {
		return nil, err
	}
	p := &pipeline{backend: &timedBackend{Backend: st.History}, stores: st, progress: &chainsync.Progress{}}
	slots, err := network.SlotConfig(devnet.NetworkMagic)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	start, err := chainsync.ParseStart("origin")
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	p.pipe, err = actorpipe.Start(ctx, actorpipe.Config{
		Logger: zap.NewNop(), History: p.backend, Store: history.DefaultStoreConfig(), Slots: slots, Progress: p.progress,
		Follower: &chainsync.Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, Start: start},
	})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	p.store, p.handle = p.pipe.Store, p.pipe.Handle
	return p, nil
}

// waitBlocks waits until the pipeline has committed every block up to tip.
func (p *pipeline) waitBlocks(ctx context.Context, tip uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		s := p.progress.Snapshot()
		if s.Point.BlockNo >= tip && p.handle.Stats().BlocksCommitted.Load() >= s.Blocks {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pipeline not synced after %s (block %d of %d, %s)", limit, s.Point.BlockNo, tip, s.LastError)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop takes the pipeline down in order and closes the store.
func (p *pipeline) stop() error {
	err := p.pipe.Stop(config.DefaultShutdownGrace)
	return errors.Join(err, p.stores.Close())
}

// tip is the node's tip as the follower last saw it.
func (p *pipeline) tip() chain.Tip { return p.progress.Snapshot().Tip }

// startStreamingServer starts the WebSocket streaming server on a loopback
// port over the pipeline's history.
func (p *pipeline) startStreamingServer(ctx context.Context) (*streaming.Server, string, error) {
	cfg := streaming.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	srv, err := streaming.New(cfg, streaming.Deps{History: p.handle, System: p.pipe.System, Tip: p.tip})
	if err != nil {
		return nil, "", err
	}
	if err := srv.Start(ctx); err != nil {
		return nil, "", err
	}
	return srv, "ws://" + srv.Addr().String() + "/", nil
}

// catchUpParams is a catch-up job: fill a store from the node at Socket
// (Tip blocks), then read the whole history with one subscriber.
type catchUpParams struct {
	Socket string    `json:"socket"`
	Tip    uint64    `json:"tip"`
	Store  storeSpec `json:"store"`
}

// CatchUpRow is the catch-up rate of one subscriber that reads the whole
// history from origin.
type CatchUpRow struct {
	Backend        string  `json:"backend"`
	Transport      string  `json:"transport"`
	Records        int64   `json:"records"`
	Seconds        float64 `json:"seconds"`
	RecordsPerSec  float64 `json:"recordsPerSecond"`
	CPUPer1kRecord float64 `json:"cpuSecondsPer1000Records"`
}

// runCatchUpJob fills the store, then measures one subscriber reading it
// all: in process (history.Subscription) and, over loopback, WebSocket
// clients in ack mode (the default, acknowledging every batch) and in
// broadcast mode.
func runCatchUpJob(ctx context.Context, prm catchUpParams) (any, error) {
	p, err := startPipeline(ctx, prm.Socket, prm.Store)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := p.waitBlocks(ctx, prm.Tip, 30*time.Minute); err != nil {
		return nil, err
	}
	head := p.handle.Head()
	progress("  catch-up: history of %d records (%s)", head, prm.Store.backendName())
	var rows []CatchUpRow
	measure := func(transport string, read func(ctx context.Context) (int64, error)) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		m := startMeter("")
		n, err := read(ctx)
		if err != nil {
			return fmt.Errorf("%s catch-up: %w", transport, err)
		}
		secs, cpu := m.elapsed()
		rows = append(rows, CatchUpRow{Backend: prm.Store.backendName(), Transport: transport, Records: n, Seconds: secs,
			RecordsPerSec: float64(n) / secs, CPUPer1kRecord: cpu / float64(max(n, 1)) * 1000})
		progress("  catch-up %s: %d records in %.2fs, %.0f records/s", transport, n, secs, float64(n)/secs)
		return nil
	}
	if err := measure("in process (history.Subscription)", func(ctx context.Context) (int64, error) {
		sub := p.handle.Subscribe(record.Filter{}, record.From{Kind: record.FromOrigin})
		defer sub.Close()
		var n int64
		for n < head {
			b, err := sub.Next(ctx)
			if err != nil {
				return n, err
			}
			n += int64(len(b.Records))
		}
		return n, nil
	}); err != nil {
		return nil, err
	}
	srv, url, err := p.startStreamingServer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}()
	for _, mode := range []protocol.Mode{protocol.ModeAck, protocol.ModeBroadcast} {
		label := fmt.Sprintf("WebSocket, %s mode", mode)
		if err := measure(label, func(ctx context.Context) (int64, error) {
			return wsCatchUp(ctx, url, mode, head)
		}); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// wsCatchUp reads the history from origin over one WebSocket stream until
// it has head records.
func wsCatchUp(ctx context.Context, url string, mode protocol.Mode, head int64) (int64, error) {
	c, err := client.New(client.Options{URL: url})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	s, err := c.Subscribe(ctx, client.Request{Stream: "catch-up", Filter: protocol.Filter{All: true}, From: "origin", Mode: mode})
	if err != nil {
		return 0, err
	}
	var n int64
	for n < head {
		b, err := s.Next(ctx)
		if err != nil {
			return n, err
		}
		n += int64(len(b.Records))
		if mode == protocol.ModeAck {
			if err := s.Ack(ctx, b); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// latencyParams is a latency job: follow a node that makes new blocks at a
// steady rate and measure, for each number of in-process subscribers, how
// long committed records take to reach them (the WebSocket subscribers are
// measured against the service binary: fanout.go).
type latencyParams struct {
	Socket      string    `json:"socket"`
	Store       storeSpec `json:"store"`
	Subscribers []int     `json:"subscribers"`
	Seconds     float64   `json:"seconds"`
}

// LatencyRow is the commit-to-client latency with some subscribers: from
// the moment the history store's commit returned to the moment a
// subscriber had the batch, one sample per subscriber and batch.
type LatencyRow struct {
	Backend     string  `json:"backend"`
	Transport   string  `json:"transport"`
	Subscribers int     `json:"subscribers"`
	Samples     int     `json:"samples"`
	Commits     int     `json:"commits"`
	P50Ms       float64 `json:"p50Ms"`
	P99Ms       float64 `json:"p99Ms"`
	// Dropped counts subscribers the store sent back to catch up because
	// their queue was full, during the measurement.
	Dropped uint64 `json:"dropped"`
	// Missed counts subscribers that were not receiving when the measurement
	// began (they could not subscribe in time).
	Missed int `json:"missed,omitempty"`
}

// runLatencyJob measures commit-to-client latency.
func runLatencyJob(ctx context.Context, prm latencyParams) (any, error) {
	p, err := startPipeline(ctx, prm.Socket, prm.Store)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	// Wait until the follower is at the tip and committing block by block.
	deadline := time.Now().Add(2 * time.Minute)
	for p.handle.Stats().Commits.Load() < 5 || p.progress.Snapshot().BlocksBehind() > 1 {
		if time.Now().After(deadline) {
			return nil, errors.New("the pipeline did not reach the tip of the live devnet")
		}
		time.Sleep(50 * time.Millisecond)
	}
	dur := time.Duration(prm.Seconds * float64(time.Second))
	var rows []LatencyRow
	for _, n := range prm.Subscribers {
		row, err := p.latencyInProcess(ctx, n, dur)
		if err != nil {
			return nil, err
		}
		row.Backend = prm.Store.backendName()
		rows = append(rows, row)
		progress("  latency, %d in-process subscribers: p50 %.2f ms, p99 %.2f ms (%d samples)", n, row.P50Ms, row.P99Ms, row.Samples)
	}
	return rows, nil
}

// latencyRun is the shared part of a latency measurement: subscribers
// report each batch's first seq; once all receive, samples are kept for dur.
type latencyRun struct {
	p         *pipeline
	lat       latencies
	measuring atomic.Bool
	ready     atomic.Int64
}

// observe records the latency of a batch whose first record is seq.
func (r *latencyRun) observe(seq int64, got time.Time) {
	if !r.measuring.Load() {
		return
	}
	if at, ok := r.p.backend.committedAt(seq); ok {
		r.lat.add(got.Sub(at))
	}
}

// run waits for n subscribers to be receiving, then measures for dur.
func (r *latencyRun) run(ctx context.Context, n int, dur time.Duration) (commits int, dropped uint64, missed int) {
	deadline := time.Now().Add(60 * time.Second)
	for r.ready.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	missed = n - int(r.ready.Load())
	st := r.p.handle.Stats()
	c0, d0 := st.Commits.Load(), st.LiveDropped.Load()
	r.measuring.Store(true)
	select {
	case <-time.After(dur):
	case <-ctx.Done():
	}
	r.measuring.Store(false)
	return int(st.Commits.Load() - c0), st.LiveDropped.Load() - d0, missed
}

// latencyInProcess measures n in-process subscriptions from the tip.
func (p *pipeline) latencyInProcess(ctx context.Context, n int, dur time.Duration) (LatencyRow, error) {
	r := &latencyRun{p: p}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := p.handle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip})
			defer sub.Close()
			first := true
			for {
				b, err := sub.Next(ctx)
				if err != nil {
					return
				}
				got := time.Now()
				if first && b.Live {
					first = false
					r.ready.Add(1)
				}
				if len(b.Records) > 0 {
					r.observe(b.Records[0].Seq, got)
				}
			}
		}()
	}
	commits, dropped, missed := r.run(ctx, n, dur)
	cancel()
	wg.Wait()
	p50, p99, samples := r.lat.quantiles()
	return LatencyRow{Transport: "in process (history.Subscription)", Subscribers: n, Samples: samples, Commits: commits,
		P50Ms: p50, P99Ms: p99, Dropped: dropped, Missed: missed}, nil
}
