package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlitestore"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// buildBinary builds the marlowe-follower binary once for the tests that
// run it as a child process; in -short mode it skips the test.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "marlowe-follower-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "marlowe-follower")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Stderr = os.Stderr
		binErr = cmd.Run()
	})
	if binErr != nil {
		t.Fatalf("building the binary: %v", binErr)
	}
	return binPath
}

// startStderr starts cmd and returns its standard error to read. With
// defaults, the command runs without the MARLOWE_RT_ settings of the
// environment: on its defaults and its flags alone.
func startStderr(t *testing.T, cmd *exec.Cmd, defaults bool) io.ReadCloser {
	t.Helper()
	if defaults {
		withDefaults(cmd)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stderr
}

// withDefaults makes cmd run without the MARLOWE_RT_ settings of the
// environment: on its defaults and its flags alone.
func withDefaults(cmd *exec.Cmd) *exec.Cmd {
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MARLOWE_RT_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// startRun starts `marlowe-follower run` on a devnet socket with its store in dir.
func startRun(t *testing.T, bin, socket, dir string) *child {
	t.Helper()
	return startProc(t, "the run in "+dir, bin, "run", "--node-socket", socket, "--network-magic", strconv.Itoa(devnet.NetworkMagic),
		"--data-dir", dir, "--query-port", "0", "--streaming-port", "0", "--log-level", "error", "--progress-period", "0s")
}

// sameLog fails the test unless the log and checkpoint of a run (what
// names it: the killed one, the one with failovers) are those of the
// uninterrupted run (logA, cpA), record by record.
func sameLog(t *testing.T, what string, logA, logB []record.Record, cpA, cpB *history.Checkpoint) {
	t.Helper()
	if len(logA) != len(logB) {
		t.Fatalf("the uninterrupted run logged %d records, %s %d", len(logA), what, len(logB))
	}
	for i := range logA {
		if !reflect.DeepEqual(logA[i], logB[i]) {
			t.Fatalf("record %d differs:\n uninterrupted %+v %s\n %s %+v %s", i+1, logA[i], logA[i].Payload, what, logB[i], logB[i].Payload)
		}
	}
	if !reflect.DeepEqual(cpA, cpB) {
		t.Fatalf("checkpoints differ:\n uninterrupted %+v\n %s %+v", cpA, what, cpB)
	}
}

// storeState reads a store's whole log and checkpoint (a second process
// reading the SQLite file the child writes).
func storeState(t *testing.T, dir string) ([]record.Record, *history.Checkpoint) {
	t.Helper()
	b, err := sqlitestore.Open(context.Background(), dir, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return backendState(t, b)
}

// backendState reads a backend's whole log and checkpoint, and closes it.
func backendState(t *testing.T, b history.Backend) ([]record.Record, *history.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	defer b.Close()
	cp, err := b.CheckpointGet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return historytest.Log(t, b), cp
}

// checkpointTip returns the newest committed breadcrumb, or zero, also
// while the child has created the store's file but not yet its schema (a
// read between the two finds no tables).
func checkpointTip(t *testing.T, dir string) uint64 {
	if _, err := os.Stat(filepath.Join(dir, "history.sqlite")); err != nil {
		return 0
	}
	ctx := context.Background()
	b, err := sqlitestore.Open(ctx, dir, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cp, err := b.CheckpointGet(ctx)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.Breadcrumbs) == 0 {
		return 0
	}
	return cp.Breadcrumbs[0].BlockNo
}

// TestCrashSafetyAndDeterminism follows a journal devnet (every run sees the
// same chain events, forks included) twice: once without interruption, once
// killed with SIGKILL at random moments and restarted each time. Both runs
// must end with identical logs (records, seqs, rollback marks) and
// checkpoints: a crash loses nothing and duplicates nothing.
func TestCrashSafetyAndDeterminism(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	socket := filepath.Join(t.TempDir(), "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.MarloweShare, gcfg.MeanBlockSize = 21, 0.4, 2500
	gcfg.RollbackEvery, gcfg.MaxRollbackDepth = 15, 4
	const blocks = 800
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: blocks, Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	<-dn.Done()
	final := dn.Store().Tip()

	waitTip := func(dir string, run *child) {
		waitUntil(t, 90*time.Second, fmt.Sprintf("the run in %s to reach block %d", dir, final.BlockNo), func() bool {
			return checkpointTip(t, dir) == final.BlockNo
		})
		run.terminate(t)
	}

	// Uninterrupted.
	dirA := t.TempDir()
	waitTip(dirA, startRun(t, bin, socket, dirA))
	logA, cpA := storeState(t, dirA)

	// Killed at random moments: right after it starts (opening the
	// store, intersecting), or once its checkpoint has passed a random
	// block of the next stretch of the chain (committing).
	dirB := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := 0
	for kills < 6 {
		from := checkpointTip(t, dirB)
		run := startRun(t, bin, socket, dirB)
		if rng.IntN(4) > 0 {
			at := min(from+1+uint64(rng.IntN(int(final.BlockNo/6))), final.BlockNo)
			waitUntil(t, 90*time.Second, fmt.Sprintf("the checkpoint at block %d", at), func() bool { return checkpointTip(t, dirB) >= at })
		}
		if checkpointTip(t, dirB) == final.BlockNo {
			waitTip(dirB, run)
			break
		}
		run.kill(t)
		kills++
	}
	if checkpointTip(t, dirB) != final.BlockNo {
		waitTip(dirB, startRun(t, bin, socket, dirB))
	}
	logB, cpB := storeState(t, dirB)

	if len(logA) == 0 {
		t.Fatal("nothing recorded")
	}
	sameLog(t, "the killed one", logA, logB, cpA, cpB)
	rolled := historytest.RollbackMarkers(logA)
	t.Logf("%d records (%d rollback markers), identical after %d kills", len(logA), rolled, kills)
	if rolled == 0 {
		t.Fatal("no rollback touched a record: the test did not exercise rollbacks")
	}
}
