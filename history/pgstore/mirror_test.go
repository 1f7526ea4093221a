package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// A writer's Store and a reader's Mirror on one database, each in an actor
// system of its own as in two processes: the mirror learns of the writer's
// commits by LISTEN/NOTIFY and serves the same subscriptions.

// writerFixture is the writer process: a store actor committing a
// synthetic chain to a test schema.
type writerFixture struct {
	db      *testStore
	system  *actor.ActorSystem
	pid     *actor.PID
	store   *history.Store
	model   *historytest.StepChain
	pending atomic.Int64 // steps sent, not yet committed
}

func newWriter(t *testing.T, db *testStore) *writerFixture {
	t.Helper()
	ctx := context.Background()
	if err := db.Init(ctx, &history.InitParams{NetworkMagic: 42}); err != nil {
		t.Fatal(err)
	}
	cfg := history.DefaultStoreConfig()
	cfg.BatchBlocks, cfg.BatchDelay, cfg.NearTip = 5, 5*time.Millisecond, 0
	st, err := history.NewStore(ctx, db.Store, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	w := &writerFixture{db: db, system: newSystem(), store: st,
		model: historytest.NewStepChain(rand.New(rand.NewPCG(7, 8)), 12)}
	w.pid = w.system.Root.Spawn(st.Props())
	t.Cleanup(func() {
		_ = w.system.Root.PoisonFuture(w.pid).Wait()
		w.system.Shutdown()
		_ = db.Close()
	})
	return w
}

// send hands n steps of the model to the store.
func (w *writerFixture) send(n int) {
	for range n {
		st := w.model.Next()
		w.pending.Add(1)
		st.Release = func() { w.pending.Add(-1) }
		w.system.Root.Send(w.pid, st)
	}
}

// committed waits until everything sent is committed and returns the head.
func (w *writerFixture) committed(t *testing.T) int64 {
	t.Helper()
	checkFor(t, time.Minute, func() error {
		if n := w.pending.Load(); n > 0 {
			return fmt.Errorf("%d steps not committed", n)
		}
		return nil
	})
	return w.store.Stats().Head.Load()
}

// readerFixture is the reader process: a mirror actor and its handle.
type readerFixture struct {
	system *actor.ActorSystem
	pid    *actor.PID
	mirror *history.Mirror
	handle *history.Handle
}

func newReader(t *testing.T, read history.Backend, source history.CommitSource, cfg history.MirrorConfig) *readerFixture {
	t.Helper()
	m, err := history.NewMirror(context.Background(), read, source, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r := &readerFixture{system: newSystem(), mirror: m}
	r.pid = r.system.Root.Spawn(m.Props())
	r.handle = history.NewHandle(m.Store(), r.system, r.pid)
	t.Cleanup(func() {
		_ = r.system.Root.PoisonFuture(r.pid).Wait()
		m.Store().Retire()
		r.system.Shutdown()
	})
	return r
}

// checkFor waits until cond returns nil; the test fails after wait with its last error.
var checkFor = waitfor.NoError // (t, wait, cond)

// subscriber reads a subscription on the reader, checking at every batch
// that a read issued then already holds its last record (the query
// contains e), until stop is closed and the reader is at target.
type subscriber struct {
	from     record.From
	snapshot int64
	filter   record.Filter
	got      []record.Record
	err      error
}

func (s *subscriber) run(r *readerFixture, sub *history.Subscription, final *atomic.Int64) {
	defer sub.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		b, err := sub.Next(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			if f := final.Load(); f > 0 && r.handle.Head() >= f {
				c := sub.Cursor()
				if sub.Live() || (c.Snapshot == 0 && c.Seq >= f) {
					return
				}
			}
			continue
		}
		if err != nil {
			s.err = err
			return
		}
		last := b.Records[len(b.Records)-1]
		rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := r.handle.RecordGet(rctx, last.Seq)
		rcancel()
		if err != nil || got.Kind != last.Kind || got.Block != last.Block {
			s.err = fmt.Errorf("received seq %d, but a read then gives %+v, %v", last.Seq, got, err)
			return
		}
		s.got = append(s.got, b.Records...)
	}
}

// expected returns what a subscriber must have received of the log.
func (s *subscriber) expected(log []record.Record, index map[chain.TxOutRef]*record.ContractIndex) []int64 {
	var want []int64
	for i := range log {
		rec := &log[i]
		var idx *record.ContractIndex
		if rec.Contract != nil {
			idx = index[*rec.Contract]
		}
		if !s.filter.Matches(rec, idx) {
			continue
		}
		switch {
		case s.from.Kind == record.FromOrigin && rec.Seq <= s.snapshot:
			if rec.Kind != record.KindRolledBack && rec.Current(s.snapshot) {
				want = append(want, rec.Seq)
			}
		case s.from.Kind == record.FromOrigin || rec.Seq > s.from.Cursor.Seq:
			want = append(want, rec.Seq)
		}
	}
	return want
}

func seqsOf(rs []record.Record) []int64 {
	out := make([]int64, len(rs))
	for i := range rs {
		out[i] = rs[i].Seq
	}
	return out
}

// fullLog reads the whole log and the index of its contracts.
func fullLog(t *testing.T, b history.Backend) ([]record.Record, map[chain.TxOutRef]*record.ContractIndex) {
	t.Helper()
	ctx := context.Background()
	log := historytest.Log(t, b)
	index := map[chain.TxOutRef]*record.ContractIndex{}
	for _, r := range log {
		if r.Contract == nil {
			continue
		}
		if _, ok := index[*r.Contract]; !ok {
			if idx, err := b.ContractGet(ctx, *r.Contract); err == nil {
				index[*r.Contract] = idx
			}
		}
	}
	return log, index
}

var mirrorFilters = []record.Filter{
	{},
	{Contracts: []chain.TxOutRef{historytest.StepContract(1), historytest.StepContract(2)}},
	{RolesCurrency: [][]byte{{1}}},
	{Tags: []string{"tag0"}},
	{Kinds: []record.Kind{record.KindContractCreated, record.KindRolledBack}},
}

// steps of the snapshot-then-live tests: short in CI, longer with
// MARLOWE_TEST_LONG=1.
func mirrorSteps() int {
	if os.Getenv("MARLOWE_TEST_LONG") == "1" {
		return 3000
	}
	return 600
}

// hammer runs subscribers on the reader that join at random moments while
// the writer commits blocks and rollbacks, then checks that each got
// exactly the records the invariant promises, in seq order.
func hammer(t *testing.T, w *writerFixture, r *readerFixture, read history.Backend, during func(i int)) {
	t.Helper()
	steps := mirrorSteps()
	var final atomic.Int64
	var wg sync.WaitGroup
	var subs []*subscriber
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range 30 {
		// Each subscriber joins once a random share of the steps sent
		// before it is committed.
		before := w.store.Stats().BlocksCommitted.Load()
		w.send(steps / 30)
		if during != nil {
			during(i)
		}
		at := before + uint64(rng.IntN(steps/30+1))
		checkFor(t, time.Minute, func() error {
			if n := w.store.Stats().BlocksCommitted.Load(); n < at {
				return fmt.Errorf("%d blocks committed, waiting for %d", n, at)
			}
			return nil
		})
		s := &subscriber{filter: mirrorFilters[i%len(mirrorFilters)]}
		s.from = historytest.NthStart(i, r.handle.Head())
		sub := r.handle.Subscribe(s.filter, s.from)
		sub.SetPageSize(7)
		s.snapshot = sub.Cursor().Snapshot
		if s.from.Kind == record.FromTip {
			s.from.Cursor = sub.Cursor()
		}
		subs = append(subs, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(r, sub, &final)
		}()
	}
	final.Store(w.committed(t))
	wg.Wait()
	log, index := fullLog(t, read)
	markers := 0
	for i, rec := range log {
		if rec.Seq != int64(i+1) {
			t.Fatalf("log seq %d at position %d", rec.Seq, i)
		}
		if rec.Kind == record.KindRolledBack {
			markers++
		}
	}
	if markers == 0 {
		t.Fatal("no rollback happened")
	}
	for i, s := range subs {
		if s.err != nil {
			t.Fatalf("subscriber %d: %v", i, s.err)
		}
		if got, want := seqsOf(s.got), s.expected(log, index); !slices.Equal(got, want) {
			t.Fatalf("subscriber %d (from %v, snapshot %d, filter %+v): got %d records, want %d\n got  %v\n want %v",
				i, s.from.Kind, s.snapshot, s.filter, len(got), len(want), got[:min(len(got), 40)], want[:min(len(want), 40)])
		}
	}
	t.Logf("log of %d records (%d rollbacks), %d subscribers on the reader", len(log), markers, len(subs))
}

// TestMirrorSnapshotThenLive: subscribers on a reader get every record
// exactly once by seq across appends and rollbacks, and a read issued when
// a record arrives holds it; commits reach the reader by notices.
func TestMirrorSnapshotThenLive(t *testing.T) {
	db := openTest(t)
	w := newWriter(t, db)
	read := db.open(t)
	t.Cleanup(func() { _ = read.Close() })
	// No timed poll: only notices move this reader.
	r := newReader(t, read, read, history.MirrorConfig{PollInterval: time.Hour})
	checkFor(t, time.Minute, func() error {
		if !r.mirror.Stats().Listening.Load() {
			return errors.New("the reader does not listen yet")
		}
		return nil
	})
	hammer(t, w, r, read, nil)
	st := r.mirror.Stats()
	if st.NoticeReads.Load() == 0 || st.Notices.Load() == 0 {
		t.Fatalf("no read was driven by a notice: %d notices, %d notice reads", st.Notices.Load(), st.NoticeReads.Load())
	}
	if p := st.Writer.Load(); p == nil || p.Head != w.store.Stats().Head.Load() {
		t.Fatalf("the writer's progress as the reader knows it: %+v, want head %d", p, w.store.Stats().Head.Load())
	}
}

// gatedSource lets a test hold a listener's reconnection.
type gatedSource struct {
	*pgstore.Store
	attempts atomic.Int32
	gate     chan struct{} // closed: the second and later attempts go ahead
}

func (g *gatedSource) Listen(ctx context.Context, listening func(uint32), notice func(history.CommitNotice, error)) error {
	if g.attempts.Add(1) > 1 {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Listen(ctx, listening, notice)
}

// TestMirrorListenDropped: the listening connection is terminated on the
// server; the reader catches up by polling meanwhile, listens again, and
// notices drive its reads again.
func TestMirrorListenDropped(t *testing.T) {
	db := openTest(t)
	w := newWriter(t, db)
	read := db.open(t)
	t.Cleanup(func() { _ = read.Close() })
	src := &gatedSource{Store: read, gate: make(chan struct{})}
	r := newReader(t, read, src, history.MirrorConfig{PollInterval: time.Hour, DownPollInterval: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond})
	st := r.mirror.Stats()
	caughtUp := func(head int64) func() error {
		return func() error {
			if h := r.handle.Head(); h != head {
				return fmt.Errorf("the reader is at seq %d, the writer at %d", h, head)
			}
			return nil
		}
	}
	// Listening, and done with the connection's first read.
	checkFor(t, time.Minute, func() error {
		if !st.Listening.Load() || st.ConnectReads.Load() == 0 {
			return errors.New("the reader does not listen yet")
		}
		return nil
	})
	sub := r.handle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip})
	defer sub.Close()
	var got []record.Record
	drain := func(head int64) {
		for sub.Cursor().Seq < head {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			b, err := sub.Next(ctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b.Records...)
		}
	}
	start := r.handle.Head()

	// Listening: notices drive the reads.
	w.send(40)
	head := w.committed(t)
	checkFor(t, time.Minute, caughtUp(head))
	drain(head)
	if st.NoticeReads.Load() == 0 || st.PollReads.Load() != 0 {
		t.Fatalf("before the drop: %d notice reads, %d poll reads", st.NoticeReads.Load(), st.PollReads.Load())
	}

	// The listener's connection is cut on the server; it cannot listen
	// again until the gate opens. Polls catch up meanwhile.
	pid := st.ListenerPID.Load()
	terminate(t, db.url, pid)
	checkFor(t, time.Minute, func() error {
		if st.ListenFailures.Load() == 0 {
			return errors.New("the listener has not noticed the drop")
		}
		return nil
	})
	noticeReads := st.NoticeReads.Load()
	w.send(40)
	head = w.committed(t)
	checkFor(t, time.Minute, caughtUp(head))
	drain(head)
	if st.PollReads.Load() == 0 || st.NoticeReads.Load() != noticeReads {
		t.Fatalf("while not listening: %d poll reads, notice reads %d -> %d", st.PollReads.Load(), noticeReads, st.NoticeReads.Load())
	}

	// It listens again: notices drive the reads again.
	close(src.gate)
	// Done with the new connection's first read (the polls while it did
	// not listen were taken before it).
	checkFor(t, time.Minute, func() error {
		if st.ListenConnects.Load() < 2 || !st.Listening.Load() || st.ConnectReads.Load() < 2 {
			return fmt.Errorf("%d listening connections made", st.ListenConnects.Load())
		}
		return nil
	})
	if p := st.ListenerPID.Load(); p == pid || p == 0 {
		t.Fatalf("listening on pid %d again (was %d)", p, pid)
	}
	noticeReads, pollReads := st.NoticeReads.Load(), st.PollReads.Load()
	w.send(40)
	head = w.committed(t)
	checkFor(t, time.Minute, caughtUp(head))
	drain(head)
	if st.NoticeReads.Load() == noticeReads || st.PollReads.Load() != pollReads {
		t.Fatalf("after listening again: notice reads %d -> %d, poll reads %d -> %d",
			noticeReads, st.NoticeReads.Load(), pollReads, st.PollReads.Load())
	}
	for i, rec := range got {
		if rec.Seq != start+int64(i)+1 {
			t.Fatalf("record %d of the subscription has seq %d, want %d", i, rec.Seq, start+int64(i)+1)
		}
	}
	if int64(len(got)) != head-start {
		t.Fatalf("the subscription got %d records, want %d", len(got), head-start)
	}
}

// terminate ends a server process (pg_terminate_backend).
func terminate(t *testing.T, url string, pid uint32) {
	t.Helper()
	if pid == 0 {
		t.Fatal("no listener pid")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
}

// TestChannelName: one channel per schema, within PostgreSQL's identifier
// length.
func TestChannelName(t *testing.T) {
	a, b := pgstore.ChannelName("one"), pgstore.ChannelName("two")
	if a == b || a != "marlowe_commits_one" {
		t.Fatalf("channels %q, %q", a, b)
	}
	long := pgstore.ChannelName(string(make([]byte, 63)))
	if len(long) > 63 || long == pgstore.ChannelName(string(make([]byte, 62))) {
		t.Fatalf("long schema names: %q", long)
	}
	if lsn, err := pgstore.ParseLSN("16/B374D848"); err != nil || lsn != 0x16<<32|0xB374D848 {
		t.Fatalf("ParseLSN: %x, %v", lsn, err)
	}
	if _, err := pgstore.ParseLSN("16B374D848"); err == nil {
		t.Fatal("ParseLSN took an LSN without a slash")
	}
}

// TestMirrorHearsOnlyItsSchema: two deployments in two schemas of one
// database notify on channels of their own; a reader of one hears none
// of the other's commits.
func TestMirrorHearsOnlyItsSchema(t *testing.T) {
	mine, other := openTest(t), openTest(t)
	if err := mine.Init(context.Background(), &history.InitParams{NetworkMagic: 42}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mine.Close() })
	w := newWriter(t, other)
	read := mine.open(t)
	t.Cleanup(func() { _ = read.Close() })
	r := newReader(t, read, read, history.MirrorConfig{PollInterval: time.Hour})
	st := r.mirror.Stats()
	checkFor(t, time.Minute, func() error {
		if st.ConnectReads.Load() == 0 {
			return errors.New("the reader does not listen yet")
		}
		return nil
	})
	w.send(30)
	if head := w.committed(t); head == 0 {
		t.Fatal("the other schema's writer committed nothing")
	}
	// A commit of ours after theirs (a block without records): once its
	// notice is heard, theirs would have been too.
	if err := mine.Commit(context.Background(), &history.CommitParams{Checkpoint: history.CheckpointUpdate{
		Breadcrumbs: []chain.BlockHeader{{Slot: 10, BlockNo: 1, Hash: chain.Hash32{1}}}}}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, time.Minute, func() error {
		if st.Notices.Load() == 0 {
			return errors.New("no notice of this schema's commit")
		}
		return nil
	})
	if n := st.Notices.Load(); n != 1 || r.handle.Head() != 0 {
		t.Fatalf("a reader of an empty schema heard %d notices and is at seq %d", n, r.handle.Head())
	}
}

// lagging is a read database that has replayed the log up to upTo only,
// as a streaming replica behind its primary (log reads only).
type lagging struct {
	history.Backend
	upTo atomic.Int64
}

func (l *lagging) Head(ctx context.Context) (int64, error) {
	h, err := l.Backend.Head(ctx)
	return min(h, l.upTo.Load()), err
}

func (l *lagging) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	if p.Mode != record.ModeLog {
		return nil, errors.New("lagging: log reads only")
	}
	q := *p
	if q.UpTo == 0 || q.UpTo > l.upTo.Load() {
		q.UpTo = l.upTo.Load()
	}
	if q.After >= q.UpTo {
		return nil, nil
	}
	return l.Backend.RecordList(ctx, &q)
}

// TestMirrorCursorAheadOfTheReader: a subscription from a cursor the
// reader has not reached (a client that moved from a reader further
// ahead) delivers nothing until the reader has it, then exactly the
// records after it; the cursor is valid there (CommittedHead).
func TestMirrorCursorAheadOfTheReader(t *testing.T) {
	db := openTest(t)
	w := newWriter(t, db)
	w.send(60)
	head := w.committed(t)
	read := db.open(t)
	t.Cleanup(func() { _ = read.Close() })
	lag := &lagging{Backend: read}
	lag.upTo.Store(head / 3)
	r := newReader(t, lag, read, history.MirrorConfig{PollInterval: time.Hour, ReplicaRetry: 5 * time.Millisecond})
	checkFor(t, time.Minute, func() error {
		if h := r.handle.Head(); h != head/3 {
			return fmt.Errorf("the reader at seq %d, want %d", h, head/3)
		}
		return nil
	})
	if c := r.handle.CommittedHead(); c != head {
		t.Fatalf("CommittedHead %d, want the writer's %d", c, head)
	}
	cursor := 2 * head / 3
	sub := r.handle.Subscribe(record.Filter{}, record.From{Kind: record.FromCursor, Cursor: record.Cursor{Seq: cursor}})
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	b, err := sub.Next(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cursor at %d on a reader at %d gave %d records, %v", cursor, r.handle.Head(), len(b.Records), err)
	}
	lag.upTo.Store(head) // the replica replays the rest
	var got []int64
	for int64(len(got)) < head-cursor {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		b, err := sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, seqsOf(b.Records)...)
	}
	for i, seq := range got {
		if seq != cursor+int64(i)+1 {
			t.Fatalf("after cursor %d: got %v", cursor, got)
		}
	}
}

// newSystem returns an actor system for a test; protoactor's own logs are
// dropped (what the actors log goes to the test's logger).
func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}
