package chainsync

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// genChain makes n blocks of one chain without rollbacks.
func genChain(t *testing.T, seed int64, n int) []devnet.StoredBlock {
	t.Helper()
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.RollbackEvery, gcfg.MeanBlockSize, gcfg.MarloweShare = seed, 0, 400, 0.2
	blocks, err := devnet.GenerateBlocks(gcfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// startPrefix serves the first n of blocks on socket.
func startPrefix(t *testing.T, ctx context.Context, socket string, blocks []devnet.StoredBlock, n int) *devnet.GrowingNode {
	t.Helper()
	node, err := devnet.ServeGrowing(ctx, socket, devnet.NetworkMagic, blocks, n)
	if err != nil {
		t.Fatal(err)
	}
	return node
}

// TestFollowerWaitsForANodeBehind restarts the node from older copies of
// the same chain, 100 and then 2,500 blocks behind the follower (more than
// the 2,160 blocks of UTxO changes kept). Each time the follower waits:
// nothing is rolled back, it reports the wait with the node's tip, its
// point and the distance, keeps polling, and follows on (without a gap or a
// duplicate) once the node has caught up.
func TestFollowerWaitsForANodeBehind(t *testing.T) {
	ctx := t.Context()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	socket := filepath.Join(t.TempDir(), "node.socket")
	chainF := genChain(t, 5, 3300)
	n := startPrefix(t, ctx, socket, chainF, 3000)
	f, view, system, pid := spawnFollower(t, log, Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	defer system.Shutdown()
	waitFor(t, 60*time.Second, "the follower to reach block 3000", func() bool { return view.tip().BlockNo == 3000 })

	for _, c := range []struct{ served, grown int }{{2900, 3100}, {600, 3300}} {
		ours := view.tip()
		_ = n.Close()
		n = startPrefix(t, ctx, socket, chainF, c.served)
		waitFor(t, 10*time.Second, "the follower to wait for the node", func() bool {
			w := f.Progress().Snapshot().Waiting
			return w != nil && w.Polls >= 3
		})
		snap := f.Progress().Snapshot()
		w := snap.Waiting
		if w.NodeTip.BlockNo != uint64(c.served) || w.Point != ours || w.BlocksBehind() != ours.BlockNo-uint64(c.served) {
			t.Fatalf("waiting %+v, our point %+v", w, ours)
		}
		if snap.Connected || snap.Diverged != nil || snap.Tip.BlockNo != uint64(c.served) {
			t.Fatalf("progress while waiting: %+v", snap)
		}
		if !strings.Contains(snap.LastError, "blocks behind the follower's point") {
			t.Fatalf("last error %q", snap.LastError)
		}
		if view.tip() != ours || view.rolls != 0 {
			t.Fatalf("while waiting the view moved to %+v with %d rollbacks", view.tip(), view.rolls)
		}
		if err := n.Grow(c.grown); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the follower to follow on", func() bool { return view.tip().BlockNo == uint64(c.grown) })
		if snap := f.Progress().Snapshot(); snap.Waiting != nil || !snap.Connected {
			t.Fatalf("after the node caught up: %+v", snap)
		}
	}
	if view.rolls != 0 {
		t.Fatalf("%d rollbacks delivered", view.rolls)
	}
	for i, b := range view.blocks {
		if b.header != chainF[i].Header {
			t.Fatalf("block %d: %+v, want %+v", i, b.header, chainF[i].Header)
		}
	}
	_ = n.Close()
	stopActor(t, system, pid)
}

// TestFollowerStopsOnDivergence: a node of another chain is first shorter
// (the follower waits: it cannot tell yet), then at and past the follower's
// point sharing none of its points: following stops for the operator, with
// the reason and what to run, and no further attempts are made.
func TestFollowerStopsOnDivergence(t *testing.T) {
	ctx := t.Context()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel+1))
	socket := filepath.Join(t.TempDir(), "node.socket")
	n := startPrefix(t, ctx, socket, genChain(t, 5, 400), 400)
	f, view, system, pid := spawnFollower(t, log, Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	defer system.Shutdown()
	waitFor(t, 30*time.Second, "the follower to reach block 400", func() bool { return view.tip().BlockNo == 400 })
	_ = n.Close()
	n = startPrefix(t, ctx, socket, genChain(t, 6, 500), 100)
	defer func() { _ = n.Close() }()
	waitFor(t, 10*time.Second, "the follower to wait", func() bool { return f.Progress().Snapshot().Waiting != nil })
	if err := n.Grow(500); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to stop", func() bool { return f.Progress().Snapshot().Diverged != nil })
	snap := f.Progress().Snapshot()
	if snap.Connected || snap.Waiting != nil || !strings.Contains(snap.Diverged.Reason, "none of the") ||
		!strings.Contains(snap.Diverged.Action, "marlowe-follower reset --yes") {
		t.Fatalf("progress %+v, divergence %+v", snap, snap.Diverged)
	}
	// Five of the longest backoffs: a follower that went on would have
	// attempted again.
	attempts := snap.Attempts
	holdsFor(t, 500*time.Millisecond, "no attempt after stopping", func() bool { return f.Progress().Snapshot().Attempts == attempts })
	if view.tip().BlockNo != 400 || view.rolls != 0 {
		t.Fatalf("view at %+v after %d rollbacks", view.tip(), view.rolls)
	}
	stopActor(t, system, pid)
}
