package devnet

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/processor"
	"github.com/marlowe-follower/follower/history/record"
)

// TestNetworkClock: the devnet's clock for its own magic, the public
// networks' for theirs, none for another.
func TestNetworkClock(t *testing.T) {
	for magic, want := range map[uint32]chain.SlotConfig{
		MagicMainnet: chain.MainnetSlots, MagicPreprod: chain.PreprodSlots, MagicPreview: chain.PreviewSlots,
		NetworkMagic: {ZeroSlot: 0, ZeroTimeMillis: ZeroTimeMillis, SlotLengthMillis: SlotLengthMillis},
	} {
		if c, err := NetworkClock(magic); err != nil || c != want {
			t.Errorf("magic %d: clock %+v (%v), want %+v", magic, c, err, want)
		}
	}
	if _, err := NetworkClock(4242); !errors.Is(err, ErrNoClock) {
		t.Fatalf("magic 4242: %v", err)
	}
}

// preprodChain generates blocks on preprod's clock from 2025-01-01 and
// returns them with the generator.
func preprodChain(t *testing.T, cfg GeneratorConfig, blocks uint64) (*Generator, []StoredBlock) {
	t.Helper()
	clock, _ := NetworkClock(MagicPreprod)
	cfg.UseClock(clock, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	ops, g := changes(t, cfg, blocks)
	var out []StoredBlock
	for _, op := range ops {
		if op.Rollback != nil {
			for len(out) > 0 && out[len(out)-1].Header.Slot > op.Rollback.Slot {
				out = out[:len(out)-1]
			}
			continue
		}
		out = append(out, *op.Block)
	}
	return g, out
}

// follow runs blocks through the classifier and the processor with the
// given slot configuration, as the follower does.
func followRecords(t *testing.T, blocks []StoredBlock, slots chain.SlotConfig) []record.Record {
	t.Helper()
	c := classify.New(classify.Options{})
	p := processor.New(slots, zap.NewNop(), nil)
	var records []record.Record
	for _, b := range blocks {
		ev, err := c.RollForward(b.Type, b.Raw, chain.Tip{})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Process(ev)
		for _, r := range st.Forward.Records {
			r.Seq = int64(len(records) + 1)
			records = append(records, r)
		}
	}
	return records
}

// TestGeneratedChainOnPreprodClock generates a chain at preprod's slots:
// blocks come every 20 s on average from the chosen start, every Marlowe
// transaction is valid at the slot of its block, and followed with
// preprod's slot configuration the semantics accept every step with the
// real POSIX intervals. Followed with the devnet's clock instead (what
// happened before devnets had a network), they refuse most of them.
func TestGeneratedChainOnPreprodClock(t *testing.T) {
	cfg := DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery, cfg.MaxRollbackDepth = 0.5, 1500, 20, 3
	g, blocks := preprodChain(t, cfg, 2500)
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	first, last := blocks[0].Header.Slot, blocks[len(blocks)-1].Header.Slot
	if chain.PreprodSlots.SlotStart(first) < start || chain.PreprodSlots.SlotStart(first) > start+120_000 {
		t.Fatalf("first block at slot %d (%s)", first, time.UnixMilli(chain.PreprodSlots.SlotStart(first)).UTC())
	}
	if mean := float64(last-first) / float64(len(blocks)-1); mean < 15 || mean > 25 {
		t.Fatalf("%.1f s between blocks on average", mean)
	}
	steps := 0
	for _, b := range blocks {
		d, err := block.DecodeBlock(b.Type, b.Raw, block.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tx := range d.Txs {
			if len(tx.Redeemers) == 0 || tx.TTL == nil {
				continue
			}
			steps++
			if tx.ValidityStart == nil || *tx.ValidityStart > b.Header.Slot || b.Header.Slot >= *tx.TTL {
				t.Fatalf("tx %s in block %d at slot %d is valid in slots [%v, %d)", tx.ID, b.Header.BlockNo, b.Header.Slot, tx.ValidityStart, *tx.TTL)
			}
		}
	}
	records := followRecords(t, blocks, chain.PreprodSlots)
	rep, err := historytest.CheckSemantics(records)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blocks over %s: %d contracts, %d steps (%d closed), %d abandoned; %d transactions with a validity interval; intervals from %s to %s",
		len(blocks), time.Duration(last-first)*time.Second, rep.Created, rep.Steps, rep.Closed, g.Abandoned(), steps,
		time.UnixMilli(rep.FirstMillis).UTC().Format(time.RFC3339), time.UnixMilli(rep.LastMillis).UTC().Format(time.RFC3339))
	if len(rep.Rejected) > 0 {
		t.Fatalf("apply_inputs_rejected: %v", rep.Rejected)
	}
	if rep.Created < 100 || rep.Steps < 200 || rep.Closed < 40 {
		t.Fatalf("too little activity: %+v", rep)
	}
	if rep.FirstMillis < start || rep.LastMillis > chain.PreprodSlots.SlotStart(last)+24*3600_000 {
		t.Fatalf("intervals from %d to %d, chain from %d", rep.FirstMillis, rep.LastMillis, start)
	}
	if g.Abandoned()*20 > rep.Created {
		t.Fatalf("%d of %d contracts abandoned", g.Abandoned(), rep.Created)
	}
	// Address payouts are found with the semantics, so they show the clock
	// is right too.
	payouts := 0
	for _, r := range records {
		if r.Kind == record.KindInputsApplied && strings.Contains(string(r.Payload), `"address":"addr`) {
			payouts++
		}
	}
	if payouts == 0 {
		t.Fatal("no address payout found")
	}

	// The same chain with the devnet's clock: 1969 intervals.
	wrong := followRecords(t, blocks, chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: ZeroTimeMillis, SlotLengthMillis: SlotLengthMillis})
	if _, err := historytest.CheckSemantics(wrong); err == nil {
		t.Fatal("the semantics accept a preprod chain read with the devnet's clock")
	} else {
		t.Logf("with the devnet's clock: %v", err)
	}
}

// TestScheduledLifecycles: every lifecycle scheduled on preprod's clock
// keeps its steps in order inside their windows (only nft-airdrop, whose
// second step compares exact interval times, is cut short), and at the
// devnet command's Marlowe share no contract misses its window.
func TestScheduledLifecycles(t *testing.T) {
	clock, _ := NetworkClock(MagicPreprod)
	lcs, err := Lifecycles(marlowe.Testnet)
	if err != nil {
		t.Fatal(err)
	}
	const created, width = 80_000_000, 1000
	var cut []string
	for i := range lcs {
		s := scheduleLifecycle(&lcs[i], clock, created, width)
		if len(s.Steps) != len(lcs[i].Steps) {
			cut = append(cut, s.Name)
		}
		prev := uint64(created)
		for k, w := range s.windows {
			start, ttl := intervalSlots(clock, s.Steps[k].Input.Interval)
			if w.notBefore < prev || w.notBefore > w.deadline || start != w.notBefore || ttl <= w.deadline {
				t.Fatalf("%s step %d: window %+v after %d, validity [%d, %d)", s.Name, k, w, prev, start, ttl)
			}
			prev = w.notBefore
		}
	}
	if strings.Join(cut, ",") != "nft-airdrop" {
		t.Fatalf("lifecycles cut short: %v", cut)
	}
	cfg := DefaultGeneratorConfig()
	cfg.MeanBlockSize = 500
	g, _ := preprodChain(t, cfg, 5000)
	creates := 0
	for _, a := range g.Activity() {
		if a.Kind == ActivityCreate {
			creates++
		}
	}
	t.Logf("Marlowe share %.2f: windows of %d slots; %d contracts in 5,000 blocks, %d abandoned", cfg.MarloweShare, g.window, creates, g.Abandoned())
	if creates < 100 || g.Abandoned() > 0 {
		t.Fatalf("%d contracts, %d abandoned", creates, g.Abandoned())
	}
}
