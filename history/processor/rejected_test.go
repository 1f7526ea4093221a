package processor

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// TestRejectedOutputsLoggedOnceAtInfoAndCounted: the devnet's malformed
// Marlowe outputs are logged at INFO once each, never as warnings, and
// counted by reason.
func TestRejectedOutputsLoggedOnceAtInfoAndCounted(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	p := New(devnetSlots, zap.New(core), nil)
	rejected := map[chain.TxOutRef]bool{}
	var replay []*classify.RollForward
	classifyGenerated(t, devnet.DefaultGeneratorConfig(), 1500, func(ev *classify.RollForward) {
		for _, tx := range ev.Txs {
			for _, r := range tx.Rejected {
				if r.ContractID == (chain.TxOutRef{}) && tx.IsValid {
					rejected[r.Ref] = true
					replay = append(replay, ev)
				}
			}
		}
		p.Process(ev)
	})
	if len(rejected) == 0 {
		t.Fatal("the devnet made no output that cannot be followed")
	}
	// The same outputs again (a rollback and the same blocks once more):
	// counted and logged once.
	for _, ev := range replay {
		p.Process(ev)
	}
	logged := map[string]int{}
	for _, e := range logs.All() {
		if e.Level > zapcore.InfoLevel {
			t.Errorf("logged %s: %s %v", e.Level, e.Message, e.ContextMap())
		}
		if out, ok := e.ContextMap()["output"].(string); ok && e.Level == zapcore.InfoLevel {
			logged[out]++
		}
	}
	for ref := range rejected {
		if logged[ref.String()] != 1 {
			t.Errorf("output %s logged %d times", ref, logged[ref.String()])
		}
	}
	var total uint64
	counts := p.RejectedOutputs()
	for reason, n := range counts {
		if !contains(RejectReasons, reason) {
			t.Errorf("reason %q is not one of RejectReasons", reason)
		}
		total += n
	}
	if total != uint64(len(rejected)) || counts[RejectOther] != 0 {
		t.Fatalf("counts %v for %d outputs", counts, len(rejected))
	}
	t.Logf("%d outputs: %v", len(rejected), counts)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestRejectReason(t *testing.T) {
	for text, want := range map[string]string{
		"the output has no datum":                                                     RejectDatumMissing,
		"datum hash ab is not in the transaction's witness set":                       RejectDatumMissing,
		"datum is not MarloweData: MarloweData constructor 0 takes 3 fields, found 1": RejectDatumNotMarloweData,
		"plutus data CBOR at byte 3: unexpected end":                                  RejectDatumUndecodable,
		"something new": RejectOther,
	} {
		if got := RejectReason(text); got != want {
			t.Errorf("%q: %s, want %s", text, got, want)
		}
	}
}
