package devnet

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/historytest"
)

// wallClockChain makes blocks of a chain on the wall clock at rate blocks
// a second from start, each at the slot of the time it would be made (with
// up to 40% of a gap of lateness, as a loaded machine's timer gives), and
// returns the generator, the blocks of the current chain and every change
// with the slot it was asked for.
func wallClockChain(t *testing.T, cfg GeneratorConfig, start time.Time, rate float64, blocks uint64) (*Generator, []StoredBlock, []Op, []uint64) {
	t.Helper()
	cfg.UseWallClock(DevnetClock, start, rate)
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	late := rand.New(rand.NewPCG(3, 4))
	gap := time.Duration(float64(time.Second) / rate)
	var out []StoredBlock
	var ops []Op
	var slots []uint64
	for k := 0; g.Tip().BlockNo < blocks; k++ {
		at := start.Add(time.Duration(k+1)*gap + time.Duration(late.Float64()*0.4*float64(gap)))
		slot := DevnetClock.SlotAt(at.UnixMilli())
		op, err := g.NextAt(slot)
		if err != nil {
			t.Fatal(err)
		}
		ops, slots = append(ops, op), append(slots, slot)
		if op.Rollback != nil {
			for len(out) > 0 && out[len(out)-1].Header.BlockNo > g.Tip().BlockNo {
				out = out[:len(out)-1]
			}
			continue
		}
		if op.Block.Header.Slot != slot {
			t.Fatalf("block %d at slot %d, asked for %d", op.Block.Header.BlockNo, op.Block.Header.Slot, slot)
		}
		out = append(out, *op.Block)
	}
	return g, out, ops, slots
}

// TestWallClockChain: a chain on the wall clock (run --devnet's settings,
// 2 blocks a second) has its blocks at the times they are made, every
// Marlowe transaction valid at its block's slot, the semantics accepting
// every step with the devnet's clock, and at its tip the contracts in
// progress wait in a When whose deadline is minutes ahead. The same seed
// and the same slots give the same chain.
func TestWallClockChain(t *testing.T) {
	cfg := DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize = 0.3, 500
	start := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	const blocks = 2400 // 20 minutes
	g, chainBlocks, ops, slots := wallClockChain(t, cfg, start, 2, blocks)
	tip := chainBlocks[len(chainBlocks)-1].Header
	tipTime := time.UnixMilli(DevnetClock.SlotStart(tip.Slot))
	if d := tipTime.Sub(start); d < 20*time.Minute || d > 30*time.Minute {
		t.Fatalf("tip at %s, %s after the start", tipTime, d)
	}
	for _, b := range chainBlocks {
		d, err := block.DecodeBlock(b.Type, b.Raw, block.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range d.Txs {
			if len(tx.Redeemers) > 0 && tx.TTL != nil && (tx.ValidityStart == nil || *tx.ValidityStart > b.Header.Slot || b.Header.Slot >= *tx.TTL) {
				t.Fatalf("tx %s at slot %d is valid in [%v, %d)", tx.ID, b.Header.Slot, tx.ValidityStart, *tx.TTL)
			}
		}
	}
	records := followRecords(t, chainBlocks, DevnetClock)
	rep, err := historytest.CheckSemantics(records)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blocks over %s: %d contracts, %d steps (%d closed), %d abandoned; windows of %s; intervals %s to %s",
		len(chainBlocks), tipTime.Sub(start).Round(time.Second), rep.Created, rep.Steps, rep.Closed, g.Abandoned(),
		time.Duration(g.window)*time.Millisecond, time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339),
		time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))
	if len(rep.Rejected) > 0 {
		t.Fatalf("apply_inputs_rejected: %v", rep.Rejected)
	}
	if rep.Created < 50 || rep.Steps < 100 || rep.Closed < 20 || rep.FirstMillis < start.UnixMilli() || rep.LastMillis > tipTime.Add(time.Hour).UnixMilli() {
		t.Fatalf("%+v", rep)
	}
	if g.Abandoned()*10 > rep.Created {
		t.Fatalf("%d of %d contracts abandoned", g.Abandoned(), rep.Created)
	}
	// At the tip every contract in progress whose next step takes inputs
	// (not a timeout's) waits in a When whose timeout is ahead, by
	// minutes: /next at now offers them.
	ahead := 0
	for _, gc := range g.st.contracts {
		c := gc.lc.Contract
		if gc.step > 0 {
			c = gc.lc.Steps[gc.step-1].Contract
		}
		w, ok := c.(*marlowe.When)
		if !ok || len(gc.lc.Steps[gc.step].Input.Inputs) == 0 {
			continue
		}
		d := time.UnixMilli(w.Timeout.Int64()).Sub(tipTime)
		if d <= 0 || d > 30*time.Minute {
			t.Errorf("a contract in progress (%s, step %d) times out %s after the tip", gc.lc.Name, gc.step, d)
		}
		ahead++
	}
	t.Logf("%d contracts in progress, %d waiting for inputs before a deadline ahead", len(g.st.contracts), ahead)
	if ahead < 5 {
		t.Fatalf("%d contracts in progress wait for inputs in a When at the tip", ahead)
	}

	// The same seed and slots make the same chain.
	again, err := NewGenerator(g.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		got, err := again.NextAt(slots[i])
		if err != nil || !sameOp(got, op) {
			t.Fatalf("change %d differs when made again: %v", i, err)
		}
	}
	if _, err := again.Next(); err == nil {
		t.Fatal("Next on a chain on the wall clock: no error")
	}
}

// TestWallClockChainFileRestart: a devnet on the wall clock started again
// on its chain file (with the stored chain's clock, as run --devnet takes
// it) serves the stored chain and replays its generator over it: it makes
// exactly the stored changes (no "does not make the stored chain"), and
// goes on at the time of the restart with new blocks, no transaction made
// twice.
func TestWallClockChainFileRestart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "devnet.chain")
	cfg := chainFileConfig()
	cfg.UseWallClock(DevnetClock, time.Now(), 200)
	start := func(blocks uint64, gen GeneratorConfig, log *zap.Logger) *Devnet {
		dn, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), Generator: gen, Blocks: blocks, BlockRate: 200,
			Journal: true, ChainFile: file, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dn.Close() })
		<-dn.Done()
		if err := dn.Err(); err != nil {
			t.Fatal(err)
		}
		return dn
	}
	a := start(120, cfg, nil)
	first := journalOps(a.journal)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	meta, err := ReadChainMeta(file)
	if err != nil {
		t.Fatal(err)
	}
	again := chainFileConfig()
	again.KeepClockOf(meta.Generator) // the start and the gap of the first run
	core, logs := observer.New(zapcore.InfoLevel)
	b := start(240, again, zap.New(core))
	got := journalOps(b.journal)
	if len(got) <= len(first) || !sameOps(got[:len(first)], first) {
		t.Fatal("the restarted devnet does not serve the stored chain")
	}
	if n := logs.FilterMessage("generator caught up with the stored chain").Len(); n != 1 {
		t.Fatalf("the generator did not replay the stored chain: %v", logs.All())
	}
	for _, op := range got[len(first):] {
		if op.Block != nil && DevnetClock.SlotStart(op.Block.Header.Slot) < restarted.UnixMilli() {
			t.Fatalf("block %d made after the restart at %s, before it", op.Block.Header.BlockNo,
				time.UnixMilli(DevnetClock.SlotStart(op.Block.Header.Slot)).UTC())
		}
	}
	ids := map[string]bool{}
	for _, a := range b.Activity() {
		if ids[a.TxID.String()] {
			t.Fatalf("tx %s made twice", a.TxID)
		}
		ids[a.TxID.String()] = true
	}
}

// TestLifecyclesOnNetwork: the lifecycles' address parties are all of the
// chain's network (the reference traces have both), with the same
// credentials, no two parties of a lifecycle made one, and the semantics
// give every step's recorded result from the moved parties.
func TestLifecyclesOnNetwork(t *testing.T) {
	var raws []json.RawMessage
	if err := json.Unmarshal(lifecyclesJSON, &raws); err != nil {
		t.Fatal(err)
	}
	address := regexp.MustCompile(`"address":"(addr[a-z_0-9]*)"`)
	prefix := map[marlowe.Network]*regexp.Regexp{
		marlowe.Testnet: regexp.MustCompile(`"address":"addr_test1`), marlowe.Mainnet: regexp.MustCompile(`"address":"addr1`)}
	for _, network := range []marlowe.Network{marlowe.Testnet, marlowe.Mainnet} {
		lcs, err := Lifecycles(network)
		if err != nil {
			t.Fatal(err)
		}
		for i := range lcs {
			lc := &lcs[i]
			text := lifecycleJSON(t, lc)
			var parties []string
			for _, m := range address.FindAllStringSubmatch(text, -1) {
				pa, err := marlowe.ParsePartyAddress(m[1])
				if err != nil || pa.Network != network {
					t.Fatalf("%s on network %d: party %s (%v)", lc.Name, network, m[1], err)
				}
				parties = append(parties, m[1])
			}
			if i < len(raws) {
				var was []string
				for _, m := range address.FindAllStringSubmatch(string(compact(t, raws[i])), -1) {
					was = append(was, m[1])
				}
				if distinct(was) != distinct(parties) {
					t.Fatalf("%s: %d distinct parties, %d in the trace", lc.Name, distinct(parties), distinct(was))
				}
			}
			if other := prefix[1-network]; other.MatchString(text) {
				t.Fatalf("%s on network %d has a party of the other network", lc.Name, network)
			}
			st, c := lc.State, lc.Contract
			for k, s := range lc.Steps {
				res, err := marlowe.ComputeTransaction(s.Input, st, c)
				if err != nil {
					t.Fatalf("%s step %d: %v", lc.Name, k, err)
				}
				gotC, _ := marlowe.ContractJSON(res.Contract)
				wantC, _ := marlowe.ContractJSON(s.Contract)
				if string(gotC) != string(wantC) || len(res.Payments) != len(s.Payments) {
					t.Fatalf("%s step %d: another result with the moved parties", lc.Name, k)
				}
				st, c = res.State, res.Contract
			}
		}
	}
}

func lifecycleJSON(t *testing.T, lc *Lifecycle) string {
	t.Helper()
	c, err := marlowe.ContractJSON(lc.Contract)
	if err != nil {
		t.Fatal(err)
	}
	st, err := json.Marshal(&lc.State)
	if err != nil {
		t.Fatal(err)
	}
	out := string(c) + string(st)
	for k := range lc.Steps {
		in, err := json.Marshal(&lc.Steps[k].Input)
		if err != nil {
			t.Fatal(err)
		}
		out += string(in)
	}
	return out
}

func compact(t *testing.T, raw json.RawMessage) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func distinct(s []string) int {
	s = slices.Clone(s)
	slices.Sort(s)
	return len(slices.Compact(s))
}
