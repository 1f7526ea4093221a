package chainsync

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
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

// ErrNoIntersection is reported when none of the stored points is on the
// node's chain. When the node's tip is behind our point the follower waits
// for it (NodeBehindError); when it is at or past our point the stored
// history is on a fork the node does not have (DivergedError): following
// stops, and following again is the operator's decision
// (`marlowe-follower reset`), never taken silently.
var ErrNoIntersection = errors.New("no intersection with the node's chain")

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

// connectState is what connect needs of the actor's state, taken before
// it starts: no block arrives while no connection follows.
type connectState struct {
	crumbs      []chain.Point
	newest      chain.BlockHeader
	stored      bool // newest is set
	startsAtTip bool
}

// snapshot returns the state the next connection starts from.
func (f *follower) snapshot() connectState {
	newest, ok := f.crumbs.Tip()
	return connectState{crumbs: f.crumbs.Points(), newest: newest, stored: ok, startsAtTip: !ok && f.cfg.Start.Kind == StartTip}
}

// connect dials the node, intersects and starts syncing. It runs outside
// the actor and reports back with a message.
func (f *follower) connect(gen uint64, st connectState) {
	send := func(m any) { f.system.Root.Send(f.self, m) }
	ctx, cancel := context.WithCancel(context.Background())
	nc, err := net.DialTimeout("unix", f.cfg.SocketPath, 10*time.Second)
	if err != nil {
		cancel()
		send(&connectFailed{gen: gen, err: err})
		return
	}
	// The handshake: its bytes are kept to read a refusal from, and it is
	// bounded in time.
	rec := newRecordingConn(nc)
	var timedOut atomic.Bool
	timer := time.AfterFunc(handshakeTimeout, func() {
		timedOut.Store(true)
		_ = nc.Close()
	})
	errs := make(chan error, 16)
	sess := &session{gen: gen, ctx: ctx, verdict: make(chan *NodeBehindError, 1), lost: make(chan struct{})}
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(rec),
		ouroboros.WithNetworkMagic(f.cfg.NetworkMagic),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithErrorChan(errs),
		ouroboros.WithChainSyncConfig(gchainsync.NewConfig(
			gchainsync.WithRollForwardRawFunc(f.onRollForward(sess)),
			gchainsync.WithRollBackwardFunc(f.onRollBackward(sess)),
			gchainsync.WithPipelineLimit(f.cfg.PipelineLimit),
		)),
	)
	timer.Stop()
	recorded := rec.stop()
	if err == nil && timedOut.Load() {
		_ = conn.Close()
		err = errHandshakeTimeout
	}
	if err != nil {
		cancel()
		_ = nc.Close()
		if timedOut.Load() {
			err = errHandshakeTimeout
		}
		send(&connectFailed{gen: gen, err: f.diagnoseHandshake(err, recorded)})
		return
	}
	// Report the first error of the connection and keep draining. The
	// library closes the channel when the connection ends, sometimes
	// without an error (a peer closing while every protocol is idle):
	// that is a loss too.
	// A connection closed on purpose (the node is behind, or diverged) is
	// not a loss: sess.quiet keeps its errors from being reported.
	go func() {
		reported := false
		report := func(err error) {
			reported = true
			close(sess.lost)
			if !sess.quiet.Load() {
				send(&connectionLost{gen: gen, err: err})
			}
		}
		for err := range errs {
			if !reported && err != nil {
				report(err)
			}
		}
		if !reported {
			report(errors.New("the node closed the connection"))
		}
	}()
	fail := func(err error) {
		cancel()
		_ = conn.Close()
		send(&connectFailed{gen: gen, err: err})
	}
	quit := func(m any) {
		sess.quiet.Store(true)
		cancel()
		_ = conn.Close()
		send(m)
	}
	points, err := f.intersectPoints(conn, st)
	if err != nil {
		fail(err)
		return
	}
	f.activeGen.Store(gen)
	err = conn.ChainSync().Client.Sync(points)
	if errors.Is(err, gchainsync.ErrIntersectNotFound) && st.startsAtTip {
		// gouroboros v0.194.0 can hand Sync the answer of the tip query
		// just before it on the same connection; asking again gets Sync's own.
		err = conn.ChainSync().Client.Sync(points)
	}
	if err != nil {
		f.activeGen.CompareAndSwap(gen, 0)
		if !errors.Is(err, gchainsync.ErrIntersectNotFound) {
			fail(err)
			return
		}
		ours, stored := st.newest, st.stored
		if !stored {
			// A configured start point the node does not have (yet).
			fail(fmt.Errorf("%w: the start point %s is not on it (node.start)", ErrNoIntersection, describe(points)))
			return
		}
		// Sync has had its answer: a tip query on this connection now
		// gets its own.
		tip, terr := conn.ChainSync().Client.GetCurrentTip()
		if terr != nil {
			fail(fmt.Errorf("asking the node for its tip after finding no intersection: %w", terr))
			return
		}
		t := fromTip(*tip)
		f.progress.setTip(t)
		if t.BlockNo < ours.BlockNo {
			quit(&nodeBehind{gen: gen, err: &NodeBehindError{NodeTip: t, Point: ours}})
			return
		}
		quit(&diverged{gen: gen, err: &DivergedError{NodeTip: t, Point: ours, Points: points}})
		return
	}
	// The node's first answer confirms the intersection and carries its
	// tip: only then is the connection following (see session).
	select {
	case behind := <-sess.verdict:
		if behind != nil {
			quit(&nodeBehind{gen: gen, err: behind})
			return
		}
	case <-sess.lost:
		select {
		case behind := <-sess.verdict:
			if behind != nil {
				quit(&nodeBehind{gen: gen, err: behind})
				return
			}
		default:
		}
		cancel()
		_ = conn.Close()
		return // reported as a lost connection
	case <-time.After(confirmTimeout):
		fail(errors.New("the node did not answer after the intersection"))
		return
	}
	send(&connectedMsg{gen: gen, conn: conn, cancel: cancel})
}

// confirmTimeout bounds the wait for the node's first answer after an
// intersection was found.
const confirmTimeout = 30 * time.Second

// session is one connection's state shared by its callbacks and connect.
type session struct {
	gen uint64
	ctx context.Context // ends when the connection is closed
	// confirmed is set by the first message after the intersection (by
	// the actor); verdict then receives nil, or why the connection must
	// not follow: the node's tip is behind our point.
	confirmed bool
	verdict   chan *NodeBehindError
	// quiet marks a connection closed on purpose; lost is closed when the
	// connection reported its first error.
	quiet atomic.Bool
	lost  chan struct{}
}

// NodeBehindError says that the node's tip is behind the follower's point:
// the node was restored from an older snapshot, is resyncing, or is another
// node after a failover. The follower neither rolls back nor stops: it
// waits until the node has reached its point.
type NodeBehindError struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader // the follower's newest block
}

// Blocks is how many blocks the node is behind.
func (e *NodeBehindError) Blocks() uint64 {
	if e.NodeTip.BlockNo >= e.Point.BlockNo {
		return 0
	}
	return e.Point.BlockNo - e.NodeTip.BlockNo
}

func (e *NodeBehindError) Error() string {
	return fmt.Sprintf("the node's tip (block %d, slot %d) is %d blocks behind the follower's point (block %d, slot %d): "+
		"waiting for the node to reach it (nothing is rolled back)",
		e.NodeTip.BlockNo, e.NodeTip.Point.Slot, e.Blocks(), e.Point.BlockNo, e.Point.Slot)
}

// DivergedError says that the node is at or past the follower's point and
// shares none of its stored points: the stored history is on a fork the
// node does not have (or another chain). Following stops for the operator.
type DivergedError struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader
	Points  []pcommon.Point
}

// ResetAction is what an operator runs when the stored history has diverged
// from the node's chain.
const ResetAction = "stop the service, run `marlowe-follower reset --yes` (it deletes the history, the projection and the durable streams) and start it again"

func (e *DivergedError) Unwrap() error { return ErrNoIntersection }

func (e *DivergedError) Error() string {
	oldest := "none"
	if n := len(e.Points); n > 0 {
		oldest = fmt.Sprintf("slot %d", e.Points[n-1].Slot)
	}
	return fmt.Sprintf("%s: the node's tip (block %d, slot %d) is at or past the follower's point (block %d, slot %d) and none of "+
		"the %d stored points (newest %s, oldest %s) is on its chain: the stored history is on a fork the node does not have; "+
		"following stopped: %s", ErrNoIntersection, e.NodeTip.BlockNo, e.NodeTip.Point.Slot, e.Point.BlockNo, e.Point.Slot,
		len(e.Points), describe(e.Points), oldest, ResetAction)
}

func describe(points []pcommon.Point) string {
	if len(points) == 0 {
		return "origin"
	}
	p := points[0]
	return fmt.Sprintf("slot %d", p.Slot)
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

// intersectPoints returns the points to intersect with: the breadcrumbs of
// what was delivered, else the configured start.
func (f *follower) intersectPoints(conn *ouroboros.Connection, st connectState) ([]pcommon.Point, error) {
	crumbs := st.crumbs
	if len(crumbs) > 0 {
		out := make([]pcommon.Point, len(crumbs))
		for i, p := range crumbs {
			out[i] = toPoint(p)
		}
		return out, nil
	}
	switch f.cfg.Start.Kind {
	case StartTip:
		tip, err := conn.ChainSync().Client.GetCurrentTip()
		if err != nil {
			return nil, fmt.Errorf("asking the node for its tip: %w", err)
		}
		return []pcommon.Point{tip.Point}, nil
	case StartPoint:
		return []pcommon.Point{toPoint(f.cfg.Start.Point)}, nil
	}
	return []pcommon.Point{pcommon.NewPointOrigin()}, nil
}

func toPoint(p chain.Point) pcommon.Point {
	if p.IsOrigin() {
		return pcommon.NewPointOrigin()
	}
	return pcommon.NewPoint(p.Slot, p.Hash[:])
}

func fromPoint(p pcommon.Point) chain.Point {
	if p.Slot == 0 && len(p.Hash) == 0 {
		return chain.Origin
	}
	var h chain.Hash32
	copy(h[:], p.Hash)
	return chain.Point{Slot: p.Slot, Hash: h}
}

func fromTip(t gchainsync.Tip) chain.Tip {
	return chain.Tip{Point: fromPoint(t.Point), BlockNo: t.BlockNumber}
}

// onRollForward returns the connection's block callback: it forwards the
// block to the actor and waits until the actor took it.
func (f *follower) onRollForward(sess *session) gchainsync.RollForwardRawFunc {
	return func(_ gchainsync.CallbackContext, blockType uint, raw []byte, tip gchainsync.Tip) error {
		return f.forward(&chainMsg{sess: sess, blockType: blockType, raw: raw, tip: tip})
	}
}

// onRollBackward returns the connection's rollback callback, which
// forwards like onRollForward.
func (f *follower) onRollBackward(sess *session) gchainsync.RollBackwardFunc {
	return func(_ gchainsync.CallbackContext, point pcommon.Point, tip gchainsync.Tip) error {
		return f.forward(&chainMsg{sess: sess, rollback: true, point: point, tip: tip})
	}
}

// forward hands m to the actor and returns its answer: nil to go on, or
// the error that ends the connection's sync.
func (f *follower) forward(m *chainMsg) error {
	if f.activeGen.Load() != m.sess.gen {
		return errStale
	}
	m.reply = make(chan error, 1)
	f.system.Root.Send(f.self, m)
	select {
	case err := <-m.reply:
		return err
	case <-m.sess.ctx.Done():
		return errStale
	}
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
