package devnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/muxer"
	"github.com/blinklabs-io/gouroboros/protocol"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// ErrNodeClosed is returned by Start and Serve on a node that was closed.
var ErrNodeClosed = errors.New("devnet node: closed")

// libraryStopTimeout bounds how long a connection waits for the library's
// mini-protocol goroutines after the connection is gone.
const libraryStopTimeout = 10 * time.Second

// Config configures a Node.
type Config struct {
	// SocketPath is the Unix socket to listen on. A stale socket file is
	// removed; any other existing file is refused.
	SocketPath string
	// NetworkMagic is the network magic clients must propose in the
	// handshake; it must not be 0.
	NetworkMagic uint32
	// Store is the chain to serve.
	Store *ChainStore
	// Source, when set, is served instead of Store (a Journal); Store may
	// then be nil.
	Source Source
	// Logger receives connection events; nil means no logging.
	Logger *zap.Logger
}

// Stats are a node's counters since it was made.
type Stats struct {
	Accepted      uint64 // connections accepted on the socket
	Served        uint64 // connections that completed the handshake
	Active        int    // connections open now
	BlocksSent    uint64 // RollForward messages sent
	RollBacksSent uint64 // RollBackward messages sent, intersections included
}

// Node is the devnet node: a node-to-client chain-sync server on a Unix
// socket that serves a ChainStore the way cardano-node serves its chain to
// local clients.
//
// Client-visible behaviour, per connection (each has its own cursor):
//   - The handshake accepts the node-to-client versions gouroboros knows
//     (v9 to v21, the highest common one wins) with the configured magic.
//     Like cardano-node it answers a handshake query with its versions and
//     magic, and refuses another magic, no common version or undecodable
//     version data with a Refuse message before closing.
//   - FindIntersect answers IntersectFound with the first of the client's
//     points that is on the chain (the origin always is), else
//     IntersectNotFound; an empty list gets IntersectNotFound, which is how
//     clients ask for the tip.
//   - The first RequestNext after an intersection answers RollBackward to
//     the intersection point, then each RequestNext answers RollForward with
//     the next block: its block type and bare era block, which the library
//     wraps as #6.24(bytes [type, block]).
//   - At the tip RequestNext answers AwaitReply; the RollForward (or
//     RollBackward) follows as soon as the chain changes.
//   - When a rollback of the store drops blocks a client was sent, its next
//     message is RollBackward to the fork point, then the new blocks.
//   - Every message carries the store's tip at the time it is sent.
//   - A client idle at the tip is never timed out.
//
// The other node-to-client mini-protocols the library starts
// (local-tx-submission, local-state-query, local-tx-monitor) are left
// unconfigured: clients that never use them, such as the follower, are
// unaffected, but a client that sends a message on one of them (for example
// `cardano-cli query tip`) gets disconnected with a protocol error, logged
// at warn level.
type Node struct {
	cfg Config
	log *zap.Logger

	mu      sync.Mutex
	ln      net.Listener
	started bool
	conns   map[*clientConn]struct{}
	nextID  uint64
	closing chan struct{} // closed by shutdown, under mu
	wg      sync.WaitGroup

	accepted, served, blocksSent, rollBacks atomic.Uint64
}

// New checks cfg and returns a node that is not listening yet.
func New(cfg Config) (*Node, error) {
	switch {
	case cfg.SocketPath == "":
		return nil, errors.New("devnet node: no socket path")
	case cfg.NetworkMagic == 0:
		return nil, errors.New("devnet node: network magic 0")
	case cfg.Store == nil && cfg.Source == nil:
		return nil, errors.New("devnet node: no chain store")
	}
	if cfg.Source == nil {
		cfg.Source = cfg.Store
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Node{
		cfg:     cfg,
		log:     log.With(zap.String("socket", cfg.SocketPath)),
		conns:   make(map[*clientConn]struct{}),
		closing: make(chan struct{}),
	}, nil
}

// SocketPath returns the socket the node listens on.
func (n *Node) SocketPath() string { return n.cfg.SocketPath }

// Store returns the chain the node serves.
func (n *Node) Store() *ChainStore { return n.cfg.Store }

// Start listens on the socket and serves clients in the background until
// Close is called or ctx is done. It returns once the socket accepts
// connections.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.closing:
		return ErrNodeClosed
	default:
	}
	if n.started {
		return errors.New("devnet node: already started")
	}
	if err := removeStaleSocket(n.cfg.SocketPath); err != nil {
		return err
	}
	ln, err := net.Listen("unix", n.cfg.SocketPath)
	if err != nil {
		return fmt.Errorf("devnet node: %w", err)
	}
	n.ln, n.started = ln, true
	n.wg.Add(2)
	go n.acceptLoop(ln)
	go func() {
		defer n.wg.Done()
		select {
		case <-ctx.Done():
			n.shutdown()
		case <-n.closing:
		}
	}()
	tip := n.cfg.Source.Tip()
	n.log.Info("devnet node listening", zap.Uint32("magic", n.cfg.NetworkMagic),
		zap.Stringer("tip", tip.Point), zap.Uint64("tipBlockNo", tip.BlockNo))
	return nil
}

// Serve is Start followed by waiting until the node has stopped, after
// Close or when ctx is done. It returns nil once every connection is gone.
func (n *Node) Serve(ctx context.Context) error {
	if err := n.Start(ctx); err != nil {
		return err
	}
	<-n.closing
	n.wg.Wait()
	return nil
}

// removeStaleSocket removes a socket file nobody listens on and refuses any
// other existing file.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("devnet node: %w", err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("devnet node: %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("devnet node: %s: another process is listening", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("devnet node: removing stale socket: %w", err)
	}
	return nil
}

// Close stops accepting, drops every connection and waits until all of the
// node's goroutines have exited. The socket file is removed. It is
// idempotent.
func (n *Node) Close() error {
	n.shutdown()
	n.wg.Wait()
	return nil
}

// shutdown stops the listener and drops the connections without waiting.
func (n *Node) shutdown() {
	n.mu.Lock()
	select {
	case <-n.closing:
		n.mu.Unlock()
		return
	default:
	}
	close(n.closing)
	ln, conns := n.ln, n.snapshot()
	n.mu.Unlock()
	n.log.Info("devnet node stopping", zap.Int("connections", len(conns)))
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		c.drop()
	}
}

// DisconnectAll drops every current client connection, as if the node had
// restarted, and keeps listening. It returns the number of connections
// dropped. Clients see their connection closed and may reconnect.
func (n *Node) DisconnectAll() int {
	n.mu.Lock()
	conns := n.snapshot()
	n.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
	n.log.Info("devnet node dropped all connections", zap.Int("connections", len(conns)))
	return len(conns)
}

func (n *Node) snapshot() []*clientConn {
	conns := make([]*clientConn, 0, len(n.conns))
	for c := range n.conns {
		conns = append(conns, c)
	}
	return conns
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	active := len(n.conns)
	n.mu.Unlock()
	return Stats{
		Accepted:      n.accepted.Load(),
		Served:        n.served.Load(),
		Active:        active,
		BlocksSent:    n.blocksSent.Load(),
		RollBacksSent: n.rollBacks.Load(),
	}
}

func (n *Node) acceptLoop(ln net.Listener) {
	defer n.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-n.closing:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			n.log.Warn("devnet node: accept failed", zap.Error(err), zap.Duration("retryIn", delay))
			select {
			case <-time.After(delay):
			case <-n.closing:
				return
			}
			continue
		}
		delay = 0
		n.accepted.Add(1)
		n.mu.Lock()
		select {
		case <-n.closing:
			n.mu.Unlock()
			_ = nc.Close()
			return
		default:
		}
		n.nextID++
		c := &clientConn{n: n, id: n.nextID, nc: nc, cur: n.cfg.Source.NewReader(), since: time.Now()}
		c.log = n.log.With(zap.Uint64("conn", c.id))
		n.conns[c] = struct{}{}
		n.wg.Add(1)
		n.mu.Unlock()
		go c.serve()
	}
}

// noDeadlineConn hides read deadlines from the library's muxer, which sets a
// 120-second deadline on every read: cardano-node never drops a local client
// that waits at the tip, and neither does the devnet node.
type noDeadlineConn struct{ net.Conn }

// SetReadDeadline does nothing.
func (noDeadlineConn) SetReadDeadline(time.Time) error { return nil }

// clientConn is one client connection with its chain-sync cursor.
type clientConn struct {
	n     *Node
	id    uint64
	nc    net.Conn
	cur   Reader
	log   *zap.Logger
	since time.Time

	mu      sync.Mutex
	oc      *ouroboros.Connection
	dropped bool

	waiters    sync.WaitGroup // goroutines answering after AwaitReply
	sent, back atomic.Uint64
}

// drop closes the connection.
func (c *clientConn) drop() {
	c.mu.Lock()
	c.dropped = true
	oc := c.oc
	c.mu.Unlock()
	if oc != nil {
		_ = oc.Close()
	} else {
		_ = c.nc.Close() // still in the handshake
	}
}

func (c *clientConn) isDropped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped
}

func (c *clientConn) serve() {
	n := c.n
	defer n.wg.Done()
	defer func() {
		n.mu.Lock()
		delete(n.conns, c)
		n.mu.Unlock()
	}()
	defer c.cur.Close()
	defer func() { _ = c.nc.Close() }()

	c.log.Debug("client connecting")
	conn, refused, err := screenHandshake(c.nc, n.cfg.NetworkMagic)
	if conn == nil {
		switch {
		case refused != "":
			c.log.Info("client handshake failed", zap.String("refused", refused), zap.Error(err))
		case c.isDropped() || isDisconnect(err):
			c.log.Debug("client went away during the handshake", zap.Error(err))
		default:
			c.log.Info("client handshake failed", zap.Error(err))
		}
		return
	}
	oc, err := ouroboros.NewConnection(
		ouroboros.WithConnection(noDeadlineConn{conn}),
		ouroboros.WithNetworkMagic(n.cfg.NetworkMagic),
		ouroboros.WithServer(true),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithChainSyncConfig(chainsync.NewConfig(
			chainsync.WithFindIntersectFunc(c.findIntersect),
			chainsync.WithRequestNextFunc(c.requestNext),
		)),
	)
	if err != nil {
		if c.isDropped() || isDisconnect(err) {
			c.log.Debug("client went away during the handshake", zap.Error(err))
		} else {
			c.log.Info("client handshake failed", zap.Error(err))
		}
		return
	}
	c.mu.Lock()
	c.oc = oc
	dropped := c.dropped
	c.mu.Unlock()
	if dropped {
		_ = oc.Close()
	}
	n.served.Add(1)
	version, _ := oc.ProtocolVersion()
	c.log.Info("client connected", zap.Uint16("ntcVersion", version&^protocol.ProtocolVersionNtCOffset))

	reason := "client closed the connection"
	for err := range oc.ErrorChan() {
		switch {
		case c.isDropped():
			c.log.Debug("connection dropped by the node", zap.Error(err))
			reason = "dropped by the node"
		case isDisconnect(err):
			c.log.Debug("client went away", zap.Error(err))
		default:
			c.log.Warn("client connection failed", zap.Error(err))
			reason = err.Error()
		}
	}
	if c.isDropped() {
		reason = "dropped by the node"
	}
	c.waitLibrary(oc)
	c.waiters.Wait()
	c.log.Info("client disconnected", zap.String("reason", reason),
		zap.Duration("after", time.Since(c.since)),
		zap.Uint64("blocksSent", c.sent.Load()), zap.Uint64("rollBacksSent", c.back.Load()))
}

// waitLibrary waits until the library's goroutines for the connection have
// exited: the muxer's and the server mini-protocols'.
func (c *clientConn) waitLibrary(oc *ouroboros.Connection) {
	var done []<-chan struct{}
	if cs := oc.ChainSync(); cs != nil && cs.Server != nil {
		done = append(done, cs.Server.ProtocolInstance().DoneChan())
	}
	if p := oc.LocalTxSubmission(); p != nil && p.Server != nil {
		done = append(done, p.Server.DoneChan())
	}
	if p := oc.LocalStateQuery(); p != nil && p.Server != nil {
		done = append(done, p.Server.DoneChan())
	}
	if p := oc.LocalTxMonitor(); p != nil && p.Server != nil {
		done = append(done, p.Server.DoneChan())
	}
	muxerDone := make(chan struct{})
	go func() {
		// Closed by the muxer once its goroutines have exited; nobody
		// else reads it after the connection's error channel closed.
		for range oc.Muxer().ErrorChan() {
		}
		close(muxerDone)
	}()
	done = append(done, muxerDone)
	timeout := time.NewTimer(libraryStopTimeout)
	defer timeout.Stop()
	for _, ch := range done {
		select {
		case <-ch:
		case <-timeout.C:
			c.log.Warn("library goroutines did not stop in time")
			return
		}
	}
}

// isDisconnect reports whether err only says that the peer went away.
func isDisconnect(err error) bool {
	var closed *muxer.ConnectionClosedError
	return errors.As(err, &closed) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, protocol.ErrProtocolShuttingDown)
}

func (c *clientConn) findIntersect(_ chainsync.CallbackContext, pts []pcommon.Point) (pcommon.Point, chainsync.Tip, error) {
	points := make([]chain.Point, 0, len(pts))
	for _, p := range pts {
		if cp, ok := fromProtoPoint(p); ok {
			points = append(points, cp)
		}
	}
	p, tip, ok := c.cur.Intersect(points)
	if !ok {
		c.log.Debug("no intersection", zap.Int("points", len(pts)))
		return pcommon.Point{}, toProtoTip(tip), chainsync.ErrIntersectNotFound
	}
	c.log.Debug("intersection found", zap.Stringer("point", p))
	return toProtoPoint(p), toProtoTip(tip), nil
}

func (c *clientConn) requestNext(ctx chainsync.CallbackContext) error {
	step, wait := c.cur.Next()
	if step.Kind != StepAwait {
		return c.send(ctx.Server, step)
	}
	if err := ctx.Server.AwaitReply(); err != nil {
		return err
	}
	// The client now waits for our answer and sends nothing on chain-sync
	// until it comes, so this goroutine is the only one answering.
	done := ctx.Server.ProtocolInstance().DoneChan()
	c.waiters.Add(1)
	go c.answerLater(ctx.Server, wait, done)
	return nil
}

// answerLater sends the next step once the chain changes, or returns when
// the connection or the node goes away.
func (c *clientConn) answerLater(srv *chainsync.Server, wait, done <-chan struct{}) {
	defer c.waiters.Done()
	for {
		select {
		case <-wait:
		case <-done:
			return
		case <-c.n.closing:
			return
		}
		step, next := c.cur.Next()
		if step.Kind == StepAwait {
			wait = next
			continue
		}
		if err := c.send(srv, step); err != nil {
			c.log.Debug("could not answer after AwaitReply", zap.Error(err))
		}
		return
	}
}

func (c *clientConn) send(srv *chainsync.Server, step Step) error {
	tip := toProtoTip(step.Tip)
	if step.Kind == StepRollBackward {
		if err := srv.RollBackward(toProtoPoint(step.Point), tip); err != nil {
			return err
		}
		c.back.Add(1)
		c.n.rollBacks.Add(1)
		return nil
	}
	if err := srv.RollForward(uint(step.Block.Type), step.Block.Raw, tip); err != nil {
		return err
	}
	c.sent.Add(1)
	c.n.blocksSent.Add(1)
	return nil
}

// fromProtoPoint converts a client's point; false for a malformed one,
// which cannot be on the chain.
func fromProtoPoint(p pcommon.Point) (chain.Point, bool) {
	if len(p.Hash) == 0 {
		return chain.Origin, p.Slot == 0
	}
	if len(p.Hash) != len(chain.Hash32{}) {
		return chain.Point{}, false
	}
	cp := chain.Point{Slot: p.Slot}
	copy(cp.Hash[:], p.Hash)
	return cp, !cp.IsOrigin()
}

func toProtoPoint(p chain.Point) pcommon.Point {
	if p.IsOrigin() {
		return pcommon.NewPointOrigin() // encoded as []
	}
	return pcommon.NewPoint(p.Slot, append([]byte(nil), p.Hash[:]...))
}

func toProtoTip(t chain.Tip) chainsync.Tip {
	return chainsync.Tip{Point: toProtoPoint(t.Point), BlockNumber: t.BlockNo}
}
