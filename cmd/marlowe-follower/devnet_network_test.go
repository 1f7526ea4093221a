package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
)

// replayFile writes a replay file of Marlowe blocks generated on the clock
// of a network (magic) and returns it with the tip. With real, the real
// mainnet blocks of every era (testdata/mainnet-blocks) come first and
// the generated blocks continue the real Conway block; else they begin at
// 2025-01-01.
func replayFile(t *testing.T, magic uint32, real bool, generated uint64) (string, chain.BlockHeader) {
	t.Helper()
	var text strings.Builder
	var last chain.BlockHeader
	clock, err := devnet.NetworkClock(magic)
	if err != nil {
		t.Fatal(err)
	}
	cfg := devnet.DefaultGeneratorConfig()
	cfg.Seed, cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 3, 0.5, 1500, 0
	cfg.Mainnet = magic == devnet.MagicMainnet
	cfg.UseClock(clock, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	if real {
		for _, e := range []struct {
			name string
			typ  block.Type
		}{{"byron", block.TypeByron}, {"shelley", block.TypeShelley}, {"allegra", block.TypeAllegra}, {"mary", block.TypeMary},
			{"alonzo", block.TypeAlonzo}, {"babbage", block.TypeBabbage}, {"conway", block.TypeConway}} {
			data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", e.name+"_block.hex"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&text, "# real mainnet %s block\n%s:%s\n", e.name, e.typ, strings.TrimSpace(string(data)))
		}
		// The generated blocks continue the last real one (Conway), its
		// header read back as the devnet reads the file.
		realBlocks, err := devnet.ReadReplay(strings.NewReader(text.String()), devnet.ReplayOptions{
			Header: func(typ block.Type, raw []byte) (chain.BlockHeader, error) {
				b, err := block.DecodeHeader(typ, raw, block.Options{})
				return b.Header, err
			}})
		if err != nil {
			t.Fatal(err)
		}
		last = realBlocks[len(realBlocks)-1].Header
		cfg.UseClock(clock, clock.SlotStart(last.Slot))
		cfg.After = last
	}
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []devnet.StoredBlock
	for g.Tip().BlockNo < cfg.After.BlockNo+generated {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, *op.Block)
	}
	fmt.Fprintf(&text, "# generated Marlowe blocks on the clock of network magic %d\n", magic)
	if err := devnet.WriteReplay(&text, blocks); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "network.replay")
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, g.Tip()
}

// TestDevnetReplayOnNetworkMagic replays blocks with `devnet --replay
// --network-magic N` and follows them with `run --network-magic N`: on
// mainnet (764824073) the real mainnet blocks (one per era) and Marlowe
// blocks continuing them on mainnet's clock; on preprod (1) Marlowe blocks
// at preprod's slots (the repository holds no real preprod block). The
// handshake takes the network's magic, the service reaches the replay's
// tip, the validity intervals in the history are the real POSIX times of
// their slots on that network's clock, and the semantics accept every step
// with them. A follower proposing another magic is refused.
func TestDevnetReplayOnNetworkMagic(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		name    string
		magic   uint32
		slots   chain.SlotConfig
		real    bool
		from    int64  // intervals on or after this POSIX time (ms)
		another string // a magic the node refuses
	}{
		{"mainnet", devnet.MagicMainnet, chain.MainnetSlots, true, chain.MainnetSlots.SlotStart(159835207), "1"},
		{"preprod", devnet.MagicPreprod, chain.PreprodSlots, false, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), "764824073"},
	} {
		t.Run(c.name, func(t *testing.T) {
			magic := strconv.FormatUint(uint64(c.magic), 10)
			replay, tip := replayFile(t, c.magic, c.real, 600)
			socket := filepath.Join(t.TempDir(), "node.socket")
			nodeOut := startDevnetProc(t, bin, socket, "devnet", "--socket", socket, "--replay", replay, "--network-magic", magic, "--log-level", "warn")
			// (It may print its banner just after the socket is there.)
			waitUntil(t, 30*time.Second, "the devnet saying how to follow it (--network-magic "+magic+")", func() bool {
				return strings.Contains(nodeOut.String(), "--network-magic "+magic)
			})

			dir := t.TempDir()
			qport := freePort(t)
			base := "http://127.0.0.1:" + strconv.Itoa(qport)
			run := startChild(t, bin, qport, "run", "--node-socket", socket, "--network-magic", magic, "--data-dir", dir,
				"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
				"--log-level", "warn", "--progress-bar", "never")
			type point struct {
				Slot    uint64 `json:"slot"`
				BlockNo uint64 `json:"blockNo"`
				Hash    string `json:"hash"`
			}
			type netStatus struct {
				Network        string `json:"network"`
				NetworkMagic   uint32 `json:"networkMagic"`
				Connected      bool   `json:"connected"`
				NodeTip        point  `json:"nodeTip"`
				CommittedPoint point  `json:"committedPoint"`
				HistorySeq     int64  `json:"historySeq"`
			}
			var status netStatus
			checkFor(t, 90*time.Second, func() error {
				code, err := getJSON(base+"/status", &status)
				if err == nil && code == 200 && status.CommittedPoint.BlockNo == tip.BlockNo && status.HistorySeq > 0 {
					return nil
				}
				return fmt.Errorf("the service did not commit block %d: %d %v %+v\n%s", tip.BlockNo, code, err, status, run.stderr)
			})
			if status.Network != c.name || status.NetworkMagic != c.magic || !status.Connected || status.NodeTip.Hash != tip.Hash.String() {
				t.Fatalf("status %+v", status)
			}
			run.terminate(t)
			records, _ := storeState(t, dir)
			rep, err := historytest.CheckSemantics(records)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rejected) > 0 {
				t.Fatalf("apply_inputs_rejected: %v", rep.Rejected)
			}
			if rep.Steps < 100 || rep.FirstMillis < c.from || rep.LastMillis > c.slots.SlotStart(tip.Slot)+24*3600_000 {
				t.Fatalf("%+v: intervals not on the network's clock after %s", rep, time.UnixMilli(c.from).UTC())
			}
			// Every interval is the POSIX time of its slots on the network's clock.
			for _, r := range records {
				if r.Kind != record.KindInputsApplied {
					continue
				}
				var p record.InputsApplied
				if err := json.Unmarshal(r.Payload, &p); err != nil {
					t.Fatal(err)
				}
				iv := p.Interval
				if *iv.FromMillis != c.slots.SlotStart(*iv.InvalidBefore) || *iv.ToMillis != c.slots.SlotStart(*iv.InvalidHereafter)-1 ||
					r.Block.Slot < *iv.InvalidBefore || r.Block.Slot >= *iv.InvalidHereafter {
					t.Fatalf("record %d at slot %d: interval %+v", r.Seq, r.Block.Slot, iv)
				}
			}
			t.Logf("%d records: %d contracts, %d steps, %d closed; intervals %s to %s", len(records), rep.Created, rep.Steps, rep.Closed,
				time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339), time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))

			// A follower of another network is refused at the handshake.
			other := startChild(t, bin, qport, "run", "--node-socket", socket, "--network-magic", c.another, "--data-dir", t.TempDir(),
				"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
				"--min-backoff", "100ms", "--log-level", "warn", "--progress-bar", "never")
			cause := "network magic " + c.another + " does not match the node's (" + magic
			checkFor(t, 30*time.Second, func() error {
				if !strings.Contains(other.stderr.String(), cause) {
					return fmt.Errorf("the refused follower does not say why:\n%s", other.stderr)
				}
				return nil
			})
			// The refusal can be logged before the query port listens (the
			// pipeline starts first): wait for /status to answer.
			status = netStatus{}
			checkFor(t, 30*time.Second, func() error {
				if code, err := getJSON(base+"/status", &status); err != nil || code != 200 {
					return fmt.Errorf("GET /status of the refused follower: %d %v", code, err)
				}
				return nil
			})
			other.terminate(t)
			if status.Connected || status.HistorySeq != 0 || status.CommittedPoint.BlockNo != 0 {
				t.Fatalf("a follower of magic %s on the devnet of magic %s: %+v", c.another, magic, status)
			}
		})
	}
}

// waitSocket waits for a Unix socket to appear.
func waitSocket(t *testing.T, path string) {
	t.Helper()
	waitUntil(t, 30*time.Second, "a socket at "+path, func() bool {
		fi, err := os.Stat(path)
		return err == nil && fi.Mode()&os.ModeSocket != 0
	})
}

// TestDevnetGeneratedOnNetworkClock generates chains with `devnet
// --network-magic` on preprod's built-in clock (from now, the default)
// and on a network of its own (--system-start, --slot-length, from the
// system start; the follower given the same) and follows them with `run`:
// the blocks are at that network's slots from the start time, the
// semantics accept every step with the POSIX intervals the follower
// computes, and the address parties are testnet addresses.
func TestDevnetGeneratedOnNetworkClock(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct {
		name    string
		network []string
		slots   chain.SlotConfig
		start   time.Time
	}{
		{"preprod", []string{"--network-magic", "1"}, chain.PreprodSlots, time.Now().Add(-time.Second)},
		{"own network", []string{"--network-magic", "4242", "--system-start", "2024-06-01T00:00:00Z", "--slot-length", "200ms"},
			chain.SlotConfig{ZeroTimeMillis: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), SlotLengthMillis: 200},
			time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			const blocks = 500
			socket := filepath.Join(t.TempDir(), "node.socket")
			args := append([]string{"devnet", "--socket", socket, "--blocks", strconv.Itoa(blocks), "--block-rate", "0",
				"--marlowe-share", "0.5", "--block-size", "1500", "--seed", "4", "--log-level", "warn"}, c.network...)
			nodeOut := startDevnetProc(t, bin, socket, args...)
			dir := t.TempDir()
			qport := freePort(t)
			run := startChild(t, bin, qport, append([]string{"run", "--node-socket", socket, "--data-dir", dir,
				"--query-port", strconv.Itoa(qport), "--streaming-port", "0", "--query-host", "127.0.0.1",
				"--log-level", "warn", "--progress-bar", "never"}, c.network...)...)
			var status struct {
				NodeTip        struct{ Slot, BlockNo uint64 } `json:"nodeTip"`
				CommittedPoint struct{ BlockNo uint64 }       `json:"committedPoint"`
			}
			checkFor(t, 90*time.Second, func() error {
				code, err := getJSON("http://127.0.0.1:"+strconv.Itoa(qport)+"/status", &status)
				if err == nil && code == 200 && status.CommittedPoint.BlockNo == blocks {
					return nil
				}
				return fmt.Errorf("the service did not commit block %d: %d %v %+v\n%s\n%s", blocks, code, err, status, run.stderr, nodeOut)
			})
			run.terminate(t)
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
			mainnetParty, testnetParty := regexp.MustCompile(`"address":\s*"addr1`), regexp.MustCompile(`"address":\s*"addr_test1`)
			testnetParties := 0
			for _, r := range records {
				if r.Kind != record.KindContractCreated {
					continue
				}
				if testnetParty.Match(r.Payload) {
					testnetParties++
				}
				if mainnetParty.Match(r.Payload) {
					t.Fatalf("record %d: a mainnet address party on a testnet chain: %s", r.Seq, r.Payload)
				}
			}
			if testnetParties == 0 {
				t.Fatal("no contract with an address party")
			}
			t.Logf("tip at %s; %d contracts, %d steps, %d closed; intervals %s to %s", tipTime.UTC().Format(time.RFC3339),
				rep.Created, rep.Steps, rep.Closed, time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339),
				time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))
		})
	}
}

// startDevnetProc runs the binary with args (a devnet command serving on
// socket) until the test ends, when it is sent SIGTERM; it returns once
// the socket is there, with what the node writes on stderr.
func startDevnetProc(t *testing.T, bin, socket string, args ...string) *lockedBuffer {
	t.Helper()
	node := startCmd(t, "the devnet", exec.Command(bin, args...), false)
	waitSocket(t, socket)
	return node.stderr
}
