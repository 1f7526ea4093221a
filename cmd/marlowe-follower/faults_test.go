package main

import (
	"context"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/chainsync/devnet/devnettest"
	"github.com/marlowe-follower/follower/history/record"
)

// The tests of this file run the binary against nodes that misbehave the
// way production nodes do: another network, restored from an older
// snapshot, on another chain, killed; and against a second writer. Each
// checks what the operator sees: the log, /readyz, /status, /metrics and
// the exit status.

func noRollbacks(t *testing.T, log []record.Record) {
	t.Helper()
	for _, r := range log {
		if r.Kind == record.KindRolledBack || r.RolledBackBy != nil {
			t.Fatalf("record %d: %s, rolled back by %v: the follower rolled back", r.Seq, r.Kind, r.RolledBackBy)
		}
	}
}

// TestWrongNetworkMagicIsNamed follows a node of network magic 43 with
// --network-magic 42: the log has an ERROR naming both magics (not a
// "peer closed the connection" warning), the failures are counted by
// reason, /readyz is 503 node_handshake_failed with the cause and /status
// says it; backoff goes on, and once the node has the follower's magic the
// service follows and is ready.
func TestWrongNetworkMagicIsNamed(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	socket := filepath.Join(t.TempDir(), "node.socket")
	dn := devnettest.StartWrongMagic(ctx, t, socket)
	f := startFollower(t, bin, socket, t.TempDir(), devnet.NetworkMagic)
	const cause = "network magic 42 does not match the node's (43)"
	took := waitUntil(t, 30*time.Second, "503 node_handshake_failed", func() bool { return f.reasonHolds("node_handshake_failed") })
	t.Logf("/readyz 503 node_handshake_failed %s after start", took.Round(time.Millisecond))
	_, r := f.ready()
	if msg := r.NotReady["node_handshake_failed"].Message; !strings.Contains(msg, cause) {
		t.Fatalf("readiness reason %q", msg)
	}
	waitUntil(t, 10*time.Second, "three failed handshakes", func() bool {
		m := regexp.MustCompile(`marlowe_chainsync_handshake_failures_total\{reason="network_magic"\} (\d+)`).FindStringSubmatch(f.metrics(t))
		n, _ := strconv.Atoi(m[1])
		return n >= 3
	})
	if m := f.metrics(t); !strings.Contains(m, `marlowe_not_ready{reason="node_handshake_failed"} 1`) ||
		!strings.Contains(m, `marlowe_chainsync_handshake_failures_total{reason="closed"} 0`) {
		t.Fatal("metrics do not name the handshake failure")
	}
	st := f.mustStatus(t)
	if st.Connected || st.Handshake == nil || st.Handshake.Reason != "network_magic" || !strings.Contains(st.Handshake.Message, cause) ||
		!strings.Contains(st.NodeError, cause) {
		t.Fatalf("status %+v", st)
	}
	logs := f.stderr.String()
	var errorLine bool
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, "node handshake failed") && strings.Contains(line, cause) {
			errorLine = true
		}
	}
	if !errorLine || strings.Contains(logs, "peer closed the connection") {
		t.Fatalf("log lines:\n%s", logs)
	}

	dn.Restart(ctx, t)
	defer dn.Close()
	waitUntil(t, 30*time.Second, "ready with the right magic", func() bool { return f.isReady() && f.committed(t) == 20 })
	if st := f.mustStatus(t); st.Handshake != nil || !st.Connected {
		t.Fatalf("status after the node came back with our magic: %+v", st)
	}
}

// TestNodeBehindWaits restarts the node from older copies of its chain
// (devnet PrefixBlocks over its chain file): 100 blocks behind the
// follower, then 2,400 (beyond the 2,160 blocks of UTxO changes kept). The
// follower waits each time: /status waitingForNode with the node's tip,
// our point and the distance, /readyz 503 waiting_for_node, the metric; the
// log is untouched (no rollback marker, the same seqs). Once the node has
// caught up (Reveal) it follows on.
func TestNodeBehindWaits(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	tmp := t.TempDir()
	socket, chainFile, dir := filepath.Join(tmp, "node.socket"), filepath.Join(tmp, "devnet.chain"), filepath.Join(tmp, "data")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.RollbackEvery, gcfg.MeanBlockSize, gcfg.MarloweShare = 8, 0, 600, 0.3
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: 3000, Pregenerate: true, ChainFile: chainFile})
	if err != nil {
		t.Fatal(err)
	}
	f := startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	waitUntil(t, 120*time.Second, "block 3000 committed and ready", func() bool { return f.committed(t) == 3000 && f.isReady() })

	for _, c := range []struct{ served, grown int }{{2900, 3100}, {700, 3300}} {
		before, _ := storeState(t, dir)
		ours := f.mustStatus(t).Committed
		_ = dn.Close()
		dn, err = devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: uint64(c.grown), ChainFile: chainFile, PrefixBlocks: c.served})
		if err != nil {
			t.Fatal(err)
		}
		took := waitUntil(t, 20*time.Second, "503 waiting_for_node", func() bool { return f.reasonHolds("waiting_for_node") })
		want := ours.BlockNo - uint64(c.served)
		t.Logf("node restarted %d blocks behind: /readyz 503 waiting_for_node after %s", want, took.Round(time.Millisecond))
		st := f.mustStatus(t)
		if st.Waiting == nil || st.Waiting.NodeTip.BlockNo != uint64(c.served) || st.Waiting.Follower != ours || st.Waiting.BlocksBehind != want ||
			st.Connected || st.Diverged != nil || st.NodeTipBlock.BlockNo != uint64(c.served) {
			t.Fatalf("status while the node is behind: %+v (ours %+v)", st, ours)
		}
		if m := f.metrics(t); !strings.Contains(m, "marlowe_chainsync_waiting_for_node 1") ||
			!strings.Contains(m, "marlowe_chainsync_node_behind_blocks "+strconv.FormatUint(want, 10)) {
			t.Fatal("metrics do not show the wait")
		}
		// It goes on waiting across several polls of the node.
		attempts := f.attempts(t)
		waitUntil(t, 30*time.Second, "three more polls of the node", func() bool {
			if f.exited() || !f.reasonHolds("waiting_for_node") {
				t.Fatal("stopped waiting while the node is behind")
			}
			return f.attempts(t) >= attempts+3
		})
		during, _ := storeState(t, dir)
		if !reflect.DeepEqual(before, during) {
			t.Fatalf("the log changed while waiting: %d records, then %d", len(before), len(during))
		}
		if _, err := dn.Reveal(0); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, 120*time.Second, "the follower to follow on", func() bool { return f.committed(t) == uint64(c.grown) && f.isReady() })
		after, _ := storeState(t, dir)
		if len(after) < len(before) || !reflect.DeepEqual(after[:len(before)], before) {
			t.Fatal("the records of the blocks before the restart changed (seqs or marks)")
		}
		noRollbacks(t, after)
		if st := f.mustStatus(t); st.Waiting != nil || !st.Connected {
			t.Fatalf("status after the node caught up: %+v", st)
		}
	}
	_ = dn.Close()
	logs := f.stderr.String()
	if strings.Count(logs, "waiting for it to reach our point") != 2 || strings.Contains(logs, "operator action") {
		t.Fatalf("log: %s", logs)
	}
}

// TestDivergedStops replaces the node by one of another chain, longer than
// ours and sharing none of our points: following stops for the operator;
// /readyz is 503 diverged with the reset to run, /status says it, the log is
// untouched and the process goes on serving.
func TestDivergedStops(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	tmp := t.TempDir()
	socket, dir := filepath.Join(tmp, "node.socket"), filepath.Join(tmp, "data")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.RollbackEvery = 0
	gcfg.Seed = 11
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: 300, Pregenerate: true})
	if err != nil {
		t.Fatal(err)
	}
	f := startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "block 300 committed", func() bool { return f.committed(t) == 300 && f.isReady() })
	before, _ := storeState(t, dir)
	_ = dn.Close()
	gcfg.Seed = 12
	dn, err = devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: 400, Pregenerate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	waitUntil(t, 20*time.Second, "503 diverged", func() bool { return f.reasonHolds("diverged") })
	_, r := f.ready()
	if d := r.NotReady["diverged"]; !strings.Contains(d.Action, "marlowe-follower reset --yes") || !strings.Contains(d.Message, "none of the") {
		t.Fatalf("diverged: %+v", d)
	}
	st := f.mustStatus(t)
	if st.Diverged == nil || !strings.Contains(st.Diverged.Action, "marlowe-follower reset --yes") || st.Connected {
		t.Fatalf("status: %+v", st)
	}
	// Three of its longest backoffs (300 ms): it stays stopped.
	attempts := f.attempts(t)
	holdsFor(t, time.Second, "stopped for the operator", func() bool {
		return !f.exited() && f.reasonHolds("diverged") && f.attempts(t) == attempts
	})
	if !strings.Contains(f.metrics(t), "marlowe_chainsync_diverged 1") {
		t.Fatal("no divergence metric")
	}
	after, _ := storeState(t, dir)
	if !reflect.DeepEqual(before, after) {
		t.Fatal("the log changed")
	}
	if logs := f.stderr.String(); strings.Count(logs, "following stopped: operator action needed") != 1 {
		t.Fatalf("log: %s", logs)
	}
}

// TestNotReadyWhileTheNodeIsGone follows a devnet node running as its own
// process, kills it with SIGKILL and probes /readyz: 503 node_disconnected
// well within a probe period, on every probe while it is gone, and 200 once
// it is back.
func TestNotReadyWhileTheNodeIsGone(t *testing.T) {
	bin := buildBinary(t)
	tmp := t.TempDir()
	socket := filepath.Join(tmp, "node.socket")
	startNode := func() *child {
		return startProc(t, "the devnet", bin, "devnet", "--socket", socket, "--seed", "3", "--blocks", "40", "--pregenerate",
			"--block-rate", "0", "--rollback-every", "0", "--log-level", "error")
	}
	node := startNode()
	f := startFollower(t, bin, socket, filepath.Join(tmp, "data"), devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "ready", func() bool { return f.committed(t) == 40 && f.isReady() })

	node.kill(t)
	took := waitUntil(t, 5*time.Second, "503 node_disconnected", func() bool { return f.reasonHolds("node_disconnected") })
	t.Logf("/readyz 503 node_disconnected %s after the node was killed", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Fatalf("%s to notice the node is gone", took)
	}
	holdsFor(t, 5*time.Second, "503 node_disconnected on every probe while the node is gone", func() bool {
		return f.reasonHolds("node_disconnected")
	})
	if st := f.mustStatus(t); st.Connected || st.NodeError == "" {
		t.Fatalf("status while the node is gone: %+v", st)
	}
	startNode()
	took = waitUntil(t, 30*time.Second, "ready again", f.isReady)
	t.Logf("/readyz 200 %s after the node was started again", took.Round(time.Millisecond))
}

// genBlocks makes n blocks of one chain without rollbacks.
func genBlocks(t *testing.T, seed int64, n int) []devnet.StoredBlock {
	t.Helper()
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.RollbackEvery, gcfg.MarloweShare = seed, 0, 0.9
	blocks, err := devnet.GenerateBlocks(gcfg, n)
	if err != nil {
		t.Fatal(err)
	}
	return blocks
}

// serveChain serves the first n of blocks on socket until the test ends.
func serveChain(t *testing.T, ctx context.Context, socket string, blocks []devnet.StoredBlock, n int) *devnet.GrowingNode {
	t.Helper()
	node, err := devnet.ServeGrowing(ctx, socket, devnet.NetworkMagic, blocks, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Close() })
	return node
}

// TestSecondWriterExits starts a second marlowe-follower on the SQLite
// store a first one writes, following a node of the same chain: it exits at
// start with status 1 and "another writer holds this store", before it
// serves or commits anything (the writer lock file in the data directory),
// and the first goes on. Without that lock the two followed until one's
// commit found the log moved on, and that could be the first: the test
// grows the second's node ahead, so that the second would commit first.
// A writer stopped by SIGTERM or killed with SIGKILL leaves the lock free.
func TestSecondWriterExits(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	blocks := genBlocks(t, 9, 90)
	a := serveChain(t, ctx, filepath.Join(tmp, "a.socket"), blocks, 50)
	serveChain(t, ctx, filepath.Join(tmp, "b.socket"), blocks, 80)
	first := startFollower(t, bin, filepath.Join(tmp, "a.socket"), dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "the first writer at block 50", func() bool { return first.committed(t) == 50 })
	second := startFollower(t, bin, filepath.Join(tmp, "b.socket"), dir, devnet.NetworkMagic)
	err, out := second.exit(t, 30*time.Second, "the second writer did not exit")
	if !exitCode(err, 1) {
		t.Fatalf("the second writer exited with %v", err)
	}
	if !strings.Contains(out, "marlowe-follower: another writer holds this store: another marlowe-follower service writes the data directory") ||
		strings.Contains(out, "resuming") {
		t.Fatalf("stderr: %s", out)
	}
	if got := first.committed(t); got != 50 {
		t.Fatalf("the first writer at block %d: the second's node (at 80) was followed", got)
	}
	if err := a.Grow(70); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the first writer at block 70", func() bool { return first.committed(t) == 70 && first.isReady() })
	if err := first.stop(t); err != nil {
		t.Fatalf("first writer: %v", err)
	}
	log, cp := storeState(t, dir)
	for i, r := range log {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d", i, r.Seq)
		}
	}
	if cp.Breadcrumbs[0].BlockNo != 70 || cp.Head != int64(len(log)) {
		t.Fatalf("checkpoint at block %d, head %d, %d records", cp.Breadcrumbs[0].BlockNo, cp.Head, len(log))
	}
	// The lock goes with its process, however it ends.
	third := startFollower(t, bin, filepath.Join(tmp, "b.socket"), dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "a writer after the first stopped, at block 80", func() bool { return third.committed(t) == 80 })
	third.kill(t)
	fourth := startFollower(t, bin, filepath.Join(tmp, "b.socket"), dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "a writer after a kill -9, ready", func() bool { return fourth.committed(t) == 80 && fourth.isReady() })
}
