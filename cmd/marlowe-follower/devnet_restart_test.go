package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history/record"
)

// startRunDevnetArgs starts `run --devnet` (the node's default mode, as
// users run it) in workDir with extra arguments, its log (warnings and
// errors) kept.
func startRunDevnetArgs(t *testing.T, bin, workDir string, qport int, extra ...string) *child {
	t.Helper()
	args := append([]string{"run", "--devnet", "--devnet-block-rate", "100", "--devnet-seed", "9",
		"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
		"--min-backoff", "50ms", "--max-backoff", "500ms", "--log-level", "warn", "--progress-bar", "never"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = workDir
	return startCmd(t, "run --devnet", cmd, false)
}

// waitSeq waits until the service's history passes seq.
func waitSeq(t *testing.T, base string, seq int64) {
	t.Helper()
	var status struct {
		HistorySeq int64 `json:"historySeq"`
	}
	checkFor(t, 90*time.Second, func() error {
		code, err := getJSON(base+"/status", &status)
		if err == nil && code == 200 && status.HistorySeq > seq {
			return nil
		}
		return fmt.Errorf("the history did not pass seq %d: %d %v %+v", seq, code, err, status)
	})
}

// TestRunDevnetRestartKeepsChain restarts `run --devnet --data-dir` twice.
// The devnet keeps its chain in the data directory, so after each restart
// the history's records up to the previous head are the same records with
// the same seqs (a record may only be marked rolled back later by a
// rollback the devnet's chain really made), no rolled_back record appears
// at the restart, nothing is logged as an error (no "no intersection"),
// and new records follow on the same chain.
func TestRunDevnetRestartKeepsChain(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	qport := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(qport)
	chainFile := filepath.Join(dir, DevnetChainFile)

	var prev []record.Record
	var prevTip *chain.BlockHeader // the block the previous run committed last
	for run := range 3 {
		svc := startRunDevnetArgs(t, bin, "", qport, "--data-dir", dir)
		head := int64(len(prev))
		waitSeq(t, base, head+40)
		svc.terminate(t)
		if out := svc.stderr.String(); strings.Contains(out, "no intersection") || strings.Contains(out, "ERROR") || strings.Contains(out, `"level":"error"`) {
			t.Fatalf("run %d logged:\n%s", run+1, out)
		}
		log, cp := storeState(t, dir)
		_, ops, err := devnet.ReadChainFile(chainFile)
		if err != nil {
			t.Fatal(err)
		}
		// The chain's rollbacks, and those it made after the block the
		// previous run had committed last (a rollback the chain made then,
		// before or after the restart, may be the first record after the
		// restart; one to anywhere else is the restart's).
		after := -1
		for i, op := range ops {
			if op.Block != nil && prevTip != nil && op.Block.Header.Hash == prevTip.Hash {
				after = i
			}
		}
		rollbacks, fresh := map[chain.Point]bool{}, map[chain.Point]bool{}
		for i, op := range ops {
			if op.Rollback != nil {
				rollbacks[*op.Rollback] = true
				if i > after {
					fresh[*op.Rollback] = true
				}
			}
		}
		for i, r := range log {
			if r.Seq != int64(i+1) {
				t.Fatalf("run %d: seq %d at position %d", run+1, r.Seq, i)
			}
			if r.Kind == record.KindRolledBack && r.Seq > head {
				var p record.RolledBack
				if err := json.Unmarshal(r.Payload, &p); err != nil {
					t.Fatal(err)
				}
				if !rollbacks[p.To] {
					t.Fatalf("run %d: record %d rolls back to %s, which the devnet's chain never rolled back to (a restart rollback)", run+1, r.Seq, p.To)
				}
				if r.Seq == head+1 && !fresh[p.To] {
					t.Fatalf("run %d: the first record after the restart is a rollback to %s, which the chain made before the block the previous run committed last", run+1, p.To)
				}
			}
		}
		for i := range prev {
			a, b := prev[i], log[i]
			if a.RolledBackBy == nil && b.RolledBackBy != nil && *b.RolledBackBy > head {
				a.RolledBackBy = b.RolledBackBy // rolled back by a later devnet rollback (checked above)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("run %d: record %d changed across the restart:\n before %+v %s\n after  %+v %s", run+1, i+1, a, a.Payload, b, b.Payload)
			}
		}
		t.Logf("run %d: %d records (%d before), chain file of %d changes", run+1, len(log), len(prev), len(ops))
		prev = log
		if len(cp.Breadcrumbs) > 0 {
			prevTip = &cp.Breadcrumbs[0]
		}
	}
}

// TestRunDevnetRefusesAnotherNetwork: run --devnet serves magic 42 on the
// devnet's clock, so a network setting for another (magic, system start,
// slot length, genesis; flag, environment or file) is refused at once
// naming it and the devnet command, instead of being dropped; magic 42
// given explicitly is accepted.
func TestRunDevnetRefusesAnotherNetwork(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	file := filepath.Join(work, "config.yaml")
	if err := os.WriteFile(file, []byte("node:\n  networkMagic: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args, env []string
		names     string
	}{
		{[]string{"--network-magic", "1"}, nil, "node.networkMagic 1 (--network-magic)"},
		{nil, []string{"MARLOWE_RT_NETWORK_MAGIC=764824073"}, "node.networkMagic 764824073 (MARLOWE_RT_NETWORK_MAGIC)"},
		{[]string{"--config", file}, nil, "node.networkMagic 2 (the configuration file)"},
		{[]string{"--system-start", "2025-01-01T00:00:00Z", "--slot-length", "1s"}, nil, "node.systemStart (--system-start), node.slotLength (--slot-length)"},
		{[]string{"--shelley-genesis", file}, nil, "node.shelleyGenesis (--shelley-genesis)"},
	} {
		// The bound only ends a run that was not refused (it would serve
		// until stopped).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, append([]string{"run", "--devnet", "--query-port", "0", "--streaming-port", "0"}, c.args...)...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if !exitCode(err, 2) || !strings.Contains(string(out), "--devnet serves network magic 42") ||
			!strings.Contains(string(out), c.names) || !strings.Contains(string(out), "marlowe-follower devnet --socket PATH --network-magic N") {
			t.Errorf("run --devnet %v %v: %v\n%s", c.args, c.env, err, out)
		}
	}
	if entries, _ := os.ReadDir(work); len(entries) != 1 {
		t.Fatalf("a refused run left files: %v", entries)
	}
	qport := freePort(t)
	svc := startRunDevnetArgs(t, bin, work, qport, "--network-magic", "42")
	waitSeq(t, "http://127.0.0.1:"+strconv.Itoa(qport), 1)
	svc.terminate(t)
}

// TestRunDevnetWithoutDataDir: without a data directory everything is in a
// temporary directory, removed at exit, and no chain is kept.
func TestRunDevnetWithoutDataDir(t *testing.T) {
	bin := buildBinary(t)
	qport := freePort(t)
	work := t.TempDir()
	svc := startRunDevnetArgs(t, bin, work, qport)
	waitSeq(t, "http://127.0.0.1:"+strconv.Itoa(qport), 5)
	svc.terminate(t)
	out := svc.stderr.String()
	m := regexp.MustCompile(`devnet node: +(\S+)/node\.socket`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no devnet node line:\n%s", out)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Fatalf("the temporary directory %s is still there: %v", m[1], err)
	}
	if strings.Contains(out, "devnet chain:") {
		t.Fatalf("a chain was kept:\n%s", out)
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Fatalf("files left in the working directory: %v", entries)
	}
}

// TestRunDevnetSecondSignal: a second signal (a second Ctrl-C) ends run
// --devnet at once (status 130) and still removes its temporary directory
// (the deferred cleanups do not run on that path).
func TestRunDevnetSecondSignal(t *testing.T) {
	bin := buildBinary(t)
	qport := freePort(t)
	svc := startRunDevnetArgs(t, bin, t.TempDir(), qport)
	waitSeq(t, "http://127.0.0.1:"+strconv.Itoa(qport), 5)
	m := regexp.MustCompile(`devnet node: +(\S+)/node\.socket`).FindStringSubmatch(svc.stderr.String())
	if m == nil {
		t.Fatalf("no devnet node line:\n%s", svc.stderr)
	}
	// Both at once, so that the forced exit is taken, not the clean one:
	// the second is queued while the first starts the shutdown. (Two
	// SIGINTs sent at once may arrive as one; a SIGINT and a SIGTERM
	// cannot.)
	_ = svc.cmd.Process.Signal(syscall.SIGINT)
	_ = svc.cmd.Process.Signal(syscall.SIGTERM)
	err, out := svc.exit(t, time.Minute, "no exit a minute after SIGINT and SIGTERM")
	if !exitCode(err, 130) || !strings.Contains(out, "again: exiting now") {
		t.Fatalf("after SIGINT and SIGTERM: %v\n%s", err, out)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Fatalf("the temporary directory %s is still there: %v", m[1], err)
	}
}
