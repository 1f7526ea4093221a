package chainsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	ouroboros "github.com/blinklabs-io/gouroboros"
	gchainsync "github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/handoff"
)

// Sink receives the follower's events in chain order.
type Sink interface {
	// Deliver hands over one event. It may block to apply back-pressure; it
	// must return ctx.Err() promptly once ctx is done. Once it returns nil
	// the event belongs to the sink.
	Deliver(ctx context.Context, ev classify.Event) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, ev classify.Event) error

// Deliver calls f.
func (f SinkFunc) Deliver(ctx context.Context, ev classify.Event) error { return f(ctx, ev) }

// errStale stops callbacks of a connection that has been replaced.
var errStale = errors.New("connection replaced")

// Follower is the chain-sync actor. Create it with NewFollower and spawn it
// with Props; it starts connecting when started and stops cleanly when
// poisoned.
//
// Everything happens in its Receive: the connection's gouroboros callbacks
// only forward each block or rollback to its mailbox and wait for the
// actor to take it, so the actor classifies in chain order with no lock,
// and the node is read no faster than the actor takes blocks. Sent with
// SendTo, events go downstream as handoff.ChainEvent messages, each taking one of
// Config.InFlight credits; the credits come back as handoff.CreditsReturned
// messages once the events are done (committed). While none is left the
// actor keeps the block it was offered and takes it when credits return:
// the callback waits for the actor, never for a credit. Without SendTo the
// events go to the Sink, called in Receive.
//
// Follower holds what outlives an incarnation: the settings, the progress
// board and where to send events. Every incarnation Props spawns (the
// first, and each one a supervisor starts after a failure) is a fresh
// actor with its own classifier that restores from the checkpoint when it
// starts, so that it resumes from what is committed.
type Follower struct {
	cfg        Config
	log        *zap.Logger
	checkpoint handoff.Checkpoints
	sink       Sink
	target     *actor.PID
	progress   *Progress
	options    classify.Options
	first      *classify.Classifier // NewFollower's, for the first incarnation
	firstMu    sync.Mutex
}

// NewFollower returns a follower. classifier may carry options (a
// DecodeAll classifier for checks): the first incarnation uses it, the
// ones after it a new classifier with its options. progress is updated as
// it goes. sink receives the events unless SendTo is called.
func NewFollower(cfg Config, logger *zap.Logger, checkpoint handoff.Checkpoints, classifier *classify.Classifier, sink Sink, progress *Progress) (*Follower, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = &Progress{}
	}
	if classifier == nil {
		classifier = classify.New(classify.Options{})
	}
	return &Follower{
		cfg: cfg, log: logger.Named("chainsync"), checkpoint: checkpoint, sink: sink, progress: progress,
		options: classifier.Options(), first: classifier,
	}, nil
}

// SendTo sends the events to target as *handoff.ChainEvent messages, at most
// Config.InFlight of them not yet returned (handoff.CreditsReturned). Call it
// before spawning.
func (f *Follower) SendTo(target *actor.PID) { f.target = target }

// Props returns the actor's props. Each incarnation is a fresh actor.
func (f *Follower) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		f.firstMu.Lock()
		c := f.first
		f.first = nil
		f.firstMu.Unlock()
		if c == nil {
			c = classify.New(f.options)
		}
		return &follower{Follower: f, classifier: c, crumbs: chain.NewBreadcrumbs(nil), credits: f.cfg.InFlight}
	})
}

// follower is one incarnation of the chain-sync actor. Only Receive
// touches it, except activeGen, which the connection's goroutines read.
type follower struct {
	*Follower
	classifier *classify.Classifier
	crumbs     *chain.Breadcrumbs
	restored   bool
	credits    int       // events that may still be sent downstream
	parked     *chainMsg // a block or rollback waiting for a credit

	activeGen atomic.Uint64 // generation of the connection allowed to deliver

	system   *actor.ActorSystem
	self     *actor.PID
	gen      uint64
	attempts int
	conn     *ouroboros.Connection
	cancel   context.CancelFunc
	stopping bool
	failed   bool
}

// Progress returns the follower's progress board.
func (f *Follower) Progress() *Progress { return f.progress }

// Messages the actor sends itself.
type (
	connectCmd   struct{ gen uint64 }
	connectedMsg struct {
		gen    uint64
		conn   *ouroboros.Connection
		cancel context.CancelFunc
	}
	connectFailed struct {
		gen uint64
		err error
	}
	connectionLost struct {
		gen uint64
		err error
	}
	// nodeBehind: the node's tip is behind our point; poll it again.
	nodeBehind struct {
		gen uint64
		err *NodeBehindError
	}
	// diverged: the node's chain and ours part; following stops.
	diverged struct {
		gen uint64
		err error
	}
	// chainMsg is a block (raw set) or a rollback the connection's
	// callback forwards; it waits for reply.
	chainMsg struct {
		sess      *session
		blockType uint
		raw       []byte
		point     pcommon.Point // of a rollback
		rollback  bool
		tip       gchainsync.Tip
		reply     chan error
	}
)

// Receive handles the actor's messages.
func (f *follower) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *chainMsg:
		if f.activeGen.Load() != msg.sess.gen || f.stopping {
			msg.reply <- errStale
			return
		}
		if f.target != nil && f.credits == 0 {
			// No credit: the block waits, and its callback with it, so
			// the node is not read on. (One connection follows at a
			// time, and its callback forwards one message at a time.)
			if f.parked != nil {
				f.parked.reply <- errStale
			}
			f.parked = msg
			return
		}
		f.chain(msg)
	case *handoff.CreditsReturned:
		f.credits = min(f.credits+msg.N, f.cfg.InFlight)
		if p := f.parked; p != nil && f.credits > 0 {
			f.parked = nil
			f.chain(p)
		}
	case *actor.Started:
		f.system, f.self = ctx.ActorSystem(), ctx.Self()
		f.gen = 1
		ctx.Send(ctx.Self(), &connectCmd{gen: f.gen})
	case *actor.Stopping:
		f.stopping = true
		f.closeConn()
		f.progress.setConnected(false, "stopped")
	case *connectCmd:
		if msg.gen == f.gen && !f.stopping && !f.failed {
			f.progress.attempt()
			if err := f.restore(); err != nil {
				f.retry(msg.gen, "connecting to the node failed", fmt.Errorf("restoring the checkpoint: %w", err))
				return
			}
			go f.connect(msg.gen, f.snapshot())
		}
	case *connectedMsg:
		if msg.gen != f.gen || f.stopping {
			msg.cancel()
			_ = msg.conn.Close()
			return
		}
		f.conn, f.cancel = msg.conn, msg.cancel
		if w := f.progress.Snapshot().Waiting; w != nil {
			f.log.Info("the node reached the follower's point: following again",
				zap.Duration("waited", time.Since(w.Since)), zap.Int("polls", f.attempts))
		} else if f.attempts > 0 {
			f.log.Info("reconnected to the node", zap.Int("attempts", f.attempts))
		}
		f.attempts = 0
		f.progress.setConnected(true, "")
	case *connectFailed:
		f.retry(msg.gen, "connecting to the node failed", msg.err)
	case *connectionLost:
		f.retry(msg.gen, "lost the node connection", msg.err)
	case *nodeBehind:
		if msg.gen != f.gen || f.stopping || f.failed {
			return
		}
		first := f.progress.Snapshot().Waiting == nil
		f.progress.setWaiting(msg.err)
		fields := []zap.Field{zap.Uint64("nodeTipBlock", msg.err.NodeTip.BlockNo), zap.Uint64("nodeTipSlot", msg.err.NodeTip.Point.Slot),
			zap.Uint64("block", msg.err.Point.BlockNo), zap.Uint64("slot", msg.err.Point.Slot), zap.Uint64("blocksBehind", msg.err.Blocks())}
		if first {
			f.log.Warn("the node is behind the follower: waiting for it to reach our point (nothing is rolled back)", fields...)
		} else {
			f.log.Debug("the node is still behind the follower", fields...)
		}
		f.schedule(msg.gen)
	case *diverged:
		if msg.gen != f.gen || f.stopping || f.failed {
			return
		}
		f.failed = true
		f.closeConn()
		f.log.Error("following stopped: operator action needed", zap.Error(msg.err), zap.String("action", ResetAction))
		f.progress.setDiverged(msg.err)
	}
}

func (f *follower) closeConn() {
	f.activeGen.Store(0)
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
	if p := f.parked; p != nil {
		f.parked = nil
		p.reply <- errStale
	}
}

// retry closes the current connection and schedules the next attempt after
// a capped exponential backoff with jitter.
func (f *follower) retry(gen uint64, what string, err error) {
	if gen != f.gen || f.stopping || f.failed {
		return
	}
	f.closeConn()
	f.gen++
	f.attempts++
	wait := f.backoff()
	level := zap.WarnLevel
	fields := []zap.Field{zap.Error(err), zap.Int("attempt", f.attempts), zap.Duration("retryIn", wait)}
	var he *HandshakeError
	switch {
	case errors.As(err, &he):
		level, what = zap.ErrorLevel, "node handshake failed"
		fields = append(fields, zap.String("reason", he.Reason), zap.Uint32("networkMagic", he.Magic))
		if he.NodeMagic != 0 {
			fields = append(fields, zap.Uint32("nodeNetworkMagic", he.NodeMagic))
		}
		if he.NodeMessage != "" {
			fields = append(fields, zap.String("nodeSaid", he.NodeMessage))
		}
	case errors.Is(err, ErrNoIntersection):
		level = zap.ErrorLevel
	}
	f.log.Log(level, what, fields...)
	f.progress.failed(err)
	next := f.gen
	system, self := f.system, f.self
	time.AfterFunc(wait, func() { system.Root.Send(self, &connectCmd{gen: next}) })
}

// schedule closes the connection and polls the node again after the
// backoff: the node is reachable but behind.
func (f *follower) schedule(gen uint64) {
	f.closeConn()
	f.gen++
	f.attempts++
	wait := f.backoff()
	next := f.gen
	system, self := f.system, f.self
	time.AfterFunc(wait, func() { system.Root.Send(self, &connectCmd{gen: next}) })
}

// backoff is the wait before the next attempt: capped exponential, with jitter.
func (f *follower) backoff() time.Duration {
	shift := min(f.attempts-1, 20)
	wait := min(f.cfg.MinBackoff<<shift, f.cfg.MaxBackoff)
	return time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
}

// restore loads the checkpoint once, before the incarnation's first
// connection.
func (f *follower) restore() error {
	if f.restored || f.checkpoint == nil {
		f.restored = true
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := f.checkpoint.Restore(ctx)
	if err != nil {
		return err
	}
	if r != nil {
		f.crumbs = chain.NewBreadcrumbs(r.Breadcrumbs)
		f.classifier.UTxOs().Restore(r.UTxOs, r.Recent, r.Horizon)
		if tip, ok := f.crumbs.Tip(); ok {
			f.progress.setPoint(tip)
			f.log.Info("resuming", zap.Uint64("slot", tip.Slot), zap.Uint64("block", tip.BlockNo),
				zap.Int("trackedUTxOs", len(r.UTxOs)))
		}
	}
	f.restored = true
	return nil
}

// chain handles a block or rollback from the connection.
func (f *follower) chain(m *chainMsg) {
	if f.activeGen.Load() != m.sess.gen || f.stopping {
		m.reply <- errStale
		return
	}
	if m.rollback {
		m.reply <- f.rollBackward(m)
		return
	}
	f.rollForward(m)
}

// send hands an event downstream; false when the sink refused it.
func (f *follower) send(ctx context.Context, ev classify.Event) error {
	if f.target == nil {
		return f.sink.Deliver(ctx, ev)
	}
	f.credits--
	f.system.Root.Send(f.target, &handoff.ChainEvent{Event: ev, Credit: f.self})
	return nil
}

func (f *follower) rollForward(m *chainMsg) {
	sess := m.sess
	t := fromTip(m.tip)
	f.progress.setTip(t)
	if !sess.confirmed {
		// Nodes answer an intersection with a rollback to it first;
		// a block instead confirms it as well.
		sess.confirmed = true
		sess.verdict <- nil
	}
	if f.target != nil {
		// The actor has the block and a credit for it: the connection
		// reads the next one meanwhile.
		m.reply <- nil
	}
	ev, err := f.classifier.RollForward(block.Type(m.blockType), m.raw, t)
	if err != nil {
		f.log.Error("undecodable block", zap.Uint("type", m.blockType), zap.Int("bytes", len(m.raw)), zap.Error(err))
		f.progress.count(classifyStatsDelta{failures: 1})
		err = f.send(sess.ctx, &classify.Undecodable{Type: block.Type(m.blockType), Size: len(m.raw), Tip: t, Reason: err.Error()})
		if f.target == nil {
			m.reply <- err
		}
		return
	}
	for _, fl := range ev.Failures {
		f.log.Error("undecodable transaction data", zap.Uint64("slot", ev.Header.Slot), zap.Stringer("hash", ev.Header.Hash),
			zap.Int("tx", fl.TxIndex), zap.String("reason", fl.Reason))
	}
	if err := f.send(sess.ctx, ev); err != nil {
		// Downstream never got the block: undo it so that the
		// classifier agrees with what was delivered.
		prev, _ := f.crumbs.Tip()
		if _, uerr := f.classifier.RollBackward(prev.Point(), t); uerr != nil {
			f.log.Error("undoing an undelivered block", zap.Error(uerr))
		}
		m.reply <- err
		return
	}
	f.crumbs.Add(ev.Header)
	f.progress.forward(ev, len(m.raw))
	if f.target == nil {
		m.reply <- nil
	}
}

func (f *follower) rollBackward(m *chainMsg) error {
	sess, gen := m.sess, m.sess.gen
	t := fromTip(m.tip)
	f.progress.setTip(t)
	p := fromPoint(m.point)
	cur, ok := f.crumbs.Tip()
	if !sess.confirmed {
		// The answer to the intersection. A node whose tip is behind
		// our point (an older snapshot, resyncing, a failover) may
		// still have one of our older points: rolling back to it
		// would mark thousands of good records rolled back and append
		// them again under new seqs once the node catches up, or stop
		// at a rollback deeper than the UTxO changes kept. Wait instead.
		sess.confirmed = true
		if ok && t.BlockNo < cur.BlockNo {
			sess.quiet.Store(true)
			f.activeGen.CompareAndSwap(gen, 0)
			sess.verdict <- &NodeBehindError{NodeTip: t, Point: cur}
			return errStale
		}
		sess.verdict <- nil
	}
	if !ok || cur.Point() == p {
		// Nothing delivered yet, or the node confirms the intersection:
		// nothing to undo.
		return nil
	}
	ev, err := f.classifier.RollBackward(p, t)
	if err != nil {
		err = fmt.Errorf("%w: the node's chain and the stored history part deeper than the UTxO changes kept; following stopped: %s",
			err, ResetAction)
		sess.quiet.Store(true)
		f.system.Root.Send(f.self, &diverged{gen: gen, err: err})
		return err
	}
	if err := f.send(sess.ctx, ev); err != nil {
		f.classifier.Redo(ev)
		return err
	}
	// The depth is exact when p is a breadcrumb, else an upper bound.
	depth := uint64(0)
	for _, h := range f.crumbs.Headers() {
		if h.Slot <= p.Slot {
			depth = cur.BlockNo - h.BlockNo
			break
		}
	}
	f.crumbs.RollBack(p)
	f.progress.rolledBack(p, depth)
	f.log.Info("rollback", zap.Stringer("to", p), zap.Uint64("depth", depth))
	return nil
}
