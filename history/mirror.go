package history

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
	"github.com/marlowe-follower/follower/history/record"
)

// MirrorConfig tunes a Mirror. Zero fields take the defaults.
type MirrorConfig struct {
	// PollInterval: while the mirror listens, it still reads the writer's
	// progress this often, in case a notice was lost (DefaultPollInterval).
	PollInterval time.Duration
	// DownPollInterval: while it has no listening connection, it reads the
	// progress this often (DefaultDownPollInterval).
	DownPollInterval time.Duration
	// ReplicaRetry: while the read database (a replica) is behind the
	// writer's head, its head is read again this often
	// (DefaultReplicaRetry).
	ReplicaRetry time.Duration
	// MinBackoff and MaxBackoff bound the waits between attempts to
	// listen again (DefaultListenMinBackoff, DefaultListenMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// PageSize is how many records one read of new records takes
	// (DefaultMirrorPage, at most record.MaxListLimit).
	PageSize int
	// LiveQueue is how many batches a live subscriber may have queued
	// before it is sent back to catch up (as StoreConfig.LiveQueue).
	LiveQueue int
	// LiveTail is how many of the newest records the mirror holds for
	// go-live requests behind its head (as StoreConfig.LiveTail).
	LiveTail int
}

// Defaults of MirrorConfig.
const (
	DefaultPollInterval     = 2 * time.Second
	DefaultDownPollInterval = 500 * time.Millisecond
	DefaultReplicaRetry     = 50 * time.Millisecond
	DefaultListenMinBackoff = 100 * time.Millisecond
	DefaultListenMaxBackoff = 5 * time.Second
	DefaultMirrorPage       = 1000
)

func (c *MirrorConfig) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.DownPollInterval, DefaultDownPollInterval)
	def(&c.ReplicaRetry, DefaultReplicaRetry)
	def(&c.MinBackoff, DefaultListenMinBackoff)
	def(&c.MaxBackoff, max(DefaultListenMaxBackoff, c.MinBackoff))
	if c.PageSize <= 0 {
		c.PageSize = DefaultMirrorPage
	}
	c.PageSize = min(c.PageSize, record.MaxListLimit)
	if c.LiveQueue <= 0 {
		c.LiveQueue = DefaultStoreConfig().LiveQueue
	}
	if c.LiveTail <= 0 {
		c.LiveTail = DefaultStoreConfig().LiveTail
	}
}

// ErrHeadWentBack is a Mirror's fatal error: the read database's head went
// back below what the mirror delivered, so it is not the database the
// mirror followed. The mirror fails with it and no incarnation can mend it.
var ErrHeadWentBack = errors.New("the read database's head went back")

// MirrorStats are a Mirror's counters, readable from any goroutine.
type MirrorStats struct {
	Notices    atomic.Uint64 // commit notices received
	BadNotices atomic.Uint64 // notifications on the channel that were not notices (counted, logged, taken as a wake-up)
	Polls      atomic.Uint64 // timed polls
	// ProgressReads counts the reads of the writer's progress done: at
	// each poll and each new listening connection. ConnectReads counts the
	// new connections' catch-up reads done: the progress, then what it
	// shows is new (the first page of it delivered); once it moves, a
	// record committed after it was counted comes by a notice.
	ProgressReads atomic.Uint64
	ConnectReads  atomic.Uint64
	// StalePolls counts the polls dropped because a newer listening
	// connection's read, done before them, had read everything they would.
	StalePolls atomic.Uint64
	// NoticeReads, PollReads and RetryReads count the reads of new records
	// that delivered something, by what started them: a notice, a poll (or
	// a new listening connection, which may have missed notices), or a
	// retry while the replica replays what the writer committed.
	NoticeReads atomic.Uint64
	PollReads   atomic.Uint64
	RetryReads  atomic.Uint64
	Records     atomic.Uint64 // records read and delivered
	// ListenConnects and ListenFailures count listening connections made
	// and lost (or refused); Listening is set while one listens, and
	// ListenerPID is its server process id.
	ListenConnects atomic.Uint64
	ListenFailures atomic.Uint64
	Listening      atomic.Bool
	ListenerPID    atomic.Uint32
	// ReadFailures counts failed reads of either database; ReadError is
	// the newest one's message while they fail (nil once a read succeeds).
	ReadFailures atomic.Uint64
	ReadError    atomic.Pointer[string]
	// Writer is the writer's progress as last noticed or read (nil before
	// the first).
	Writer atomic.Pointer[CommitProgress]
	// ReadHead is the read database's committed head: the primary's head
	// without a replica, else how far the replica has replayed.
	ReadHead atomic.Int64
	// LagBytes is the replica's replay lag behind the primary's current
	// write-ahead log position, -1 when unknown or without a replica.
	LagBytes atomic.Int64
}

// Mirror is the history store of a reader process: it writes nothing, and
// follows what the writer process commits to the shared database. It
// learns of commits from the writer's notices (CommitSource.Listen), with a
// bounded poll when a notice is lost or the listening connection drops,
// reads the new records from the read database (the primary, or a
// streaming replica of it) and fans them out to live subscribers exactly as
// the writer's Store does: a Handle made on Store() subscribes and reads
// identically in both processes. Its head moves only to what the read
// database holds, so a subscriber or a query of this process never sees a
// record the read database has not replayed.
//
// Like the Store it is an actor (Props); each incarnation starts from the
// head the previous one delivered up to, and its live subscribers catch
// up. Failed reads are counted and retried at the next wake-up; only a
// read database whose head went back stops it for good.
type Mirror struct {
	store    *Store // the read side's shared state: presence, counters, backend
	source   CommitSource
	separate bool // the read database is not the source (a replica)
	cfg      MirrorConfig
	stats    MirrorStats
	log      *zap.Logger
}

// NewMirror reads the read database's head. read is where records are
// read; source is the writer's database, which may be read itself (then
// the mirror reads nothing twice) or the primary of the replica read is.
func NewMirror(ctx context.Context, read Backend, source CommitSource, cfg MirrorConfig, logger *zap.Logger) (*Mirror, error) {
	if read == nil || source == nil {
		return nil, errors.New("history mirror: a read backend and a commit source are required")
	}
	cfg.defaults()
	log := logger.Named("history.mirror")
	st := &Store{cfg: StoreConfig{LiveQueue: cfg.LiveQueue, LiveTail: cfg.LiveTail}, log: log, backend: read, stats: &StoreStats{}, fatal: make(chan error, 1)}
	m := &Mirror{store: st, source: source, cfg: cfg, log: log}
	m.separate = any(read) != any(source)
	m.stats.LagBytes.Store(-1)
	head, err := read.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("history mirror: reading the head: %w", err)
	}
	st.stats.Head.Store(head)
	m.stats.ReadHead.Store(head)
	p, err := source.CommitProgress(ctx)
	if err != nil {
		return nil, fmt.Errorf("history mirror: reading the writer's progress: %w", err)
	}
	m.stats.Writer.Store(&p)
	st.known = func() int64 {
		if w := m.stats.Writer.Load(); w != nil {
			return w.Head
		}
		return 0
	}
	return m, nil
}

// Store returns the mirror's store, for NewHandle and a supervisor
// (ExpectRestart, Retire). It has no writer: spawn Props, not Store.Props.
func (m *Mirror) Store() *Store { return m.store }

// Stats returns the mirror's counters.
func (m *Mirror) Stats() *MirrorStats { return &m.stats }

// Replica reports whether records are read from a replica of the writer's
// database.
func (m *Mirror) Replica() bool { return m.separate }

// Props returns the actor's props. Each incarnation is a new follower of
// the database.
func (m *Mirror) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &mirror{Mirror: m} })
}

// mirror is one incarnation of the Mirror's actor.
type mirror struct {
	*Mirror
	system *actor.ActorSystem
	self   *actor.PID

	head       int64 // delivered up to here
	target     int64 // the read database holds records up to here
	writerHead int64 // the writer has committed up to here
	subs       subscribers
	connection uint64 // the number of the newest listening connection whose read is done
	pumping    bool   // a pumpMore is on its way
	retrying   bool   // a replica retry is armed
	cause      wakeCause

	cancel context.CancelFunc
	wg     sync.WaitGroup
	// switched tells the poller that the listening state changed.
	switched chan struct{}
}

type wakeCause uint8

const (
	causePoll    wakeCause = iota
	causeConnect           // a new listening connection: a poll
	causeNotice
	causeRetry
)

// Messages of the mirror.
type (
	// mirrorWake: a notice arrived (notice set), a poll is due, or the
	// replica retry is. connections is the number of listening
	// connections made when it was decided (ListenConnects): a poll
	// decided before a connection whose own read came first is stale.
	mirrorWake struct {
		cause       wakeCause
		notice      *CommitNotice
		connections uint64
	}
	pumpMore struct{}
)

// Receive handles the actor's messages.
func (m *mirror) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.system, m.self = ctx.ActorSystem(), ctx.Self()
		// Where the previous incarnation (or NewMirror) left off: every
		// record up to it was delivered or is in the read database, and
		// the first wake-up reads how far the database is now. Nothing to
		// read here, so that a database away for a while fails no
		// incarnation.
		head := m.store.stats.Head.Load()
		m.subs = newSubscribers(m.system, m.store.stats, m.store.cfg.LiveTail, head)
		m.head, m.target, m.writerHead = head, head, head
		m.store.stats.Head.Store(head)
		m.store.run.attach(m.system, m.self)
		wctx, stop := context.WithCancel(context.Background())
		m.cancel = stop
		m.switched = make(chan struct{}, 1)
		m.wg.Add(2)
		go m.listen(wctx)
		go m.poll(wctx)
	case *mirrorWake:
		m.wake(msg)
	case *pumpMore:
		m.pumping = false
		m.pump()
	case *goLiveRequest, *unsubscribe:
		m.subs.receive(msg, m.head)
	case *actor.Restarting, *actor.Stopping:
		m.stopWatching()
		m.subs.dropAll()
	case *actor.Stopped:
		m.store.run.detach(ctx.Self())
	}
}

func (m *mirror) stopWatching() {
	if m.cancel != nil {
		m.cancel()
		m.wg.Wait()
		m.cancel = nil
	}
}

// listen keeps a listening connection to the source, reconnecting with
// backoff, and hands each notice to the actor.
func (m *mirror) listen(ctx context.Context) {
	defer m.wg.Done()
	system, self := m.system, m.self
	backoff := m.cfg.MinBackoff
	for ctx.Err() == nil {
		err := m.source.Listen(ctx, func(pid uint32) {
			m.stats.ListenerPID.Store(pid)
			m.stats.Listening.Store(true)
			m.signalSwitch()
			n := m.stats.ListenConnects.Add(1)
			if n > 1 {
				m.log.Info("listening for commits again", zap.Uint32("pid", pid))
			}
			backoff = m.cfg.MinBackoff
			// Notices sent while no connection listened are lost: read
			// the progress now.
			system.Root.Send(self, &mirrorWake{cause: causeConnect, connections: n})
		}, func(n CommitNotice, err error) {
			if err != nil {
				m.stats.BadNotices.Add(1)
				m.log.Warn("a notification on the commit channel is not a commit notice; reading the progress instead", zap.Error(err))
				system.Root.Send(self, &mirrorWake{cause: causePoll, connections: m.stats.ListenConnects.Load()})
				return
			}
			m.stats.Notices.Add(1)
			system.Root.Send(self, &mirrorWake{cause: causeNotice, notice: &n})
		})
		m.stats.Listening.Store(false)
		m.stats.ListenerPID.Store(0)
		m.signalSwitch()
		if ctx.Err() != nil {
			return
		}
		m.stats.ListenFailures.Add(1)
		m.log.Warn("listening for commits failed; polling until it listens again", zap.Error(err), zap.Duration("retryIn", backoff))
		if !sleep(ctx, backoff, nil) {
			return
		}
		backoff = min(2*backoff, m.cfg.MaxBackoff)
	}
}

// sleep waits for d and reports whether it passed: false when ctx ended
// first, or wake (nil: never) came.
func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
		return false
	case <-t.C:
		return true
	}
}

func (m *mirror) signalSwitch() {
	select {
	case m.switched <- struct{}{}:
	default:
	}
}

// poll wakes the actor at PollInterval while a connection listens, at
// DownPollInterval while none does.
func (m *mirror) poll(ctx context.Context) {
	defer m.wg.Done()
	system, self := m.system, m.self
	for ctx.Err() == nil {
		// Taken before the wait: a connection made during it reads the
		// progress itself, after this poll was decided.
		connections := m.stats.ListenConnects.Load()
		d := m.cfg.PollInterval
		if !m.stats.Listening.Load() {
			d = m.cfg.DownPollInterval
		}
		if !sleep(ctx, d, m.switched) {
			continue // ended, or the listener came or went: the interval is another
		}
		m.stats.Polls.Add(1)
		system.Root.Send(self, &mirrorWake{cause: causePoll, connections: connections})
	}
}

// readTimeout bounds each read of a wake-up.
const readTimeout = 30 * time.Second

// wake learns how far the writer and the read database are, then reads
// what is new.
func (m *mirror) wake(w *mirrorWake) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	if w.cause == causeRetry {
		m.retrying = false
	}
	if w.cause == causePoll && w.connections < m.connection {
		// A newer connection's read, done already, began after this poll
		// was decided: it read all the poll would. (Counted as a poll
		// read, it would deliver what notices now deliver.)
		m.stats.StalePolls.Add(1)
		return
	}
	switch {
	case w.notice != nil:
		n := *w.notice
		m.stats.Writer.Store(&CommitProgress{Head: n.Seq, Committed: n.Block, Tip: n.Tip})
		m.writerHead = max(m.writerHead, n.Seq)
		if !m.separate {
			// The notice comes once the commit is visible: no read needed.
			m.target = max(m.target, n.Seq)
		}
	case w.cause == causePoll || w.cause == causeConnect:
		p, err := m.source.CommitProgress(ctx)
		if err != nil {
			m.readFailed("reading the writer's progress", err)
			return
		}
		m.stats.ProgressReads.Add(1)
		m.stats.Writer.Store(&p)
		m.writerHead = max(m.writerHead, p.Head)
		if m.separate {
			m.measureLag(ctx)
		} else {
			m.moveTarget(p.Head)
		}
	}
	if m.separate && (m.target < m.writerHead || w.cause != causeNotice) {
		h, err := m.store.backend.Head(ctx)
		if err != nil {
			m.readFailed("reading the replica's head", err)
			return
		}
		m.moveTarget(h)
	}
	m.cause = w.cause
	m.pump()
	if w.cause == causeConnect {
		m.connection = max(m.connection, w.connections)
		m.stats.ConnectReads.Add(1)
	}
}

// moveTarget takes the read database's head. The mirror stops for good
// when it went back: the database is another one, or an older copy, and
// what this process delivered is not in it.
func (m *mirror) moveTarget(h int64) {
	m.stats.ReadHead.Store(h)
	m.stats.ReadError.Store(nil)
	if h < m.head {
		err := fmt.Errorf("history mirror: %w from seq %d to %d: "+
			"it is another database or an older copy (point a reader at one database or replica)", ErrHeadWentBack, m.head, h)
		m.log.Error("stopping", zap.Error(err))
		select {
		case m.store.fatal <- err:
		default:
		}
		panic(err)
	}
	m.target = max(m.target, h)
}

// measureLag reads both databases' log positions (a replica's lag in bytes).
func (m *mirror) measureLag(ctx context.Context) {
	pw, ok1 := m.source.(WALReporter)
	rw, ok2 := m.store.backend.(WALReporter)
	if !ok1 || !ok2 {
		return
	}
	replayed, _, err := rw.WALPosition(ctx)
	if err != nil {
		m.stats.LagBytes.Store(-1)
		return
	}
	current, _, err := pw.WALPosition(ctx)
	if err != nil {
		m.stats.LagBytes.Store(-1)
		return
	}
	lag := int64(0)
	if current > replayed {
		lag = int64(current - replayed)
	}
	m.stats.LagBytes.Store(lag)
}

func (m *mirror) readFailed(what string, err error) {
	n := m.stats.ReadFailures.Add(1)
	msg := what + ": " + err.Error()
	m.stats.ReadError.Store(&msg)
	if n == 1 || n%100 == 0 {
		m.log.Warn("a read failed; the next poll tries again", zap.String("read", what), zap.Error(err), zap.Uint64("failures", n))
	}
}

// pump reads one page of new records and delivers it; while more remain
// it asks for the next page with a message, so that go-live requests and
// unsubscriptions come in between.
func (m *mirror) pump() {
	if m.head >= m.target {
		m.armRetry()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	recs, err := m.store.backend.RecordList(ctx, &record.RecordListParams{
		Mode: record.ModeLog, After: m.head, UpTo: m.target, Limit: m.cfg.PageSize})
	if err != nil {
		m.readFailed("reading new records", err)
		return
	}
	m.stats.ReadError.Store(nil)
	if len(recs) == 0 || recs[0].Seq != m.head+1 {
		m.readFailed("reading new records", fmt.Errorf("records after seq %d up to %d: got %d starting at %v", m.head, m.target, len(recs), firstSeq(recs)))
		return
	}
	for i := range recs {
		if recs[i].Seq != m.head+1+int64(i) {
			m.readFailed("reading new records", fmt.Errorf("a gap in the log after seq %d", recs[i-1].Seq))
			return
		}
		// As the writer delivers them: the record as appended; a later
		// rollback comes as its RolledBack marker.
		recs[i].RolledBackBy = nil
	}
	index, err := m.indexer(ctx, recs)
	if err != nil {
		m.readFailed("reading the contract index", err)
		return
	}
	m.head = recs[len(recs)-1].Seq
	m.store.stats.Head.Store(m.head)
	m.stats.Records.Add(uint64(len(recs)))
	switch m.cause {
	case causeNotice:
		m.stats.NoticeReads.Add(1)
	case causeRetry:
		m.stats.RetryReads.Add(1)
	default:
		m.stats.PollReads.Add(1)
	}
	m.subs.fanOut(recs, index)
	if m.head < m.target {
		if !m.pumping {
			m.pumping = true
			m.system.Root.Send(m.self, &pumpMore{})
		}
		return
	}
	m.armRetry()
}

func firstSeq(recs []record.Record) any {
	if len(recs) == 0 {
		return "none"
	}
	return recs[0].Seq
}

// armRetry reads the replica's head again soon while it is behind the
// writer's.
func (m *mirror) armRetry() {
	if !m.separate || m.retrying || m.target >= m.writerHead {
		return
	}
	m.retrying = true
	system, self := m.system, m.self
	time.AfterFunc(m.cfg.ReplicaRetry, func() { system.Root.Send(self, &mirrorWake{cause: causeRetry}) })
}

// indexer returns the contract index lookup of one page's fan-out: the
// entries of the page's contracts as the read database holds them, read
// only when a subscriber's filter needs them (nil when none does). A
// failed read fails the page (it is read again), so that no filter misses
// a record for it.
func (m *mirror) indexer(ctx context.Context, recs []record.Record) (func(*chain.TxOutRef) *record.ContractIndex, error) {
	if !m.subs.needIndex() {
		return nil, nil
	}
	cache := map[chain.TxOutRef]*record.ContractIndex{}
	for i := range recs {
		id := recs[i].Contract
		if id == nil {
			continue
		}
		if _, ok := cache[*id]; ok {
			continue
		}
		idx, err := m.store.backend.ContractGet(ctx, *id)
		if err != nil && !errors.Is(err, record.ErrNotFound) {
			return nil, fmt.Errorf("contract %s: %w", *id, err)
		}
		cache[*id] = idx
	}
	return func(id *chain.TxOutRef) *record.ContractIndex {
		if id == nil {
			return nil
		}
		return cache[*id]
	}, nil
}
