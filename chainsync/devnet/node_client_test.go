package devnet

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// startNode serves s on a fresh socket, logging to an observer, and closes
// the node at the end of the test, checking that nothing was logged as an
// error.
func startNode(t *testing.T, s *ChainStore) (*Node, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	n, err := New(Config{SocketPath: socketPath(t), NetworkMagic: testMagic, Store: s, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
		for _, e := range logs.FilterLevelExact(zapcore.ErrorLevel).All() {
			t.Errorf("logged an error: %s %v", e.Message, e.ContextMap())
		}
	})
	return n, logs
}

type event struct {
	forward bool
	header  chain.BlockHeader // forward
	point   chain.Point       // backward
	tip     chain.Tip
}

// testClient is a gouroboros node-to-client chain-sync client that applies
// what it receives to its own view of the chain.
type testClient struct {
	t      *testing.T
	conn   *ouroboros.Connection
	done   chan struct{} // closed when the error channel is drained
	header HeaderFunc    // reads the blocks it gets

	mu     sync.Mutex
	view   []chain.BlockHeader
	raws   [][]byte
	types  []uint
	events []event
	errs   []error
	holdAt int           // forward callback waits on gate once view reaches holdAt
	gate   chan struct{} // closed to let it go on
}

// syncedClient is a client that synced from origin to the tip of s,
// served by n.
func syncedClient(t *testing.T, n *Node, s *ChainStore) *testClient {
	t.Helper()
	c := newClient(t, n.SocketPath(), s, 0, 0)
	if err := c.sync(chain.Origin); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "sync to the tip", func() bool { return c.synced(s) })
	return c
}

// newClient connects to the node. The view starts as the given prefix of
// the chain (the blocks the client already has).
func newClient(t *testing.T, path string, s *ChainStore, have int, pipeline int) *testClient {
	t.Helper()
	return newClientReading(t, path, s, have, pipeline, fakeHeader)
}

// newClientReading is newClient with a header decoder for the blocks.
func newClientReading(t *testing.T, path string, s *ChainStore, have int, pipeline int, header HeaderFunc) *testClient {
	t.Helper()
	c := &testClient{t: t, done: make(chan struct{}), header: header, gate: make(chan struct{})}
	for i := range have {
		b, _ := s.Block(i)
		c.view, c.raws, c.types = append(c.view, b.Header), append(c.raws, b.Raw), append(c.types, uint(b.Type))
	}
	opts := []chainsync.ChainSyncOptionFunc{
		chainsync.WithRollForwardRawFunc(c.rollForward),
		chainsync.WithRollBackwardFunc(c.rollBackward),
	}
	if pipeline > 0 {
		opts = append(opts, chainsync.WithPipelineLimit(pipeline))
	}
	conn, err := ouroboros.NewConnection(
		ouroboros.WithNetworkMagic(testMagic),
		ouroboros.WithNodeToNode(false),
		ouroboros.WithChainSyncConfig(chainsync.NewConfig(opts...)),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Dial("unix", path); err != nil {
		t.Fatal(err)
	}
	c.conn = conn
	go func() {
		defer close(c.done)
		for err := range conn.ErrorChan() {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *testClient) rollForward(_ chainsync.CallbackContext, blockType uint, raw []byte, tip chainsync.Tip) error {
	h, err := c.header(block.Type(blockType), raw)
	if err != nil {
		c.t.Errorf("client got a block it cannot read: %v", err)
		return err
	}
	c.mu.Lock()
	c.view = append(c.view, h)
	c.raws = append(c.raws, append([]byte(nil), raw...))
	c.types = append(c.types, blockType)
	c.events = append(c.events, event{forward: true, header: h, tip: clientTip(tip)})
	hold := c.holdAt > 0 && len(c.view) == c.holdAt
	c.mu.Unlock()
	if hold {
		select {
		case <-c.gate:
		case <-time.After(20 * time.Second):
			c.t.Error("gate never opened")
		}
	}
	return nil
}

func (c *testClient) rollBackward(_ chainsync.CallbackContext, p pcommon.Point, tip chainsync.Tip) error {
	cp, ok := fromProtoPoint(p)
	if !ok {
		c.t.Errorf("client got a malformed rollback point %+v", p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, event{point: cp, tip: clientTip(tip)})
	keep := -1
	if cp.IsOrigin() {
		keep = 0
	}
	for i := len(c.view) - 1; i >= 0 && keep < 0; i-- {
		if c.view[i].Point() == cp {
			keep = i + 1
		}
	}
	if keep < 0 {
		c.t.Errorf("roll back to %s, which the client does not have", cp)
		return nil
	}
	c.view, c.raws, c.types = c.view[:keep], c.raws[:keep], c.types[:keep]
	return nil
}

func clientTip(t chainsync.Tip) chain.Tip {
	p, _ := fromProtoPoint(t.Point)
	return chain.Tip{Point: p, BlockNo: t.BlockNumber}
}

// sync starts following from the first of points the node knows.
func (c *testClient) sync(points ...chain.Point) error {
	pts := make([]pcommon.Point, len(points))
	for i, p := range points {
		pts[i] = toProtoPoint(p)
	}
	return c.conn.ChainSync().Client.Sync(pts)
}

func (c *testClient) close() {
	_ = c.conn.Close()
	<-c.done
}

func (c *testClient) snapshot() ([]chain.BlockHeader, []event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chain.BlockHeader(nil), c.view...), append([]event(nil), c.events...)
}

// synced reports whether the client's view is the store's chain and the
// last message it got carried the store's tip.
func (c *testClient) synced(s *ChainStore) bool {
	view, events := c.snapshot()
	return len(events) > 0 && events[len(events)-1].tip == s.Tip() && fmt.Sprint(view) == fmt.Sprint(s.Headers())
}

// check verifies the view against the store, byte for byte.
func (c *testClient) check(s *ChainStore) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.view) != s.Len() {
		c.t.Fatalf("client has %d blocks, the store %d", len(c.view), s.Len())
	}
	for i, h := range c.view {
		b, _ := s.Block(i)
		if h != b.Header || !bytes.Equal(c.raws[i], b.Raw) || c.types[i] != uint(b.Type) {
			c.t.Fatalf("client block %d differs from the store's", i)
		}
	}
	for _, e := range c.events {
		if e.forward && e.tip.BlockNo < e.header.BlockNo {
			c.t.Fatalf("block %d came with tip %d", e.header.BlockNo, e.tip.BlockNo)
		}
	}
}

func (c *testClient) rollbacks() []chain.Point {
	_, events := c.snapshot()
	var ps []chain.Point
	for _, e := range events {
		if !e.forward {
			ps = append(ps, e.point)
		}
	}
	return ps
}
