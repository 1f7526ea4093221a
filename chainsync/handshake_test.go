package chainsync

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/blinklabs-io/gouroboros/protocol/handshake"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/chainsync/devnet/devnettest"
)

// TestHandshakeWrongNetworkMagic follows a devnet node of network magic 43
// with a follower configured for 42 over a real socket: every attempt is
// logged as an error naming both magics, counted by reason, and kept in the
// progress; the follower keeps retrying with backoff and follows once the
// node is restarted with the follower's magic.
func TestHandshakeWrongNetworkMagic(t *testing.T) {
	ctx := t.Context()
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	socket := filepath.Join(t.TempDir(), "node.socket")
	dn := devnettest.StartWrongMagic(ctx, t, socket)
	f, view, system, pid := spawnFollower(t, log, Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	defer system.Shutdown()
	waitFor(t, 10*time.Second, "three failed handshakes", func() bool {
		return f.Progress().Snapshot().HandshakeFailures[HandshakeNetworkMagic] >= 3
	})
	snap := f.Progress().Snapshot()
	if snap.Connected || snap.Handshake == nil || snap.Handshake.Reason != HandshakeNetworkMagic {
		t.Fatalf("progress %+v", snap)
	}
	const want = "network magic 42 does not match the node's (43)"
	if !strings.Contains(snap.Handshake.Message, want) || !strings.Contains(snap.LastError, want) {
		t.Fatalf("handshake failure %q, last error %q: want %q", snap.Handshake.Message, snap.LastError, want)
	}
	for reason, n := range snap.HandshakeFailures {
		if reason != HandshakeNetworkMagic {
			t.Fatalf("%d failures counted as %s", n, reason)
		}
	}
	errs := logs.FilterMessage("node handshake failed").FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) < 3 {
		t.Fatalf("%d error lines for %d failures", len(errs), snap.HandshakeFailures[HandshakeNetworkMagic])
	}
	if fields := errs[0].ContextMap(); !strings.Contains(fields["error"].(string), want) ||
		fields["reason"] != HandshakeNetworkMagic || fields["nodeNetworkMagic"] != uint32(43) {
		t.Fatalf("log fields %v", fields)
	}
	if n := logs.FilterMessage("lost the node connection").Len(); n != 0 {
		t.Fatalf("%d 'lost the node connection' lines: the handshake failure was reported as a lost connection", n)
	}
	if snap.Blocks != 0 || len(view.blocks) != 0 {
		t.Fatal("blocks delivered through a refused handshake")
	}

	// The node comes back with our magic: backoff continued, the follower follows.
	dn.Restart(ctx, t)
	defer dn.Close()
	waitFor(t, 10*time.Second, "the follower to reach the tip", func() bool { return view.tip().BlockNo == 20 })
	if snap := f.Progress().Snapshot(); !snap.Connected || snap.Handshake != nil {
		t.Fatalf("after reconnecting: %+v", snap)
	}
	stopActor(t, system, pid)
}

// TestHandshakeClosedWithoutReason: a socket that accepts and closes during
// the handshake (as gouroboros-based servers do on a refusal) is reported as
// a closed handshake that points at the network magic.
func TestHandshakeClosedWithoutReason(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "node.socket")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			_, _ = c.Read(buf)
			_ = c.Close()
		}
	}()
	f, err := NewFollower(Config{SocketPath: socket, NetworkMagic: MagicMainnet, MinBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond},
		zap.NewNop(), nil, classify.New(classify.Options{}), SinkFunc(func(context.Context, classify.Event) error { return nil }), nil)
	if err != nil {
		t.Fatal(err)
	}
	system := newSystem()
	defer system.Shutdown()
	pid := system.Root.Spawn(f.Props())
	waitFor(t, 10*time.Second, "a closed handshake", func() bool { return f.Progress().Snapshot().HandshakeFailures[HandshakeClosed] >= 2 })
	snap := f.Progress().Snapshot()
	if snap.Handshake == nil || !strings.Contains(snap.Handshake.Message, "network magic 764824073 not being the node's") {
		t.Fatalf("%+v", snap.Handshake)
	}
	stopActor(t, system, pid)
}

// TestRefusalReasons reads refusals as cardano-node and gouroboros word them.
func TestRefusalReasons(t *testing.T) {
	node := "version data mismatch: NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = 1}, query = False}" +
		" /= NodeToClientVersionData {networkMagic = NetworkMagic {unNetworkMagic = 764824073}, query = False}"
	for _, c := range []struct {
		reason    []any
		want      string
		nodeMagic uint32
		text      string
	}{
		{[]any{handshake.RefuseReasonRefused, uint64(0x8010), node}, HandshakeNetworkMagic, 1,
			"network magic 764824073 does not match the node's (1, preprod); set node.networkMagic"},
		{[]any{handshake.RefuseReasonRefused, uint64(0x8010), "network magic mismatch"}, HandshakeNetworkMagic, 0,
			"network magic 764824073 does not match the node's; set node.networkMagic"},
		{[]any{handshake.RefuseReasonVersionMismatch, []any{uint64(0x8016), uint64(0x8017)}}, HandshakeVersion, 0,
			"(it offers 22, 23)"},
		{[]any{handshake.RefuseReasonDecodeError, uint64(0x8010), "bad"}, HandshakeDecode, 0, "version 16: bad"},
		{[]any{handshake.RefuseReasonRefused, uint64(0x8010), "go away"}, HandshakeRefused, 0, "version 16): go away"},
	} {
		e := refusalError(MagicMainnet, c.reason)
		if e.Reason != c.want || e.NodeMagic != c.nodeMagic || !strings.Contains(e.Error(), c.text) {
			t.Errorf("%v: %s (node magic %d): %s", c.reason, e.Reason, e.NodeMagic, e.Error())
		}
	}
}
