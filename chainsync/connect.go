package chainsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	gchainsync "github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

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
// the actor and reports back with a message: connectedMsg, or why the
// connection does not follow.
func (f *follower) connect(gen uint64, st connectState) {
	send := func(m any) { f.system.Root.Send(f.self, m) }
	ctx, cancel := context.WithCancel(context.Background())
	sess := &session{gen: gen, ctx: ctx, verdict: make(chan *NodeBehindError, 1), lost: make(chan struct{})}
	conn, err := f.dial(sess)
	if err != nil {
		cancel()
		send(&connectFailed{gen: gen, err: err})
		return
	}
	c := &connecting{f: f, gen: gen, conn: conn, sess: sess, cancel: cancel, send: send}
	c.watch()
	points, err := f.intersectPoints(conn, st)
	if err != nil {
		c.fail(err)
		return
	}
	if !c.sync(points, st) || !c.confirmed() {
		return
	}
	send(&connectedMsg{gen: gen, conn: conn, cancel: cancel})
}

// dial connects to the node's socket and runs the handshake, bounded in
// time; its bytes are kept to read a refusal from.
func (f *follower) dial(sess *session) (*ouroboros.Connection, error) {
	nc, err := net.DialTimeout("unix", f.cfg.SocketPath, 10*time.Second)
	if err != nil {
		return nil, err
	}
	rec := newRecordingConn(nc)
	var timedOut atomic.Bool
	timer := time.AfterFunc(handshakeTimeout, func() {
		timedOut.Store(true)
		_ = nc.Close()
	})
	sess.errs = make(chan error, 16)
	conn, err := ouroboros.NewConnection(
		ouroboros.WithConnection(rec),
		ouroboros.WithNetworkMagic(f.cfg.NetworkMagic),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithErrorChan(sess.errs),
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
		_ = nc.Close()
		if timedOut.Load() {
			err = errHandshakeTimeout
		}
		return nil, f.diagnoseHandshake(err, recorded)
	}
	return conn, nil
}

// connecting is a connection between its handshake and the node's first
// answer after the intersection.
type connecting struct {
	f      *follower
	gen    uint64
	conn   *ouroboros.Connection
	sess   *session
	cancel context.CancelFunc
	send   func(any)
}

// watch reports the connection's first error and keeps draining. The
// library closes the channel when the connection ends, sometimes without
// an error (a peer closing while every protocol is idle): that is a loss
// too. A connection closed on purpose (the node is behind, or diverged) is
// not a loss: sess.quiet keeps its errors from being reported.
func (c *connecting) watch() {
	sess, gen, send := c.sess, c.gen, c.send
	go func() {
		reported := false
		report := func(err error) {
			reported = true
			close(sess.lost)
			if !sess.quiet.Load() {
				send(&connectionLost{gen: gen, err: err})
			}
		}
		for err := range sess.errs {
			if !reported && err != nil {
				report(err)
			}
		}
		if !reported {
			report(errors.New("the node closed the connection"))
		}
	}()
}

// fail closes the connection and reports why it does not follow.
func (c *connecting) fail(err error) {
	c.cancel()
	_ = c.conn.Close()
	c.send(&connectFailed{gen: c.gen, err: err})
}

// quit closes the connection on purpose and tells the actor m.
func (c *connecting) quit(m any) {
	c.sess.quiet.Store(true)
	c.cancel()
	_ = c.conn.Close()
	c.send(m)
}

// sync asks the node to follow from points; false when it does not (the
// actor has been told why).
func (c *connecting) sync(points []pcommon.Point, st connectState) bool {
	f, gen, client := c.f, c.gen, c.conn.ChainSync().Client
	f.activeGen.Store(gen)
	err := client.Sync(points)
	if errors.Is(err, gchainsync.ErrIntersectNotFound) && st.startsAtTip {
		// gouroboros v0.194.0 can hand Sync the answer of the tip query
		// just before it on the same connection; asking again gets Sync's own.
		err = client.Sync(points)
	}
	if err == nil {
		return true
	}
	f.activeGen.CompareAndSwap(gen, 0)
	if !errors.Is(err, gchainsync.ErrIntersectNotFound) {
		c.fail(err)
		return false
	}
	ours, stored := st.newest, st.stored
	if !stored {
		// A configured start point the node does not have (yet).
		c.fail(fmt.Errorf("%w: the start point %s is not on it (node.start)", ErrNoIntersection, describe(points)))
		return false
	}
	// Sync has had its answer: a tip query on this connection now gets
	// its own.
	tip, err := client.GetCurrentTip()
	if err != nil {
		c.fail(fmt.Errorf("asking the node for its tip after finding no intersection: %w", err))
		return false
	}
	t := fromTip(*tip)
	f.progress.setTip(t)
	if t.BlockNo < ours.BlockNo {
		c.quit(&nodeBehind{gen: gen, err: &NodeBehindError{NodeTip: t, Point: ours}})
		return false
	}
	c.quit(&diverged{gen: gen, err: &DivergedError{NodeTip: t, Point: ours, Points: points}})
	return false
}

// confirmed waits for the node's first answer after the intersection,
// which confirms it and carries the node's tip: only then is the
// connection following (see session). False when it is not (the actor
// has been told why, or hears of the lost connection).
func (c *connecting) confirmed() bool {
	select {
	case behind := <-c.sess.verdict:
		if behind != nil {
			c.quit(&nodeBehind{gen: c.gen, err: behind})
			return false
		}
		return true
	case <-c.sess.lost:
		select {
		case behind := <-c.sess.verdict:
			if behind != nil {
				c.quit(&nodeBehind{gen: c.gen, err: behind})
				return false
			}
		default:
		}
		c.cancel()
		_ = c.conn.Close()
		return false // reported as a lost connection
	case <-time.After(confirmTimeout):
		c.fail(errors.New("the node did not answer after the intersection"))
		return false
	}
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
	// errs receives the connection's errors (closed when it ends).
	errs chan error
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
