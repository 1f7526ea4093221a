package chainsync

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/chainsync/handoff"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// chainView applies delivered events to a list of blocks, as a downstream
// stage would, and checks that the events form one consistent chain.
type chainView struct {
	t      *testing.T
	mu     sync.Mutex
	blocks []viewBlock
	events int
	rolls  int
}

type viewBlock struct {
	header chain.BlockHeader
	acts   []devnet.Activity
}

func (v *chainView) Deliver(_ context.Context, ev classify.Event) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.events++
	switch e := ev.(type) {
	case *classify.RollForward:
		if n := len(v.blocks); n > 0 && e.Header.BlockNo != v.blocks[n-1].header.BlockNo+1 {
			v.t.Errorf("block %d after block %d: a gap or a duplicate", e.Header.BlockNo, v.blocks[n-1].header.BlockNo)
		}
		acts, err := devnet.ActivityOf(e)
		if err != nil {
			v.t.Error(err)
		}
		v.blocks = append(v.blocks, viewBlock{header: e.Header, acts: acts})
	case *classify.RollBackward:
		v.rolls++
		keep := 0
		for i, b := range v.blocks {
			if b.header.Slot <= e.Point.Slot {
				keep = i + 1
			}
		}
		if !e.Point.IsOrigin() && (keep == 0 || v.blocks[keep-1].header.Point() != e.Point) {
			v.t.Errorf("rollback to %s, a point the view does not have", e.Point)
		}
		v.blocks = v.blocks[:keep]
	case *classify.Undecodable:
		v.t.Errorf("undecodable block: %s", e.Reason)
	}
	return nil
}

func (v *chainView) tip() chain.BlockHeader {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.blocks) == 0 {
		return chain.BlockHeader{}
	}
	return v.blocks[len(v.blocks)-1].header
}

func (v *chainView) activity() []devnet.Activity {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []devnet.Activity
	for _, b := range v.blocks {
		out = append(out, b.acts...)
	}
	return out
}

// The waits of the kit (chainsync/waitfor) under this package's names.
var (
	waitFor  = waitfor.Until // (t, d, what, cond)
	holdsFor = waitfor.Holds // (t, d, what, cond)
)

// TestFollowDevnetEndToEnd follows a devnet node over a real Unix socket
// while it generates Marlowe activity with rollbacks, drops every client
// connection several times and restarts once. Everything generated must be
// classified exactly once and in order.
func TestFollowDevnetEndToEnd(t *testing.T) {
	ctx := t.Context()
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))
	socket := filepath.Join(t.TempDir(), "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.MarloweShare, gcfg.MeanBlockSize = 7, 0.3, 3000
	gcfg.RollbackEvery, gcfg.MaxRollbackDepth = 25, 4
	const blocks = 700
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: blocks, BlockRate: 400, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()

	f, view, system, pid := spawnFollower(t, log, Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	defer system.Shutdown()

	// Interrupt the follower while the chain grows.
	for i := range 4 {
		target := uint64(100 * (i + 1))
		waitFor(t, 30*time.Second, "the follower to pass a block", func() bool { return view.tip().BlockNo >= target })
		if i == 2 {
			if err := dn.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		} else {
			dn.Node().DisconnectAll()
		}
	}
	<-dn.Done()
	if err := dn.Err(); err != nil {
		t.Fatal(err)
	}
	storeTip := dn.Store().Tip()
	waitFor(t, 30*time.Second, "the follower to reach the tip", func() bool { return view.tip().Point() == storeTip.Point })

	got := view.activity()
	if err := devnet.ClassifierMismatch(got, dn.Activity()); err != nil {
		t.Fatalf("followed: %v", err)
	}
	snap := f.Progress().Snapshot()
	if snap.Point.Point() != storeTip.Point || snap.Tip.Point != storeTip.Point || snap.Fraction() != 1 {
		t.Fatalf("progress %+v, store tip %+v", snap, storeTip)
	}
	if snap.Attempts < 5 {
		t.Fatalf("only %d connection attempts: the interruptions did not happen", snap.Attempts)
	}
	t.Logf("%d activities, %d events, %d rollbacks seen, %d connections", len(got), view.events, view.rolls, snap.Attempts)
	stopActor(t, system, pid)
}

// TestFollowerRetriesUntilTheNodeAppears starts the follower before the
// node exists: it keeps retrying, then follows.
func TestFollowerRetriesUntilTheNodeAppears(t *testing.T) {
	ctx := t.Context()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	socket := filepath.Join(t.TempDir(), "node.socket")
	f, view, system, pid := spawnFollower(t, log, Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	defer system.Shutdown()
	waitFor(t, 10*time.Second, "a few failed attempts", func() bool { return f.Progress().Snapshot().Attempts >= 3 })
	if f.Progress().Snapshot().Connected {
		t.Fatal("connected to nothing")
	}
	dn := startSteadyDevnet(t, ctx, socket, 50, log)
	defer dn.Close()
	waitFor(t, 10*time.Second, "the follower to reach the tip", func() bool { return view.tip().BlockNo == 50 })
	stopActor(t, system, pid)
}

// TestFollowerStartsAtAPointAndFromCheckpoint checks the start points: a
// configured point, and a restored checkpoint that takes precedence.
func TestFollowerStartsAtAPointAndFromCheckpoint(t *testing.T) {
	ctx := t.Context()
	log := zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))
	socket := filepath.Join(t.TempDir(), "node.socket")
	dn := startSteadyDevnet(t, ctx, socket, 60, log)
	defer dn.Close()
	mid, _ := dn.Store().Block(29) // block number 30
	system := newSystem()
	defer system.Shutdown()

	run := func(cfg Config, cp handoff.Checkpoints) *chainView {
		view := &chainView{t: t}
		f, err := NewFollower(cfg, log, cp, classify.New(classify.Options{}), view, nil)
		if err != nil {
			t.Fatal(err)
		}
		pid := system.Root.Spawn(f.Props())
		waitFor(t, 10*time.Second, "the tip", func() bool { return view.tip().BlockNo == 60 })
		stopActor(t, system, pid)
		return view
	}
	base := Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic}
	cfg := base
	cfg.Start = Start{Kind: StartPoint, Point: mid.Header.Point()}
	if v := run(cfg, nil); v.blocks[0].header.BlockNo != 31 {
		t.Fatalf("from a point: first block %d", v.blocks[0].header.BlockNo)
	}
	cp := staticCheckpoint{&handoff.Restored{Breadcrumbs: []chain.BlockHeader{mid.Header}}}
	if v := run(base, cp); v.blocks[0].header.BlockNo != 31 {
		t.Fatalf("from a checkpoint: first block %d", v.blocks[0].header.BlockNo)
	}
	cfg.Start = Start{Kind: StartTip}
	view := &chainView{t: t}
	f, _ := NewFollower(cfg, log, nil, classify.New(classify.Options{}), view, nil)
	pid := system.Root.Spawn(f.Props())
	waitFor(t, 10*time.Second, "the connection", func() bool { return f.Progress().Snapshot().Connected })
	stopActor(t, system, pid)
	if len(view.blocks) != 0 {
		t.Fatalf("from the tip: %d blocks delivered", len(view.blocks))
	}
}

type staticCheckpoint struct{ r *handoff.Restored }

func (s staticCheckpoint) Restore(context.Context) (*handoff.Restored, error) { return s.r, nil }

// spawnFollower spawns a follower with cfg, delivering to a new chainView,
// in a new actor system (shut it down when done).
func spawnFollower(t *testing.T, log *zap.Logger, cfg Config) (*Follower, *chainView, *actor.ActorSystem, *actor.PID) {
	t.Helper()
	view := &chainView{t: t}
	f, err := NewFollower(cfg, log, nil, classify.New(classify.Options{}), view, nil)
	if err != nil {
		t.Fatal(err)
	}
	system := newSystem()
	return f, view, system, system.Root.Spawn(f.Props())
}

// newSystem returns an actor system for a test; protoactor's own logs are
// dropped (what the actors log goes to the test's logger).
// stopActor stops pid, the actor under test, and waits until it has stopped.
func stopActor(t *testing.T, system *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	if err := system.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
}

// startSteadyDevnet serves a pregenerated chain of blocks blocks without
// rollbacks on socket (the caller closes it).
func startSteadyDevnet(t *testing.T, ctx context.Context, socket string, blocks uint64, log *zap.Logger) *devnet.Devnet {
	t.Helper()
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.RollbackEvery = 0
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: blocks, Pregenerate: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return dn
}
