// Package streamingtest runs a real history store and a streaming server
// over it for the streaming tests and benchmarks: an embedded backend, the
// store actor (a pipeline without a follower), and a feed that drives the
// devnet generator's chain (realistic Marlowe lifecycles and rollbacks)
// through the classifier and the processor into the store, the way the
// service's pipeline does without a node. What a test says to the server
// and checks of its answers (a raw WebSocket, collectors, the records a
// subscription must deliver) is streaming/streamtest's.
package streamingtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/processor"
	"github.com/marlowe-follower/follower/history/record"
)

// History is a running history store over an embedded backend: a
// pipeline (pipeline.Start) without a follower, which the Feed stands in
// for.
type History struct {
	Dir     string
	Backend history.Backend
	Pipe    *pipeline.Pipeline
	System  *actor.ActorSystem
	Store   *history.Store
	Handle  *history.Handle
	stop    sync.Once
}

// PID returns the history store's actor.
func (h *History) PID() *actor.PID { return h.Pipe.Child(pipeline.Store) }

// NewHistory opens the store in dir (a new temporary directory when
// empty) and spawns its actor; it stops when the test ends.
func NewHistory(t testing.TB, dir string, cfg *history.StoreConfig) *History {
	t.Helper()
	ctx := context.Background()
	if dir == "" {
		dir = t.TempDir()
	}
	b := historytest.OpenSQLite(t, dir, devnet.NetworkMagic)
	c := history.DefaultStoreConfig()
	if cfg != nil {
		c = *cfg
	}
	slots := chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}
	p, err := pipeline.Start(ctx, pipeline.Config{Logger: zap.NewNop(), History: b, Store: c, Slots: slots})
	if err != nil {
		t.Fatal(err)
	}
	h := &History{Dir: dir, Backend: b, Pipe: p, System: p.System, Store: p.Store, Handle: p.Handle}
	t.Cleanup(h.Stop)
	return h
}

// Stop stops the pipeline and closes the backend (once).
func (h *History) Stop() {
	h.stop.Do(func() {
		_ = h.Pipe.Stop(time.Minute)
		_ = h.Backend.Close()
	})
}

// Feed drives a generated chain into a store. It is used by one goroutine.
type Feed struct {
	h     *History
	gen   *devnet.Generator
	cls   *classify.Classifier
	proc  *processor.Processor
	Slots chain.SlotConfig
	// FarTip makes the store believe it is far behind the node, so that it
	// batches commits (bulk loading); otherwise it commits every block.
	FarTip bool
	// OnCommit, when set, is called with each block's number as the store
	// commits it (from the store's goroutine).
	OnCommit func(blockNo uint64)

	pending atomic.Int64
	pool    []record.Record // records seen, for Replicate
	last    chain.BlockHeader
	mu      sync.Mutex
	cond    *sync.Cond
	ops     int
	blocks  int
	rbs     int
}

// NewFeed returns a feed of the generator's chain (devnet defaults with the
// given seed, Marlowe share and rollback frequency; rollbackEvery 0: none).
func NewFeed(h *History, seed int64, marloweShare float64, rollbackEvery int) (*Feed, error) {
	cfg := devnet.DefaultGeneratorConfig()
	cfg.Seed, cfg.MarloweShare, cfg.RollbackEvery = seed, marloweShare, rollbackEvery
	cfg.MeanBlockSize = 2000
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	slots := chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}
	f := &Feed{h: h, gen: g, cls: classify.New(classify.Options{}), proc: processor.New(slots, zap.NewNop(), nil), Slots: slots}
	f.cond = sync.NewCond(&f.mu)
	return f, nil
}

// Step generates the chain's next change (a block or a rollback) and sends
// it to the store. It reports whether it was a rollback.
func (f *Feed) Step() (rollback bool, err error) {
	op, err := f.gen.Next()
	if err != nil {
		return false, err
	}
	var ev classify.Event
	var blockNo uint64
	if op.Rollback != nil {
		tip := f.gen.Tip()
		ev, err = f.cls.RollBackward(*op.Rollback, f.tip(tip))
		f.rbs++
	} else {
		blockNo = op.Block.Header.BlockNo
		ev, err = f.cls.RollForward(op.Block.Type, op.Block.Raw, f.tip(op.Block.Header))
		f.blocks++
	}
	if err != nil {
		return false, fmt.Errorf("classifying: %w", err)
	}
	f.ops++
	st := f.proc.Process(ev)
	if st == nil {
		return op.Rollback != nil, nil
	}
	if st.Forward != nil {
		f.last = st.Forward.Header
		if len(f.pool) < 2000 {
			f.pool = append(f.pool, st.Forward.Records...)
		}
	}
	f.send(st, blockNo)
	return op.Rollback != nil, nil
}

// send hands a step to the store, counting it until it is committed.
func (f *Feed) send(st *history.Step, blockNo uint64) {
	f.pending.Add(1)
	onCommit := f.OnCommit
	st.Release = func() {
		if onCommit != nil && blockNo > 0 {
			onCommit(blockNo)
		}
		if f.pending.Add(-1) == 0 {
			f.mu.Lock()
			f.cond.Broadcast()
			f.mu.Unlock()
		}
	}
	f.h.System.Root.Send(f.h.PID(), st)
}

// Replicate appends blocks of perBlock records each, copies of the
// generated records seen so far (realistic payloads, fast to make), until
// n records are sent. Only Replicate may follow it: its blocks extend the
// chain past the generator's.
func (f *Feed) Replicate(n, perBlock int) error {
	if len(f.pool) == 0 {
		return fmt.Errorf("replicate: no generated records yet")
	}
	for sent := 0; sent < n; {
		hdr := chain.BlockHeader{Slot: f.last.Slot + 20, BlockNo: f.last.BlockNo + 1}
		hdr.Hash[0], hdr.Hash[1], hdr.Hash[2], hdr.Hash[3] = 0xee, byte(hdr.BlockNo), byte(hdr.BlockNo>>8), byte(hdr.BlockNo>>16)
		f.last = hdr
		fs := &history.ForwardStep{Header: hdr, Tip: f.tip(hdr)}
		for i := range min(perBlock, n-sent) {
			r := f.pool[(sent+i)%len(f.pool)]
			r.Block, r.TxIndex, r.RolledBackBy = hdr, i, nil
			r.TxID[31] ^= byte(hdr.BlockNo)
			fs.Records = append(fs.Records, r)
		}
		sent += len(fs.Records)
		f.blocks++
		f.ops++
		f.send(&history.Step{Forward: fs}, hdr.BlockNo)
	}
	return nil
}

func (f *Feed) tip(h chain.BlockHeader) chain.Tip {
	if f.FarTip {
		return chain.Tip{Point: h.Point(), BlockNo: h.BlockNo + 1_000_000}
	}
	return chain.Tip{Point: h.Point(), BlockNo: h.BlockNo}
}

// Steps runs n steps.
func (f *Feed) Steps(n int) error {
	for range n {
		if _, err := f.Step(); err != nil {
			return err
		}
	}
	return nil
}

// UntilRecords steps until the store's head is at least seq (after the
// steps sent are committed).
func (f *Feed) UntilRecords(ctx context.Context, seq int64) error {
	for f.h.Handle.Head() < seq {
		for range 200 {
			if _, err := f.Step(); err != nil {
				return err
			}
		}
		if err := f.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Wait returns once every step sent is committed.
func (f *Feed) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.pending.Load() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.cond.Wait()
	}
	return nil
}

// Counts returns the steps, blocks and rollbacks generated so far.
func (f *Feed) Counts() (ops, blocks, rollbacks int) { return f.ops, f.blocks, f.rbs }

// Run steps every period until ctx ends (period 0: as fast as the store
// commits, one step at a time).
func (f *Feed) Run(ctx context.Context, period time.Duration) error {
	var tick *time.Ticker
	if period > 0 {
		tick = time.NewTicker(period)
		defer tick.Stop()
	}
	for ctx.Err() == nil {
		if tick != nil {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil
			}
		}
		if _, err := f.Step(); err != nil {
			return err
		}
		if tick == nil {
			if err := f.Wait(ctx); err != nil {
				return nil
			}
		}
	}
	return nil
}
