package devnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

const testMagic = 42

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNodeSyncFromOrigin(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 300, 0)
	n, logs := startNode(t, s)
	// GetCurrentTip on its own connection: in gouroboros v0.194.0 a Sync
	// right after it on the same connection can receive the tip query's
	// IntersectNotFound (the client hands the tip over before it takes the
	// pending intersect request off its queue).
	q := newClient(t, n.SocketPath(), s, 0, 0)
	tip, err := q.conn.ChainSync().Client.GetCurrentTip()
	if err != nil || clientTip(*tip) != s.Tip() {
		t.Fatalf("GetCurrentTip = %+v, %v", tip, err)
	}
	q.close()
	c := syncedClient(t, n, s)
	c.check(s)
	_, events := c.snapshot()
	if events[0].forward || !events[0].point.IsOrigin() || len(events) != 301 {
		t.Fatalf("first message forward=%v to %s; %d messages", events[0].forward, events[0].point, len(events))
	}
	for i, e := range events {
		if e.tip != s.Tip() {
			t.Fatalf("message %d carried tip %+v", i, e.tip)
		}
	}
	st := n.Stats()
	if st.Accepted != 2 || st.Served != 2 || st.BlocksSent != 300 || st.RollBacksSent != 1 {
		t.Fatalf("stats %+v", st)
	}
	c.close()
	waitFor(t, "the node to see the clients go", func() bool { return n.Stats().Active == 0 })
	if logs.FilterMessage("client connected").Len() != 2 || logs.FilterMessage("client disconnected").Len() != 2 {
		t.Fatal("connection and disconnection not logged")
	}
	if l := logs.FilterLevelExact(zapcore.WarnLevel); l.Len() > 0 {
		t.Fatalf("a client going away logged a warning: %v", l.All()[0].Message)
	}
}

func TestNodeIntersect(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 50, 0)
	n, _ := startNode(t, s)
	c := newClient(t, n.SocketPath(), s, 21, 0)
	unknown := testBlock(7, 3, 9).Header.Point()
	if err := c.sync(unknown, blocks[20].Header.Point(), blocks[10].Header.Point()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sync to the tip", func() bool { return c.synced(s) })
	c.check(s)
	_, events := c.snapshot()
	if events[0].forward || events[0].point != blocks[20].Header.Point() || len(events) != 30 {
		t.Fatalf("first message forward=%v to %s; %d messages", events[0].forward, events[0].point, len(events))
	}
}

func TestNodeNoIntersection(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 5, 0)
	n, _ := startNode(t, s)
	c := newClient(t, n.SocketPath(), s, 0, 0)
	err := c.sync(testBlock(7, 3, 9).Header.Point(), chain.Point{Slot: 3})
	if !errors.Is(err, chainsync.ErrIntersectNotFound) {
		t.Fatalf("sync without intersection: %v", err)
	}
	// The connection stays usable.
	if err := c.sync(chain.Origin); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sync to the tip", func() bool { return c.synced(s) })
}

func TestNodeFollowsTip(t *testing.T) {
	s := NewChainStore()
	n, _ := startNode(t, s)
	c := newClient(t, n.SocketPath(), s, 0, 0)
	if err := c.sync(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the origin rollback", func() bool { return len(c.rollbacks()) == 1 })
	for i := range 20 {
		extend(t, s, 1+i%3, 0)
		waitFor(t, "the new blocks", func() bool { return c.synced(s) })
		if i%3 == 0 {
			// A single new block is sent as the tip.
			_, events := c.snapshot()
			if e := events[len(events)-1]; e.tip.Point != e.header.Point() {
				t.Fatalf("block %d sent at the tip carried tip %d", e.header.BlockNo, e.tip.BlockNo)
			}
		}
	}
	c.check(s)
}

// TestNodeRollbackAtTip forks the chain under a client waiting at the tip.
func TestNodeRollbackAtTip(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 20, 0)
	n, _ := startNode(t, s)
	c := syncedClient(t, n, s)
	for depth := 1; depth <= 6; depth++ {
		fork, err := s.RollBackN(depth)
		if err != nil {
			t.Fatal(err)
		}
		extend(t, s, depth+1, uint8(depth))
		waitFor(t, fmt.Sprintf("the fork of depth %d", depth), func() bool { return c.synced(s) })
		rbs := c.rollbacks()
		if got := rbs[len(rbs)-1]; got != fork || len(rbs) != depth+1 {
			t.Fatalf("depth %d: last of %d rollbacks to %s, want %s", depth, len(rbs), got, fork)
		}
		c.check(s)
	}
}

// TestNodeRollbackBehind forks the chain while a client is still syncing:
// below what it was sent (it must roll back) and above (it must not).
func TestNodeRollbackBehind(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 300, 0)
	n, _ := startNode(t, s)
	// forkWhileHeld syncs a client from origin, holds it at 20 blocks, forks
	// the chain at the point (grow blocks of fork seed after it) and lets the
	// client sync to the fork.
	forkWhileHeld := func(who, fork string, at chain.Point, grow int, seed uint8) *testClient {
		c := newClient(t, n.SocketPath(), s, 0, 10)
		c.holdAt = 20
		if err := c.sync(chain.Origin); err != nil {
			t.Fatal(err)
		}
		waitFor(t, who+" to hold", func() bool { v, _ := c.snapshot(); return len(v) == 20 })
		if err := s.RollBack(at); err != nil {
			t.Fatal(err)
		}
		extend(t, s, grow, seed)
		close(c.gate)
		waitFor(t, "sync to "+fork, func() bool { return c.synced(s) })
		return c
	}
	// Above the client: with 10 requests in flight it was sent at most ~31.
	c := forkWhileHeld("the client", "the fork", blocks[249].Header.Point(), 60, 1)
	if rbs := c.rollbacks(); len(rbs) != 1 {
		t.Fatalf("rollback above the client's position sent %d rollbacks: %v", len(rbs), rbs)
	}
	c.check(s)

	// Below the client: it must roll back to the fork point.
	c2 := forkWhileHeld("the second client", "the second fork", blocks[4].Header.Point(), 40, 2)
	rbs := c2.rollbacks()
	if len(rbs) != 2 || rbs[1] != blocks[4].Header.Point() {
		t.Fatalf("rollbacks %v, want origin and %s", rbs, blocks[4].Header.Point())
	}
	c2.check(s)
	waitFor(t, "the first client to follow", func() bool { return c.synced(s) })
	c.check(s)
}

func TestNodeThreeClients(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 100, 0)
	n, _ := startNode(t, s)
	clients := []*testClient{
		newClient(t, n.SocketPath(), s, 0, 0),
		newClient(t, n.SocketPath(), s, 51, 5),
		newClient(t, n.SocketPath(), s, 100, 0),
	}
	starts := []chain.Point{chain.Origin, blocks[50].Header.Point(), blocks[99].Header.Point()}
	for i, c := range clients {
		if err := c.sync(starts[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		extend(t, s, 2, uint8(i))
		if i%5 == 4 {
			if _, err := s.RollBackN(3); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, c := range clients {
		waitFor(t, fmt.Sprintf("client %d to sync", i), func() bool { return c.synced(s) })
		c.check(s)
		if rbs := c.rollbacks(); rbs[0] != starts[i] {
			t.Fatalf("client %d: first rollback to %s", i, rbs[0])
		}
	}
	if st := n.Stats(); st.Active != 3 || st.Served != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNodeDisconnectAllAndResume(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 40, 0)
	n, logs := startNode(t, s)
	c := syncedClient(t, n, s)
	if got := n.DisconnectAll(); got != 1 {
		t.Fatalf("dropped %d connections", got)
	}
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the client did not see its connection dropped")
	}
	waitFor(t, "the node to forget the client", func() bool { return n.Stats().Active == 0 })
	// The chain moves on while the client is away; it resumes from its
	// last points, newest first.
	extend(t, s, 10, 0)
	view, _ := c.snapshot()
	c2 := newClient(t, n.SocketPath(), s, len(view), 0)
	if err := c2.sync(view[len(view)-1].Point(), view[len(view)-2].Point()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resumed client to sync", func() bool { return c2.synced(s) })
	c2.check(s)
	if rbs := c2.rollbacks(); rbs[0] != view[len(view)-1].Point() {
		t.Fatalf("resumed at %s", rbs[0])
	}
	if st := n.Stats(); st.Served != 2 || st.Active != 1 || st.BlocksSent != 50 {
		t.Fatalf("stats %+v", st)
	}
	if logs.FilterMessage("client disconnected").FilterField(zap.String("reason", "dropped by the node")).Len() != 1 {
		t.Fatal("the dropped connection was not logged as dropped")
	}
}

func TestNodeCloseWithClients(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 10, 0)
	n, _ := startNode(t, s)
	var clients []*testClient
	for i := range 2 {
		c := newClient(t, n.SocketPath(), s, 0, 0)
		if err := c.sync(chain.Origin); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("client %d to sync", i), func() bool { return c.synced(s) })
		clients = append(clients, c)
	}
	// A client that never completes the handshake.
	raw, err := net.Dial("unix", n.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = raw.Close() }()
	waitFor(t, "three connections", func() bool { return n.Stats().Active == 3 })
	closed := make(chan error)
	go func() { closed <- n.Close() }()
	returnsNil(t, "Close", closed)
	for i, c := range clients {
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			t.Fatalf("client %d still connected", i)
		}
	}
	if _, err := os.Stat(n.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file left behind: %v", err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrNodeClosed) {
		t.Fatalf("start after close: %v", err)
	}
	if st := n.Stats(); st.Active != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestNodeUnsupportedMiniProtocol: a client that uses local-state-query is
// disconnected, which the node logs as a warning.
func TestNodeUnsupportedMiniProtocol(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 3, 0)
	n, logs := startNode(t, s)
	c := newClient(t, n.SocketPath(), s, 0, 0)
	acquired := make(chan error, 1)
	go func() { acquired <- c.conn.LocalStateQuery().Client.AcquireVolatileTip() }()
	select {
	case err := <-acquired:
		if err == nil {
			t.Fatal("local-state-query acquire succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("local-state-query acquire never returned")
	}
	waitFor(t, "the node to drop the client", func() bool { return n.Stats().Active == 0 })
	if logs.FilterMessage("client connection failed").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
		t.Fatal("the protocol error was not logged as a warning")
	}
}

func TestNodeWrongMagic(t *testing.T) {
	s := NewChainStore()
	n, logs := startNode(t, s)
	conn, err := ouroboros.NewConnection(ouroboros.WithNetworkMagic(testMagic + 1))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range conn.ErrorChan() {
		}
	}()
	if err := conn.Dial("unix", n.SocketPath()); err == nil {
		t.Fatal("handshake with the wrong magic succeeded")
	}
	_ = conn.Close()
	waitFor(t, "the node to log the failed handshake", func() bool {
		return logs.FilterMessage("client handshake failed").Len() == 1 && n.Stats().Active == 0
	})
	if st := n.Stats(); st.Accepted != 1 || st.Served != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestNodeSocketFile(t *testing.T) {
	s := NewChainStore()
	path := socketPath(t)
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := New(Config{SocketPath: path, NetworkMagic: testMagic, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err == nil {
		t.Fatal("started on a regular file")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// A stale socket file, left by a process that died, is replaced.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	if err := n.Start(context.Background()); err != nil {
		t.Fatalf("start over a stale socket: %v", err)
	}
	defer func() { _ = n.Close() }()
	if err := n.Start(context.Background()); err == nil {
		t.Fatal("started twice")
	}
	// A socket somebody listens on is refused.
	other, err := New(Config{SocketPath: path, NetworkMagic: testMagic, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(context.Background()); err == nil {
		t.Fatal("started on a live socket")
	}
	_ = other.Close()
	for _, cfg := range []Config{{NetworkMagic: 1, Store: s}, {SocketPath: path, Store: s}, {SocketPath: path, NetworkMagic: 1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestNodeServeUntilCancelled(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 3, 0)
	n, err := New(Config{SocketPath: socketPath(t), NetworkMagic: testMagic, Store: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error)
	go func() { served <- n.Serve(ctx) }()
	waitFor(t, "the listener", func() bool { n.mu.Lock(); defer n.mu.Unlock(); return n.ln != nil })
	c := syncedClient(t, n, s)
	cancel()
	returnsNil(t, "Serve", served)
	<-c.done
}

// BenchmarkNodeSync measures how fast one gouroboros client syncs a chain of
// 10,000 small blocks from the origin over the socket.
func BenchmarkNodeSync(b *testing.B) {
	const blocks = 10_000
	s := NewChainStore()
	extend(b, s, blocks, 0)
	n, err := New(Config{SocketPath: filepath.Join(b.TempDir(), "n.sock"), NetworkMagic: testMagic, Store: s})
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = n.Close() }()
	for b.Loop() {
		got := make(chan struct{})
		count := 0
		conn, err := ouroboros.NewConnection(
			ouroboros.WithNetworkMagic(testMagic),
			ouroboros.WithChainSyncConfig(chainsync.NewConfig(
				chainsync.WithRollForwardRawFunc(func(_ chainsync.CallbackContext, _ uint, _ []byte, _ chainsync.Tip) error {
					if count++; count == blocks {
						close(got)
					}
					return nil
				}),
				chainsync.WithRollBackwardFunc(func(chainsync.CallbackContext, pcommon.Point, chainsync.Tip) error { return nil }),
			)),
		)
		if err != nil {
			b.Fatal(err)
		}
		if err := conn.Dial("unix", n.SocketPath()); err != nil {
			b.Fatal(err)
		}
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for range conn.ErrorChan() {
			}
		}()
		if err := conn.ChainSync().Client.Sync(nil); err != nil {
			b.Fatal(err)
		}
		<-got
		_ = conn.Close()
		<-drained
	}
	b.ReportMetric(float64(blocks*b.N)/b.Elapsed().Seconds(), "blocks/s")
}
