package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
)

// mainnetReplay writes a replay file of the real mainnet blocks of every
// era (testdata/mainnet-blocks) followed by generated Marlowe blocks on
// mainnet's clock that continue the real Conway block, and returns it with
// the tip.
func mainnetReplay(t *testing.T, generated uint64) (string, chain.BlockHeader) {
	t.Helper()
	var text strings.Builder
	var last chain.BlockHeader
	for _, e := range []struct {
		name string
		typ  block.Type
	}{{"byron", block.TypeByron}, {"shelley", block.TypeShelley}, {"allegra", block.TypeAllegra}, {"mary", block.TypeMary},
		{"alonzo", block.TypeAlonzo}, {"babbage", block.TypeBabbage}, {"conway", block.TypeConway}} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", e.name+"_block.hex"))
		if err != nil {
			t.Fatal(err)
		}
		hexText := strings.TrimSpace(string(data))
		fmt.Fprintf(&text, "# real mainnet %s block\n%s:%s\n", e.name, e.typ, hexText)
		if e.typ == block.TypeConway {
			raw := mustHex(t, hexText)
			b, err := block.DecodeHeader(e.typ, raw, block.Options{})
			if err != nil {
				t.Fatal(err)
			}
			last = b.Header
		}
	}
	clock, _ := devnet.NetworkClock(devnet.MagicMainnet)
	cfg := devnet.DefaultGeneratorConfig()
	cfg.Seed, cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 3, 0.5, 1500, 0
	cfg.UseClock(clock, clock.SlotStart(last.Slot))
	cfg.After = last
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []devnet.StoredBlock
	for g.Tip().BlockNo < last.BlockNo+generated {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, *op.Block)
	}
	text.WriteString("# generated Marlowe blocks on mainnet's clock\n")
	if err := devnet.WriteReplay(&text, blocks); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mainnet.replay")
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, g.Tip()
}

// TestDevnetReplayOnMainnetMagic replays real mainnet blocks (one per era)
// and Marlowe blocks continuing them on mainnet's clock with `devnet
// --replay --network-magic 764824073`, and follows them with `run
// --network-magic 764824073`: the handshake takes the real magic, the
// service reaches the real tip, the validity intervals in the history are
// the real POSIX times, and the semantics accept every step with them. A
// follower proposing another magic is refused.
func TestDevnetReplayOnMainnetMagic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	replay, tip := mainnetReplay(t, 600)
	socket := filepath.Join(t.TempDir(), "node.socket")
	node := exec.Command(bin, "devnet", "--socket", socket, "--replay", replay, "--network-magic", "764824073", "--log-level", "warn")
	nodeOut := &lockedBuffer{}
	node.Stderr = nodeOut
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = node.Process.Signal(syscall.SIGTERM)
		_ = node.Wait()
	}()
	waitSocket(t, socket)
	if !strings.Contains(nodeOut.String(), "--network-magic 764824073") {
		t.Fatalf("the devnet does not say how to follow it:\n%s", nodeOut)
	}

	dir := t.TempDir()
	qport := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(qport)
	run := exec.Command(bin, "run", "--node-socket", socket, "--network-magic", "764824073", "--data-dir", dir,
		"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
		"--log-level", "warn", "--progress-bar", "never")
	runOut := &lockedBuffer{}
	run.Stderr = runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	type point struct {
		Slot    uint64 `json:"slot"`
		BlockNo uint64 `json:"blockNo"`
		Hash    string `json:"hash"`
	}
	var status struct {
		Network       string `json:"network"`
		NetworkMagic  uint32 `json:"networkMagic"`
		Connected     bool   `json:"connected"`
		NodeTip       point  `json:"nodeTip"`
		FollowerPoint point  `json:"followerPoint"`
		HistorySeq    int64  `json:"historySeq"`
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		code, err := getJSON(base+"/status", &status)
		if err == nil && code == 200 && status.FollowerPoint.BlockNo == tip.BlockNo && status.HistorySeq > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the service did not reach block %d: %d %v %+v\n%s", tip.BlockNo, code, err, status, runOut)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status.Network != "mainnet" || status.NetworkMagic != devnet.MagicMainnet || !status.Connected || status.NodeTip.Hash != tip.Hash.String() {
		t.Fatalf("status %+v", status)
	}
	time.Sleep(500 * time.Millisecond) // the last batch commits
	stopRun(t, run, runOut)
	records, _ := storeState(t, dir)
	rep, err := historytest.CheckSemantics(records)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rejected) > 0 {
		t.Fatalf("apply_inputs_rejected: %v", rep.Rejected)
	}
	conway := chain.MainnetSlots.SlotStart(159835207)
	if rep.Steps < 100 || rep.FirstMillis < conway || rep.LastMillis > chain.MainnetSlots.SlotStart(tip.Slot)+24*3600_000 {
		t.Fatalf("%+v: intervals not on mainnet's clock after the Conway block (%d)", rep, conway)
	}
	// Every interval is the POSIX time of its slots on mainnet's clock.
	for _, r := range records {
		if r.Kind != record.KindInputsApplied {
			continue
		}
		var p record.InputsApplied
		if err := json.Unmarshal(r.Payload, &p); err != nil {
			t.Fatal(err)
		}
		iv := p.Interval
		if *iv.FromMillis != chain.MainnetSlots.SlotStart(*iv.InvalidBefore) || *iv.ToMillis != chain.MainnetSlots.SlotStart(*iv.InvalidHereafter)-1 ||
			r.Block.Slot < *iv.InvalidBefore || r.Block.Slot >= *iv.InvalidHereafter {
			t.Fatalf("record %d at slot %d: interval %+v", r.Seq, r.Block.Slot, iv)
		}
	}
	t.Logf("%d records: %d contracts, %d steps, %d closed; intervals %s to %s", len(records), rep.Created, rep.Steps, rep.Closed,
		time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339), time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))

	// A follower of another network is refused at the handshake.
	other := exec.Command(bin, "run", "--node-socket", socket, "--network-magic", "1", "--data-dir", t.TempDir(),
		"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
		"--min-backoff", "100ms", "--log-level", "warn", "--progress-bar", "never")
	otherOut := &lockedBuffer{}
	other.Stderr = otherOut
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	code, err := getJSON(base+"/status", &status)
	stopRun(t, other, otherOut)
	if err != nil || code != 200 || status.Connected || status.HistorySeq != 0 || status.FollowerPoint.BlockNo != 0 {
		t.Fatalf("a preprod follower on the mainnet devnet: %d %v %+v", code, err, status)
	}
	if !strings.Contains(otherOut.String(), "magic") {
		t.Fatalf("the refused follower does not say why:\n%s", otherOut)
	}
}

// waitSocket waits for a Unix socket to appear.
func waitSocket(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no socket at %s", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDevnetGeneratedOnNetworkClock generates chains with `devnet
// --network-magic` on preprod's built-in clock and on a network of its
// own (--system-start, --slot-length; the follower given the same) and
// follows them with `run`: the blocks are at that network's slots from
// the start time, and the semantics accept every step with the POSIX
// intervals the follower computes.
func TestDevnetGeneratedOnNetworkClock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	for _, c := range []struct {
		name    string
		network []string
		slots   chain.SlotConfig
		start   time.Time
	}{
		{"preprod", []string{"--network-magic", "1"}, chain.PreprodSlots, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"own network", []string{"--network-magic", "4242", "--system-start", "2024-06-01T00:00:00Z", "--slot-length", "200ms"},
			chain.SlotConfig{ZeroTimeMillis: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), SlotLengthMillis: 200},
			time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const blocks = 500
			socket := filepath.Join(t.TempDir(), "node.socket")
			args := append([]string{"devnet", "--socket", socket, "--blocks", strconv.Itoa(blocks), "--block-rate", "0",
				"--marlowe-share", "0.5", "--block-size", "1500", "--seed", "4", "--log-level", "warn"}, c.network...)
			node := exec.Command(bin, args...)
			nodeOut := &lockedBuffer{}
			node.Stderr = nodeOut
			if err := node.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = node.Process.Signal(syscall.SIGTERM)
				_ = node.Wait()
			}()
			waitSocket(t, socket)
			dir := t.TempDir()
			qport := freePort(t)
			run := exec.Command(bin, append([]string{"run", "--node-socket", socket, "--data-dir", dir,
				"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
				"--log-level", "warn", "--progress-bar", "never"}, c.network...)...)
			runOut := &lockedBuffer{}
			run.Stderr = runOut
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			var status struct {
				NodeTip       struct{ Slot, BlockNo uint64 } `json:"nodeTip"`
				FollowerPoint struct{ BlockNo uint64 }       `json:"followerPoint"`
			}
			deadline := time.Now().Add(90 * time.Second)
			for {
				code, err := getJSON("http://127.0.0.1:"+strconv.Itoa(qport)+"/status", &status)
				if err == nil && code == 200 && status.FollowerPoint.BlockNo == blocks {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the service did not reach block %d: %d %v %+v\n%s\n%s", blocks, code, err, status, runOut, nodeOut)
				}
				time.Sleep(100 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			stopRun(t, run, runOut)
			tipTime := time.UnixMilli(c.slots.SlotStart(status.NodeTip.Slot))
			if d := tipTime.Sub(c.start); d < 2*time.Hour || d > 4*time.Hour { // 500 blocks of 20 s
				t.Fatalf("tip at slot %d, %s after the start", status.NodeTip.Slot, d)
			}
			records, _ := storeState(t, dir)
			rep, err := historytest.CheckSemantics(records)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rejected) > 0 || rep.Steps < 100 || rep.FirstMillis < c.start.UnixMilli() || rep.LastMillis > tipTime.Add(24*time.Hour).UnixMilli() {
				t.Fatalf("%+v", rep)
			}
			t.Logf("tip at %s; %d contracts, %d steps, %d closed; intervals %s to %s", tipTime.UTC().Format(time.RFC3339),
				rep.Created, rep.Steps, rep.Closed, time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339),
				time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))
		})
	}
}
