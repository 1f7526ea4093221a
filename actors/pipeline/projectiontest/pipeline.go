// Package projectiontest runs the history pipeline and the contract
// projection in-process for tests and benchmarks: a devnet generator's
// chain (blocks and rollbacks) goes through the classifier and the history
// processor into a real history store actor on a real backend, and a
// contracts.Store follows it into a real contract store. No node, no
// socket: the chain advances exactly as far as a test asks.
package projectiontest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/processor"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// Backend names.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// Backends lists both, for tests that run against each.
var Backends = []string{SQLite, Postgres}

// Options configure a pipeline.
type Options struct {
	Backend   string // SQLite or Postgres
	Generator devnet.GeneratorConfig
	// Batch lets the history store batch commits (as when syncing far from
	// the tip); otherwise every block is committed at once.
	Batch bool
	// Quiet drops the logs (benchmarks).
	Quiet bool
	// OnCommit is the projection's contracts.Config.OnCommit.
	OnCommit func(seq int64, changed []chain.TxOutRef)
}

// DefaultGenerator is a small, Marlowe-dense chain with frequent shallow
// rollbacks.
func DefaultGenerator(seed int64) devnet.GeneratorConfig {
	g := devnet.DefaultGeneratorConfig()
	g.Seed, g.MarloweShare, g.MeanBlockSize, g.RollbackEvery, g.MaxRollbackDepth = seed, 0.8, 400, 12, 4
	return g
}

// Pipeline is a running history pipeline with its projection
// (pipeline.Start without a follower: the test feeds the store).
type Pipeline struct {
	tb         testing.TB
	log        *zap.Logger
	Pipe       *pipeline.Pipeline
	System     *actor.ActorSystem
	History    history.Backend
	Store      *history.Store
	Handle     *history.Handle
	Contracts  contractstore.Backend
	Projection *contracts.Store

	contracts *backendRef // the backend the projection writes: Contracts, or what a test put in its place before StartProjection
	closed    bool
	gen       *devnet.Generator
	cls       *classify.Classifier
	proc      *processor.Processor
	steps     uint64
	rollbacks int
	tipFar    bool
	onCommit  func(int64, []chain.TxOutRef)
	tip       atomic.Pointer[chain.BlockHeader] // the generator's, for other goroutines
}

// Start opens the backends (a temporary directory, or a fresh PostgreSQL
// schema holding both the history and the projection) and starts the
// history store and the projection. It stops them when the test ends.
func Start(tb testing.TB, opts Options) *Pipeline {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := zap.NewNop()
	if !opts.Quiet {
		log = zaptest.NewLogger(tb, zaptest.Level(zap.WarnLevel))
	}
	p := &Pipeline{tb: tb, log: log, tipFar: opts.Batch, onCommit: opts.OnCommit}
	switch opts.Backend {
	case Postgres:
		url := storagetest.PostgresURL(tb)
		schema := storagetest.NewSchema(tb, url, "cvtest")
		hb, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema})
		if err != nil {
			tb.Fatal(err)
		}
		p.History = hb
		p.Contracts = contractstoretest.OpenPostgres(tb, url, schema)
	default:
		dir := tb.TempDir()
		hb, err := sqlitestore.Open(ctx, dir, sqlitestore.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		p.History = hb
		p.Contracts = contractstoretest.OpenSQLite(tb, dir)
	}
	if err := p.History.Init(ctx, &history.InitParams{NetworkMagic: devnet.NetworkMagic}); err != nil {
		tb.Fatal(err)
	}
	p.contracts = &backendRef{Backend: p.Contracts}
	cfg := history.DefaultStoreConfig()
	cfg.BatchBlocks, cfg.BatchDelay = 40, 5*time.Millisecond
	slots := chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}
	pipe, err := pipeline.Start(ctx, pipeline.Config{Logger: log, History: p.History, Store: cfg, Slots: slots, PageSize: 200,
		Contracts: &contracts.Config{Backend: p.contracts, Logger: log, RetryDelay: 20 * time.Millisecond, OnCommit: p.onCommit}})
	if err != nil {
		tb.Fatal(err)
	}
	p.Pipe, p.System, p.Store, p.Handle, p.Projection = pipe, pipe.System, pipe.Store, pipe.Handle, pipe.Projection
	if p.gen, err = devnet.NewGenerator(opts.Generator); err != nil {
		tb.Fatal(err)
	}
	p.cls = classify.New(classify.Options{})
	p.proc = processor.New(slots, log, nil)
	tb.Cleanup(p.Close)
	return p
}

// backendRef is the projection's contract store: a test may put another
// in p.Contracts (a faulty wrapper) while the projection is stopped.
type backendRef struct{ contractstore.Backend }

// StartProjection starts a fresh projection from its stored cursor, on
// p.Contracts.
func (p *Pipeline) StartProjection() {
	if p.contracts.Backend != p.Contracts {
		p.contracts.Backend = p.Contracts
	}
	if err := p.Pipe.StartChild(pipeline.Projection); err != nil {
		p.tb.Fatal(err)
	}
}

// StopProjection stops the projection (its last commit completes).
func (p *Pipeline) StopProjection() {
	if err := p.Pipe.StopChild(pipeline.Projection); err != nil {
		p.tb.Fatal(err)
	}
}

// Advance applies the generator's next n changes (blocks or rollbacks).
func (p *Pipeline) Advance(n int) {
	p.tb.Helper()
	for range n {
		op, err := p.gen.Next()
		if err != nil {
			p.tb.Fatal(err)
		}
		tip := chain.Tip{}
		if p.tipFar {
			tip.BlockNo = 1 << 40
		}
		var ev classify.Event
		if op.Rollback != nil {
			p.rollbacks++
			rb, err := p.cls.RollBackward(*op.Rollback, tip)
			if err != nil {
				p.tb.Fatal(err)
			}
			ev = rb
		} else {
			rf, err := p.cls.RollForward(op.Block.Type, op.Block.Raw, tip)
			if err != nil {
				p.tb.Fatal(err)
			}
			ev = rf
		}
		if st := p.proc.Process(ev); st != nil {
			p.System.Root.Send(p.Pipe.Child(pipeline.Store), st)
			p.steps++
		}
		tipHeader := p.gen.Tip()
		p.tip.Store(&tipHeader)
	}
}

// Rollbacks returns how many rollbacks the chain had so far.
func (p *Pipeline) Rollbacks() int { return p.rollbacks }

// Tip returns the generator's newest block; any goroutine may ask.
func (p *Pipeline) Tip() chain.BlockHeader {
	if t := p.tip.Load(); t != nil {
		return *t
	}
	return chain.BlockHeader{}
}

// Activity returns the Marlowe activity on the current chain.
func (p *Pipeline) Activity() []devnet.Activity { return p.gen.Activity() }

// SyncHistory waits until the history store has committed every change.
func (p *Pipeline) SyncHistory() {
	p.tb.Helper()
	if !waitfor.Poll(time.Minute, func() bool { return p.Store.Stats().BlocksCommitted.Load() >= p.steps }) {
		p.tb.Fatalf("the history store committed %d of %d blocks", p.Store.Stats().BlocksCommitted.Load(), p.steps)
	}
}

// Sync waits until the history store has committed every change and the
// projection has applied them; it returns the head seq.
func (p *Pipeline) Sync() int64 {
	p.tb.Helper()
	p.SyncHistory()
	head := p.Handle.Head()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Projection.WaitFor(ctx, head); err != nil {
		p.tb.Fatalf("the projection applied seq %d of %d: %v (last error %q)", p.Projection.Applied().Seq, head, err,
			p.Projection.LastError())
	}
	return head
}

// Close stops the pipeline and closes the backends.
func (p *Pipeline) Close() {
	if p.closed {
		return
	}
	p.closed = true
	if err := p.Pipe.Stop(time.Minute); err != nil {
		p.tb.Error(err)
	}
	_ = p.Contracts.Close()
	_ = p.History.Close()
}
