// Package contracts holds the Marlowe language (contracts/marlowe and
// contracts/plutusdata) and the contract projection: Store folds the
// history log into per-contract aggregates (contracts/contractstore).
package contracts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// Defaults of Config.
const (
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = 30 * time.Second
	DefaultRebuildPage   = 1000
)

// Config is what a Store needs.
type Config struct {
	// History is the history store's read side: the projection subscribes
	// to it and reads contracts' records from its backend when rebuilding.
	History *history.Handle
	// Backend stores the projection.
	Backend contractstore.Backend
	Logger  *zap.Logger
	// RetryDelay is the first wait after a failure (a commit or a read)
	// before the projection resumes from its stored cursor; it doubles up
	// to MaxRetryDelay while failures go on. Defaults: DefaultRetryDelay,
	// DefaultMaxRetryDelay.
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// RebuildPage is how many records a rebuild reads at a time
	// (DefaultRebuildPage).
	RebuildPage int
	// OnCommit, when set, is called after each commit with its seq and the
	// contracts it changed, before Applied moves to that seq: a cache of
	// contract reads (query.ContractCache) drops what changed there, so it
	// never serves a contract older than the position an answer reports.
	OnCommit func(seq int64, changed []chain.TxOutRef)
}

// Stats are the projection's counters, readable from any goroutine.
type Stats struct {
	Commits          atomic.Uint64
	Records          atomic.Uint64 // history records applied (markers included)
	Rollbacks        atomic.Uint64 // RolledBack markers applied
	RebuiltContracts atomic.Uint64 // contracts rebuilt by those
	Failures         atomic.Uint64 // failed runs (each resumed from the stored cursor)
	CommitNanos      atomic.Uint64 // total time spent committing
}

// Store is the contract projection. It subscribes to the history log from
// its own stored cursor (invariant 7: projections are subscribers), folds
// each batch of records into contract aggregates, and commits the changed
// rows together with the new cursor in one transaction, so a restart
// resumes exactly where the last commit ended. A RolledBack record rebuilds
// the contracts it changes from their records current as of that seq.
//
// It is an actor whose work happens in Receive: the history store delivers
// the log to its mailbox (a history.Feed: catch-up pages it reads, then
// live batches the store sends), and each batch is folded and committed
// before the next message. Every incarnation (the first, and each one a
// supervisor starts after a failure) is a fresh projector that reads the
// stored cursor when it starts. A failing commit or read is retried: the
// projector resumes from its stored cursor after a backoff. Store itself
// holds what outlives an incarnation: the settings, the counters and the
// applied position. Reads never go through the actor: queries read the
// backend concurrently, and Applied and WaitFor read a position and a
// channel.
type Store struct {
	cfg   Config
	log   *zap.Logger
	stats Stats

	mu      sync.Mutex
	applied contractstore.Position
	changed chan struct{} // closed and replaced whenever applied moves

	lastErr atomic.Pointer[string]
}

// NewStore reads the projection's cursor and checks it against the history
// log. Spawn the store with Props.
func NewStore(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.History == nil || cfg.Backend == nil {
		return nil, errors.New("contracts: a history handle and a backend are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	if cfg.MaxRetryDelay < cfg.RetryDelay {
		cfg.MaxRetryDelay = max(DefaultMaxRetryDelay, cfg.RetryDelay)
	}
	if cfg.RebuildPage <= 0 {
		cfg.RebuildPage = DefaultRebuildPage
	}
	head, err := cfg.Backend.HeadGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("contracts: reading the projection's cursor: %w", err)
	}
	if h := cfg.History.Head(); head.Seq > h {
		return nil, fmt.Errorf("contracts: the contract store has applied seq %d but the history log ends at %d: "+
			"it was filled from another history; delete it to rebuild it", head.Seq, h)
	}
	return &Store{cfg: cfg, log: cfg.Logger.Named("contracts"), applied: head.Position, changed: make(chan struct{})}, nil
}

// Props returns the actor's props. Each incarnation is a new projector.
func (s *Store) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &projector{Store: s, delay: s.cfg.RetryDelay} })
}

// Stats returns the counters.
func (s *Store) Stats() *Stats { return &s.stats }

// LastError returns the newest failure's message ("" when none since the
// last successful commit).
func (s *Store) LastError() string {
	if p := s.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Applied returns the position the projection has committed: its rows
// reflect the history log up to this seq.
func (s *Store) Applied() contractstore.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// WaitFor waits until the projection has applied seq (read-your-writes),
// or ctx ends; bound it with a deadline.
func (s *Store) WaitFor(ctx context.Context, seq int64) error {
	for {
		s.mu.Lock()
		done, ch := s.applied.Seq >= seq, s.changed
		s.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Store) setApplied(p contractstore.Position) {
	s.mu.Lock()
	s.applied = p
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// projector is one incarnation of the projection's actor.
type projector struct {
	*Store
	system *actor.ActorSystem
	self   *actor.PID
	head   contractstore.Head
	feed   *history.Feed // nil while waiting to resume
	gen    int           // of the feed: a resume for an older one is stale
	delay  time.Duration // the next retry delay, reset by a successful commit
	idle   bool          // the history store stopped for good
}

// Messages of the actor.
type (
	pull   struct{ gen int }
	resume struct{ gen int }
)

// workTimeout bounds one message's reads and commits.
const workTimeout = 2 * time.Minute

// Receive handles the actor's messages.
func (s *projector) Receive(c actor.Context) {
	switch msg := c.Message().(type) {
	case *actor.Started:
		s.system, s.self = c.ActorSystem(), c.Self()
		s.resume()
	case *pull:
		if s.feed != nil && msg.gen == s.gen {
			s.pull()
		}
	case *history.Delivery:
		if s.feed == nil {
			return
		}
		b, ok, again := s.feed.Take(msg)
		if ok {
			s.apply(b.Records)
		}
		if again && s.feed != nil {
			s.pull()
		}
	case *resume:
		if s.feed == nil && !s.idle && msg.gen == s.gen {
			s.resume()
		}
	case *actor.Stopping:
		if s.feed != nil {
			s.feed.Close()
		}
	}
}

// resume reads the stored cursor and follows the log from it.
func (s *projector) resume() {
	ctx, cancel := context.WithTimeout(context.Background(), workTimeout)
	head, err := s.cfg.Backend.HeadGet(ctx)
	cancel()
	s.gen++
	if err != nil {
		s.fail(fmt.Errorf("reading the cursor: %w", err))
		return
	}
	s.head = head
	s.setApplied(head.Position)
	s.feed = s.cfg.History.Feed(s.system, s.self, record.Filter{}, record.From{Kind: record.FromCursor, Cursor: record.Cursor{Seq: head.Seq}})
	s.pull()
}

// pull applies the next catch-up page, if there is one, and asks for the
// page after it with a message, so that other messages (a stop) come in
// between; at the head the feed delivers live batches instead.
func (s *projector) pull() {
	ctx, cancel := context.WithTimeout(context.Background(), workTimeout)
	b, ok, err := s.feed.Next(ctx)
	cancel()
	if err != nil {
		s.fail(fmt.Errorf("reading the history log after seq %d: %w", s.head.Seq, err))
		return
	}
	if ok && s.apply(b.Records) {
		s.system.Root.Send(s.self, &pull{gen: s.gen})
	}
}

// apply folds and commits a batch; false when it failed.
func (s *projector) apply(recs []record.Record) bool {
	ctx, cancel := context.WithTimeout(context.Background(), workTimeout)
	defer cancel()
	if err := s.applyBatch(ctx, &s.head, recs); err != nil {
		s.fail(err)
		return false
	}
	s.delay = s.cfg.RetryDelay
	return true
}

// fail stops following after an error and resumes from the stored cursor
// after the backoff (not at all once the history store stopped for good:
// the service is stopping).
func (s *projector) fail(err error) {
	if s.feed != nil {
		s.feed.Close()
		s.feed = nil
	}
	if errors.Is(err, history.ErrStoreStopped) {
		s.idle = true
		s.log.Info("the history store stopped; the projection stops following", zap.Int64("applied", s.Applied().Seq))
		return
	}
	s.stats.Failures.Add(1)
	text := err.Error()
	s.lastErr.Store(&text)
	if errors.Is(err, record.ErrFenced) {
		// Another process took the writer lease: no retry can commit.
		s.log.Error("the projection's commit was fenced: stopping", zap.Error(err))
		panic(fmt.Errorf("%w: %w", history.ErrFenced, err))
	}
	delay := s.delay
	s.log.Error("the projection stopped; resuming from its stored cursor", zap.Error(err), zap.Duration("after", delay))
	system, self, gen := s.system, s.self, s.gen
	time.AfterFunc(delay, func() { system.Root.Send(self, &resume{gen: gen}) })
	s.delay = min(2*delay, s.cfg.MaxRetryDelay)
}

// applyBatch folds a batch of records. Records before a RolledBack marker
// are committed first; the marker's rebuild is its own commit.
func (s *projector) applyBatch(ctx context.Context, head *contractstore.Head, recs []record.Record) error {
	load := func(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, error) {
		c, _, err := s.cfg.Backend.ContractGet(ctx, id)
		return c, err
	}
	f := newFolder(load, s.log)
	var last *record.Record
	flush := func() error {
		if last == nil {
			return nil
		}
		err := s.commit(ctx, head, f.finish(*head, contractstore.Position{Seq: last.Seq, Block: last.Block}))
		f, last = newFolder(load, s.log), nil
		return err
	}
	for i := range recs {
		r := &recs[i]
		if r.Seq <= head.Seq {
			continue // delivered again after a restart of the subscription
		}
		if r.Kind != record.KindRolledBack {
			if err := f.apply(ctx, r); err != nil {
				return err
			}
			last = r
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := s.rollBack(ctx, head, r); err != nil {
			return err
		}
	}
	return flush()
}

// commit writes a fold and moves the cursor.
func (s *projector) commit(ctx context.Context, head *contractstore.Head, p *contractstore.CommitParams) error {
	start := time.Now()
	if err := s.cfg.Backend.Commit(ctx, p); err != nil {
		return fmt.Errorf("committing up to seq %d: %w", p.Head.Seq, err)
	}
	s.stats.CommitNanos.Add(uint64(time.Since(start)))
	if s.cfg.OnCommit != nil {
		changed := make([]chain.TxOutRef, 0, len(p.Reset)+len(p.Contracts))
		changed = append(changed, p.Reset...)
		for i := range p.Contracts {
			changed = append(changed, p.Contracts[i].ID)
		}
		s.cfg.OnCommit(p.Head.Seq, changed)
	}
	s.stats.Commits.Add(1)
	s.stats.Records.Add(uint64(p.Head.Seq - head.Seq))
	*head = p.Head
	s.setApplied(head.Position)
	s.lastErr.Store(nil)
	return nil
}
