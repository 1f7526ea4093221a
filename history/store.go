package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/handoff"
	"github.com/marlowe-follower/follower/history/record"
)

// StoreConfig tunes the store's batching.
type StoreConfig struct {
	// BatchBlocks and BatchRecords: a batch is committed once it holds this
	// many blocks or records.
	BatchBlocks  int
	BatchRecords int
	// BatchDelay: pending blocks are committed at least this often.
	BatchDelay time.Duration
	// NearTip: within this many blocks of the node's tip every block is
	// committed as soon as it arrives.
	NearTip uint64
	// LiveQueue is how many batches a live subscriber may have queued before
	// it is sent back to catch up from the backend.
	LiveQueue int
	// LiveTail is how many of the newest committed records the store holds
	// (whole batches) to take a go-live request that many behind the head.
	LiveTail int
	// RollbackDepth is how many blocks of UTxO changes are kept; it must be
	// the classifier's (classify.DefaultRollbackDepth).
	RollbackDepth uint64
	// RetryDelay is the wait after a failed commit before the next attempt.
	RetryDelay time.Duration
	// ObserveCommit, when set, is told how long each successful commit took
	// (for a latency histogram).
	ObserveCommit func(time.Duration)
}

// DefaultStoreConfig returns the defaults.
func DefaultStoreConfig() StoreConfig {
	return StoreConfig{
		BatchBlocks: 1000, BatchRecords: 10000, BatchDelay: time.Second, NearTip: 5,
		LiveQueue: 64, LiveTail: 4096, RollbackDepth: classify.DefaultRollbackDepth, RetryDelay: 2 * time.Second,
	}
}

// InFlight is how many chain events the follower may hand over before the
// store commits: twice a batch, so a full batch can commit while the next fills.
func (c StoreConfig) InFlight() int { return 2 * c.BatchBlocks }

// StoreStats are the store's counters, readable from any goroutine.
type StoreStats struct {
	Head             atomic.Int64  // newest committed seq
	Commits          atomic.Uint64 // successful commits
	CommitFailures   atomic.Uint64
	RecordsCommitted atomic.Uint64
	BlocksCommitted  atomic.Uint64
	Rollbacks        atomic.Uint64
	CommitNanos      atomic.Uint64 // total time spent committing
	LiveSubscribers  atomic.Int64
	LiveDropped      atomic.Uint64 // subscribers sent back to catch up
	// LiveReplayed counts go-live requests taken behind the head, with the
	// records the feed missed from the store's tail; LiveRefused those
	// sent back to catch up first (further behind than the tail).
	LiveReplayed atomic.Uint64
	LiveRefused  atomic.Uint64
	// LiveFrom is the oldest cursor a go-live request is taken at now: the
	// seq before the tail's first record (the head when it holds none).
	LiveFrom atomic.Int64

	// Committed is the newest block of the committed checkpoint (nil
	// before the first block).
	Committed atomic.Pointer[chain.BlockHeader]
	// Failing is set while commits fail: FailingSince is when the first of
	// them failed (unix nanoseconds) and CommitError the newest error.
	Failing      atomic.Bool
	FailingSince atomic.Int64
	CommitError  atomic.Pointer[string]
}

// ErrAnotherWriter is the store's fatal error when a commit finds the log
// moved on under it: another process writes the same store. The store stops
// committing and reports it on Store.Fatal; retrying cannot succeed.
var ErrAnotherWriter = errors.New("another writer holds this store")

// ErrFenced is the store's fatal error when a commit is refused for the
// writer epoch (record.ErrFenced): this process lost the writer lease and
// another writer took over. The store stops committing for good.
var ErrFenced = errors.New("fenced")

// Store is the history store, the single writer of the log. It is an
// actor: Props spawns it, and every incarnation (the first and each one a
// supervisor starts after a failure) is a fresh writer that loads the
// committed state from the backend when it starts, so that it resumes from
// exactly what is committed and never from half-updated memory. Store
// itself holds what outlives an incarnation: the backend, the settings,
// the counters, and where the running writer is (Handle finds it there).
type Store struct {
	cfg     StoreConfig
	log     *zap.Logger
	backend Backend
	stats   *StoreStats
	fatal   chan error // receives the store's fatal error, once
	run     presence
	// dead is set by a fatal error: no incarnation commits again.
	dead atomic.Bool
	// initial is the committed state NewStore loaded, for the first
	// writer; the writers after it load their own.
	initial *committed
	// known, in a reader's store (Mirror), is the writer's head as last
	// noticed (Handle.CommittedHead).
	known func() int64
}

// committed is the state a writer starts from.
type committed struct {
	cp     *Checkpoint
	recent []record.RecordRef
}

// writer is one incarnation of the store actor.
type writer struct {
	*Store

	head    int64 // newest committed seq
	next    int64 // seq of the next record
	pending *batch
	// retry is the batch whose commit failed, as it was tried, until a
	// retry commits it (commit); nil when none failed.
	retry   *batch
	crumbs  *chain.Breadcrumbs
	changed []chain.BlockHeader // blocks whose UTxO changes are kept, oldest first
	horizon chain.BlockHeader
	recent  []record.RecordRef // records of blocks after the horizon, for rollbacks
	tip     chain.Tip

	contracts map[chain.TxOutRef]*record.ContractIndex // index cache for live filters
	subs      subscribers

	system     *actor.ActorSystem
	self       *actor.PID
	flushArmed bool
	// commitQueued: a commitDue is in the mailbox.
	commitQueued bool
	failing      bool
	broken       bool // Receive panicked: what this writer holds is not to be trusted
}

// empty reports whether the batch holds no step.
func (b *batch) empty() bool { return b.blocks == 0 && len(b.params.Records) == 0 }

type batch struct {
	params   CommitParams
	releases []func()
	credits  handoff.Credits
	blocks   int
	firstAt  time.Time
	horizon  bool // Checkpoint.Horizon changed
	// endsInRollback is when the batch's last step was a rollback (zero
	// otherwise); see step.
	endsInRollback time.Time
}

// NewStore loads the committed state from the backend (the first writer
// starts from it). Spawn the store with Props.
func NewStore(ctx context.Context, backend Backend, cfg StoreConfig, logger *zap.Logger) (*Store, error) {
	s := &Store{cfg: cfg, log: logger.Named("history.store"), backend: backend, stats: &StoreStats{}, fatal: make(chan error, 1)}
	c, err := s.loadCommitted(ctx)
	if err != nil {
		return nil, err
	}
	s.initial = c
	s.stats.Head.Store(c.cp.Head)
	if len(c.cp.Breadcrumbs) > 0 {
		h := c.cp.Breadcrumbs[0]
		s.stats.Committed.Store(&h)
	}
	return s, nil
}

func (s *Store) loadCommitted(ctx context.Context) (*committed, error) {
	cp, err := s.backend.CheckpointGet(ctx)
	if err != nil {
		return nil, fmt.Errorf("history store: loading the checkpoint: %w", err)
	}
	recent, err := s.backend.RecordRecent(ctx, cp.Horizon.Slot)
	if err != nil {
		return nil, fmt.Errorf("history store: loading recent records: %w", err)
	}
	return &committed{cp: cp, recent: recent}, nil
}

// Props returns the actor's props. Each incarnation is a new writer.
func (s *Store) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &writer{Store: s} })
}

// Stats returns the counters.
func (s *Store) Stats() *StoreStats { return s.stats }

// Fatal receives the error that stopped the store from committing for good
// (ErrAnotherWriter, ErrFenced); the process must then stop. The writer
// also fails with it, so that a supervisor that knows these errors (the
// pipeline's) stops the pipeline instead of starting another writer.
func (s *Store) Fatal() <-chan error { return s.fatal }

// ExpectRestart tells the store that its running writer is about to be
// stopped and another started (a supervisor restarting the pipeline): its
// subscriptions then wait for the next writer instead of ending with
// ErrStoreStopped.
func (s *Store) ExpectRestart() { s.run.expectRestart() }

// Retire tells the store that no writer runs or follows any more (its
// supervisor stopped for good): subscriptions end with ErrStoreStopped.
func (s *Store) Retire() { s.run.retire() }

// Restore implements handoff.Checkpoints: the follower resumes from what
// the store committed last, read from the backend at each (re)start.
func (s *Store) Restore(ctx context.Context) (*handoff.Restored, error) {
	cp, err := s.backend.CheckpointGet(ctx)
	if err != nil {
		return nil, err
	}
	if len(cp.Breadcrumbs) == 0 {
		return nil, nil
	}
	return &handoff.Restored{Breadcrumbs: cp.Breadcrumbs, UTxOs: cp.UTxOs, Recent: cp.Recent, Horizon: cp.Horizon}, nil
}

// load reads the committed state a writer starts from: the state NewStore
// loaded for the first writer, the backend's for every one after it.
func (s *writer) load() error {
	c := s.initial
	s.initial = nil
	if c == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var err error
		if c, err = s.loadCommitted(ctx); err != nil {
			return err
		}
	}
	cp := c.cp
	s.head, s.next, s.crumbs = cp.Head, cp.Head+1, chain.NewBreadcrumbs(cp.Breadcrumbs)
	s.horizon, s.recent, s.tip = cp.Horizon, c.recent, cp.Tip
	s.contracts, s.subs = map[chain.TxOutRef]*record.ContractIndex{}, newSubscribers(s.system, s.stats, s.cfg.LiveTail, s.head)
	s.changed = nil
	for _, ch := range cp.Recent {
		s.changed = append(s.changed, ch.Block)
	}
	s.stats.Head.Store(cp.Head)
	s.pending = &batch{}
	return nil
}

// flushDue is the store's timer: the pending batch is due.
type flushDue struct{}

// commitDue is the store's word to itself that a batch at the node's tip
// is due: it comes after the steps already in the mailbox, which join the
// batch first.
type commitDue struct{}

// Receive handles the actor's messages.
func (s *writer) Receive(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil {
			// A writer that failed half-way never commits what it holds
			// (its Stopping below); the supervisor starts a new one.
			s.broken = true
			panic(r)
		}
	}()
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.system, s.self = ctx.ActorSystem(), ctx.Self()
		if err := s.load(); err != nil {
			panic(err)
		}
		s.run.attach(s.system, s.self)
	case *Step:
		if s.dead.Load() {
			return // never committed, never released: the follower stops
		}
		s.step(msg)
	case *flushDue, *commitDue:
		if _, ok := msg.(*commitDue); ok {
			s.commitQueued = false
		} else {
			s.flushArmed = false
		}
		if s.dead.Load() {
			return
		}
		if wait := s.rollbackWait(); wait > 0 && !s.failing {
			s.armFlush(wait)
			return
		}
		if s.retry != nil || !s.pending.empty() {
			s.commit(false)
		}
	case *goLiveRequest, *unsubscribe:
		s.subs.receive(msg, s.head)
	case *actor.Restarting:
		// Restarted in place (a supervisor other than the pipeline's):
		// what it holds is dropped; its subscribers catch up.
		s.subs.dropAll()
	case *actor.Stopping:
		if !s.dead.Load() && !s.broken && (s.retry != nil || !s.pending.empty()) {
			s.commit(true)
		}
		s.subs.dropAll()
	case *actor.Stopped:
		s.run.detach(ctx.Self())
	}
}

// step adds a processed chain event to the pending batch.
func (s *writer) step(st *Step) {
	b := s.pending
	if b.blocks == 0 && len(b.params.Records) == 0 {
		b.firstAt = time.Now()
	}
	if st.Release != nil {
		b.releases = append(b.releases, st.Release)
	}
	b.credits.Add(st.Credit)
	switch {
	case st.Forward != nil:
		s.forward(st.Forward)
		b.endsInRollback = time.Time{}
	case st.Rollback != nil:
		s.rollback(st.Rollback)
		b.endsInRollback = time.Now()
	}
	b.blocks++
	// A batch does not end with a rollback while the block that follows it
	// may still come (for BatchDelay): the checkpoint then never sits at a
	// point the chain went back to, which is the same point as before the
	// blocks it dropped. Restarting from such a checkpoint is exact either
	// way with a real node; with the devnet's journal it keeps the replay
	// identical too. Markers become durable at most BatchDelay later.
	if wait := s.rollbackWait(); wait > 0 && !s.failing {
		s.armFlush(wait)
		return
	}
	if b.blocks >= s.cfg.BatchBlocks || len(b.params.Records) >= s.cfg.BatchRecords || s.failing {
		if !s.failing {
			s.commit(false)
		}
		return
	}
	if s.tip.BlockNo <= s.lastBlockNo()+s.cfg.NearTip {
		// At the tip the block is committed at once, with the steps that
		// queued up behind the commit before it: one commit for all of
		// them, however many a slow commit (or a busy machine) let in.
		if !s.commitQueued {
			s.commitQueued = true
			s.system.Root.Send(s.self, &commitDue{})
		}
		return
	}
	s.armFlush(s.cfg.BatchDelay)
}

// rollbackWait is how much longer a batch that ends with a rollback waits
// for the next block; 0 when it need not wait.
func (s *writer) rollbackWait() time.Duration {
	at := s.pending.endsInRollback
	if at.IsZero() {
		return 0
	}
	return max(s.cfg.BatchDelay-time.Since(at), 0)
}

func (s *writer) lastBlockNo() uint64 {
	h, _ := s.crumbs.Tip()
	return h.BlockNo
}

func (s *writer) armFlush(d time.Duration) {
	if s.flushArmed {
		return
	}
	s.flushArmed = true
	system, self := s.system, s.self
	time.AfterFunc(d, func() { system.Root.Send(self, &flushDue{}) })
}

// assign gives the next record its seq: the one place seqs are assigned.
func (s *writer) assign(r *record.Record) {
	r.Seq = s.next
	s.next++
}

func (s *writer) forward(f *ForwardStep) {
	b := &s.pending.params
	first := len(b.Records)
	for i := range f.Records {
		r := f.Records[i]
		s.assign(&r)
		b.Records = append(b.Records, r)
		s.recent = append(s.recent, record.RecordRef{Seq: r.Seq, Slot: r.Block.Slot, Kind: r.Kind, Contract: r.Contract})
	}
	seqOf := func(i int) int64 { return b.Records[first+i].Seq }
	for _, c := range f.Creations {
		idx := c.Contract
		idx.CreatedSeq = seqOf(c.Record)
		b.Contracts = append(b.Contracts, idx)
		s.contracts[idx.ID] = idx.Detached()
	}
	for _, a := range f.Additions {
		b.PartyAdditions = append(b.PartyAdditions, PartyAddition{Contract: a.Contract, Seq: seqOf(a.Record), Parties: a.Parties})
		if idx, ok := s.contracts[a.Contract]; ok {
			idx.MergeParties(a.Parties)
		}
	}
	s.crumbs.Add(f.Header)
	s.tip = f.Tip
	if !f.UTxO.Empty() {
		changes := f.UTxO
		b.Checkpoint.UTxO = append(b.Checkpoint.UTxO, UTxOStep{Forward: &changes})
		s.changed = append(s.changed, f.Header)
	}
	// Forget UTxO changes deeper than the rollback depth, as the classifier does.
	if f.Header.BlockNo >= s.cfg.RollbackDepth {
		oldest := f.Header.BlockNo - s.cfg.RollbackDepth
		for len(s.changed) > 0 && s.changed[0].BlockNo < oldest {
			s.horizon = s.changed[0]
			s.changed = s.changed[1:]
			s.pending.horizon = true
		}
		if s.pending.horizon {
			b.Checkpoint.Horizon = s.horizon
			n := 0
			for n < len(s.recent) && s.recent[n].Slot <= s.horizon.Slot {
				n++
			}
			s.recent = s.recent[n:]
		}
	}
}

func (s *writer) rollback(r *RollbackStep) {
	b := &s.pending.params
	s.stats.Rollbacks.Add(1)
	affected := false
	for i := range s.recent {
		ref := &s.recent[i]
		if ref.Slot > r.To.Slot && ref.RolledBackBy == nil && ref.Kind != record.KindRolledBack {
			affected = true
			break
		}
	}
	if affected {
		hdr := chain.BlockHeader{Slot: r.To.Slot, Hash: r.To.Hash}
		for _, h := range s.crumbs.Headers() {
			if h.Point() == r.To {
				hdr.BlockNo = h.BlockNo
				break
			}
		}
		payload, _ := json.Marshal(record.RolledBack{To: r.To})
		rec := record.Record{Kind: record.KindRolledBack, Block: hdr, Payload: payload}
		s.assign(&rec)
		marker := rec.Seq
		b.Records = append(b.Records, rec)
		b.Marks = append(b.Marks, RollbackMark{MarkerSeq: marker, To: r.To})
		for i := range s.recent {
			ref := &s.recent[i]
			if ref.Slot > r.To.Slot && ref.RolledBackBy == nil && ref.Kind != record.KindRolledBack {
				m := marker
				ref.RolledBackBy = &m
			}
		}
		s.recent = append(s.recent, record.RecordRef{Seq: marker, Slot: r.To.Slot, Kind: record.KindRolledBack})
	}
	s.crumbs.RollBack(r.To)
	s.tip = r.Tip
	to := r.To
	b.Checkpoint.UTxO = append(b.Checkpoint.UTxO, UTxOStep{Rollback: &to})
	for len(s.changed) > 0 && s.changed[len(s.changed)-1].Slot > r.To.Slot {
		s.changed = s.changed[:len(s.changed)-1]
	}
}

// indexOf returns a contract's index entry for filtering, from the cache or
// the backend.
func (s *writer) indexOf(id *chain.TxOutRef) *record.ContractIndex {
	if id == nil {
		return nil
	}
	if idx, ok := s.contracts[*id]; ok {
		return idx
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	idx, err := s.backend.ContractGet(ctx, *id)
	if err != nil {
		if !errors.Is(err, record.ErrNotFound) {
			s.log.Warn("loading a contract index entry", zap.Stringer("contract", *id), zap.Error(err))
		}
		return nil
	}
	s.contracts[*id] = idx
	return idx
}
