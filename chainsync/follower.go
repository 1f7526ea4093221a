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

// Restored is the state the follower resumes from: what the history store
// committed last.
type Restored struct {
	// Breadcrumbs are recent headers to intersect with, newest first; empty
	// when nothing was followed yet.
	Breadcrumbs []chain.BlockHeader
	// UTxOs is the tracked output set as of the newest breadcrumb, Recent
	// the UTxO changes of the blocks before it that a rollback may undo
	// (oldest first), and Horizon the newest block whose changes are gone.
	UTxOs   []classify.TrackedUTxO
	Recent  []classify.UTxOChanges
	Horizon chain.BlockHeader
}

// Checkpoints gives the follower the state to resume from.
type Checkpoints interface {
	Restore(ctx context.Context) (*Restored, error)
}

// ErrNoIntersection is reported when none of the stored points is on the
// node's chain. Either the node is behind (it is syncing: the follower keeps
// trying), or the stored history is on a fork deeper than the points kept;
// following again is then the operator's decision (`marlowe-follower reset`),
// never taken silently.
var ErrNoIntersection = errors.New("no intersection with the node's chain")

// errStale stops callbacks of a connection that has been replaced.
var errStale = errors.New("connection replaced")

// Follower is the chain-sync actor. Create it with NewFollower and spawn it
// with Props; it starts connecting when started and stops cleanly when
// poisoned.
type Follower struct {
	cfg        Config
	log        *zap.Logger
	checkpoint Checkpoints
	sink       Sink
	progress   *Progress

	// Touched by the connection's callbacks (one goroutine at a time) and
	// by the actor: guarded by mu.
	mu         sync.Mutex
	classifier *classify.Classifier
	crumbs     *chain.Breadcrumbs
	restored   bool

	activeGen atomic.Uint64 // generation of the connection allowed to deliver

	// Actor state, only touched in Receive.
	system   *actor.ActorSystem
	self     *actor.PID
	gen      uint64
	attempts int
	conn     *ouroboros.Connection
	cancel   context.CancelFunc
	stopping bool
	failed   bool
}

// NewFollower returns a follower. classifier may carry options (a
// DecodeAll classifier for checks); progress is updated as it goes.
func NewFollower(cfg Config, logger *zap.Logger, checkpoint Checkpoints, classifier *classify.Classifier, sink Sink, progress *Progress) (*Follower, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = &Progress{}
	}
	return &Follower{
		cfg: cfg, log: logger.Named("chainsync"), checkpoint: checkpoint, sink: sink, progress: progress,
		classifier: classifier, crumbs: chain.NewBreadcrumbs(nil),
	}, nil
}

// Props returns the actor's props.
func (f *Follower) Props() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return f })
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
	followFailed struct{ err error }
)

// Receive handles the actor's messages.
func (f *Follower) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
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
			go f.connect(msg.gen)
		}
	case *connectedMsg:
		if msg.gen != f.gen || f.stopping {
			msg.cancel()
			_ = msg.conn.Close()
			return
		}
		f.conn, f.cancel = msg.conn, msg.cancel
		if f.attempts > 0 {
			f.log.Info("reconnected to the node", zap.Int("attempts", f.attempts))
		}
		f.attempts = 0
		f.progress.setConnected(true, "")
	case *connectFailed:
		f.retry(msg.gen, "connecting to the node failed", msg.err)
	case *connectionLost:
		f.retry(msg.gen, "lost the node connection", msg.err)
	case *followFailed:
		f.failed = true
		f.closeConn()
		f.log.Error("following stopped: operator action needed", zap.Error(msg.err))
		f.progress.setConnected(false, msg.err.Error())
	}
}

func (f *Follower) closeConn() {
	f.activeGen.Store(0)
	if f.cancel != nil {
		f.cancel()
		f.cancel = nil
	}
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// retry closes the current connection and schedules the next attempt after
// a capped exponential backoff with jitter.
func (f *Follower) retry(gen uint64, what string, err error) {
	if gen != f.gen || f.stopping || f.failed {
		return
	}
	f.closeConn()
	f.gen++
	f.attempts++
	shift := min(f.attempts-1, 20)
	wait := min(f.cfg.MinBackoff<<shift, f.cfg.MaxBackoff)
	wait = time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
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

// connect dials the node, intersects and starts syncing. It runs outside
// the actor and reports back with a message.
func (f *Follower) connect(gen uint64) {
	send := func(m any) { f.system.Root.Send(f.self, m) }
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.restore(ctx); err != nil {
		cancel()
		send(&connectFailed{gen: gen, err: fmt.Errorf("restoring the checkpoint: %w", err)})
		return
	}
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
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(rec),
		ouroboros.WithNetworkMagic(f.cfg.NetworkMagic),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithErrorChan(errs),
		ouroboros.WithChainSyncConfig(gchainsync.NewConfig(
			gchainsync.WithRollForwardRawFunc(f.onRollForward(ctx, gen)),
			gchainsync.WithRollBackwardFunc(f.onRollBackward(ctx, gen)),
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
	go func() {
		reported := false
		for err := range errs {
			if !reported && err != nil {
				reported = true
				send(&connectionLost{gen: gen, err: err})
			}
		}
		if !reported {
			send(&connectionLost{gen: gen, err: errors.New("the node closed the connection")})
		}
	}()
	fail := func(err error) {
		cancel()
		_ = conn.Close()
		send(&connectFailed{gen: gen, err: err})
	}
	points, err := f.intersectPoints(conn)
	if err != nil {
		fail(err)
		return
	}
	f.activeGen.Store(gen)
	err = conn.ChainSync().Client.Sync(points)
	if errors.Is(err, gchainsync.ErrIntersectNotFound) && f.startsAtTip() {
		// gouroboros v0.194.0 can hand Sync the answer of the tip query
		// just before it on the same connection; asking again gets Sync's own.
		err = conn.ChainSync().Client.Sync(points)
	}
	if err != nil {
		f.activeGen.CompareAndSwap(gen, 0)
		if errors.Is(err, gchainsync.ErrIntersectNotFound) {
			err = fmt.Errorf("%w: none of %d stored points (newest %s) is on it; if the node is still syncing this resolves "+
				"itself, otherwise the stored history is on an abandoned fork: `marlowe-follower reset --yes` and restart to follow again",
				ErrNoIntersection, len(points), describe(points))
		}
		fail(err)
		return
	}
	send(&connectedMsg{gen: gen, conn: conn, cancel: cancel})
}

// startsAtTip reports whether the next connection starts at the node's tip.
func (f *Follower) startsAtTip() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.crumbs.Tip()
	return !ok && f.cfg.Start.Kind == StartTip
}

func describe(points []pcommon.Point) string {
	if len(points) == 0 {
		return "origin"
	}
	p := points[0]
	return fmt.Sprintf("slot %d", p.Slot)
}

// restore loads the checkpoint once, before the first connection.
func (f *Follower) restore(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.restored || f.checkpoint == nil {
		f.restored = true
		return nil
	}
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
func (f *Follower) intersectPoints(conn *ouroboros.Connection) ([]pcommon.Point, error) {
	f.mu.Lock()
	crumbs := f.crumbs.Points()
	f.mu.Unlock()
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

func (f *Follower) onRollForward(ctx context.Context, gen uint64) gchainsync.RollForwardRawFunc {
	return func(_ gchainsync.CallbackContext, blockType uint, raw []byte, tip gchainsync.Tip) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.activeGen.Load() != gen {
			return errStale
		}
		t := fromTip(tip)
		f.progress.setTip(t)
		ev, err := f.classifier.RollForward(block.Type(blockType), raw, t)
		if err != nil {
			f.log.Error("undecodable block", zap.Uint("type", blockType), zap.Int("bytes", len(raw)), zap.Error(err))
			f.progress.count(classifyStatsDelta{failures: 1})
			return f.sink.Deliver(ctx, &classify.Undecodable{Type: block.Type(blockType), Size: len(raw), Tip: t, Reason: err.Error()})
		}
		for _, fl := range ev.Failures {
			f.log.Error("undecodable transaction data", zap.Uint64("slot", ev.Header.Slot), zap.Stringer("hash", ev.Header.Hash),
				zap.Int("tx", fl.TxIndex), zap.String("reason", fl.Reason))
		}
		if err := f.sink.Deliver(ctx, ev); err != nil {
			// Downstream never got the block: undo it so that the
			// classifier agrees with what was delivered.
			prev, _ := f.crumbs.Tip()
			if _, uerr := f.classifier.RollBackward(prev.Point(), t); uerr != nil {
				f.log.Error("undoing an undelivered block", zap.Error(uerr))
			}
			return err
		}
		f.crumbs.Add(ev.Header)
		f.progress.forward(ev, len(raw))
		return nil
	}
}

func (f *Follower) onRollBackward(ctx context.Context, gen uint64) gchainsync.RollBackwardFunc {
	return func(_ gchainsync.CallbackContext, point pcommon.Point, tip gchainsync.Tip) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.activeGen.Load() != gen {
			return errStale
		}
		t := fromTip(tip)
		f.progress.setTip(t)
		p := fromPoint(point)
		cur, ok := f.crumbs.Tip()
		if !ok || cur.Point() == p {
			// Nothing delivered yet, or the node confirms the intersection:
			// nothing to undo.
			return nil
		}
		ev, err := f.classifier.RollBackward(p, t)
		if err != nil {
			err = fmt.Errorf("%w; following stops: `marlowe-follower reset --yes` and restart to follow again", err)
			f.system.Root.Send(f.self, &followFailed{err: err})
			return err
		}
		if err := f.sink.Deliver(ctx, ev); err != nil {
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
}
