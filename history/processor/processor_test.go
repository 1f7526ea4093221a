package processor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// devnetSlots is the devnet's slot configuration.
var devnetSlots = chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}

// generatedRecords follows a generated chain (without rollbacks) through the
// classifier and the processor; outputs holds the outputs of the Marlowe
// transactions.
func generatedRecords(t *testing.T, cfg devnet.GeneratorConfig, blocks uint64) (records []record.Record, acts []devnet.Activity, logs *observer.ObservedLogs, outputs map[chain.TxOutRef]block.TxOut) {
	t.Helper()
	core, logs := observer.New(zap.WarnLevel)
	p := New(devnetSlots, zap.New(core), nil)
	outputs = map[chain.TxOutRef]block.TxOut{}
	g := classifyGenerated(t, cfg, blocks, func(ev *classify.RollForward) {
		for _, tx := range ev.Txs {
			for i, o := range tx.Outputs {
				outputs[chain.TxOutRef{TxID: tx.ID, Index: uint32(i)}] = o
			}
		}
		st := p.Process(ev)
		records = append(records, st.Forward.Records...)
	})
	return records, g.Activity(), logs, outputs
}

// classifyGenerated runs a devnet generator of cfg up to block number
// blocks, classifies each block and hands it to fn (rollbacks are passed
// over); it returns the generator.
func classifyGenerated(tb testing.TB, cfg devnet.GeneratorConfig, blocks uint64, fn func(*classify.RollForward)) *devnet.Generator {
	tb.Helper()
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	c := classify.New(classify.Options{})
	for g.Tip().BlockNo < blocks {
		op, err := g.Next()
		if err != nil {
			tb.Fatal(err)
		}
		if op.Block == nil {
			continue
		}
		ev, err := c.RollForward(op.Block.Type, op.Block.Raw, chain.Tip{})
		if err != nil {
			tb.Fatal(err)
		}
		fn(ev)
	}
	return g
}

func TestProcessorRecordsGeneratedActivity(t *testing.T) {
	cfg := devnet.DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery = 0.6, 2000, 0
	records, acts, logs, outputs := generatedRecords(t, cfg, 1200)

	byTx := map[chain.Hash32][]record.Record{}
	for _, r := range records {
		byTx[r.TxID] = append(byTx[r.TxID], r)
	}
	counts := map[record.Kind]int{}
	addressPayouts, semanticsChecked := 0, 0
	// Payouts carrying several payments (to a role; to an address, with
	// tokens: the devnet's merged-payments lifecycle); address payouts
	// holding more than their payments; other outputs to a payout's address
	// (the payee's change).
	mergedRoles, mergedAddresses, mergedWithTokens, withChange, changeBeside := 0, 0, 0, 0, 0
	for _, a := range acts {
		rs := byTx[a.TxID]
		switch a.Kind {
		case devnet.ActivityCreate:
			r := findKind(rs, record.KindContractCreated)
			if r == nil || *r.Contract != *a.Contract {
				t.Fatalf("create %s: no contract_created record", a.TxID)
			}
			var p record.ContractCreated
			mustUnmarshal(t, r.Payload, &p)
			if p.Version != a.Version || p.ContractID != *a.Contract {
				t.Fatalf("create %s: payload %+v", a.TxID, p)
			}
			if len(a.Tags) != len(p.Tags) {
				t.Fatalf("create %s: tags %v, want %v", a.TxID, p.Tags, a.Tags)
			}
			for tag := range a.Tags {
				if _, ok := p.Tags[tag]; !ok {
					t.Fatalf("create %s: tag %q missing", a.TxID, tag)
				}
			}
			if _, err := marlowe.ParseMarloweDataJSON(p.Datum); err != nil {
				t.Fatalf("create %s: datum: %v", a.TxID, err)
			}
		case devnet.ActivityApply:
			r := findKind(rs, record.KindInputsApplied)
			if r == nil {
				t.Fatalf("apply %s: no inputs_applied record (%d records)", a.TxID, len(rs))
			}
			var p record.InputsApplied
			mustUnmarshal(t, r.Payload, &p)
			if p.Closed != a.Closed || (a.Output != nil && (p.Output == nil || p.Output.Ref != *a.Output)) {
				t.Fatalf("apply %s: output %+v closed %v, want %v %v", a.TxID, p.Output, p.Closed, a.Output, a.Closed)
			}
			var roles, addrs []chain.TxOutRef
			for _, po := range p.Payouts {
				switch {
				case po.Role != nil:
					roles = append(roles, *po.Ref)
				case po.Address != nil && po.Ref != nil:
					addrs = append(addrs, *po.Ref)
				}
				// Every payout is one output, with its value, carrying the
				// payments the semantics made to its payee.
				if po.Ref == nil {
					t.Fatalf("apply %s: a payout without an output: %+v", a.TxID, po)
				}
				if o := outputs[*po.Ref]; !reflect.DeepEqual(po.Assets, AssetsOf(o.Value)) || len(po.Payments) == 0 {
					t.Fatalf("apply %s: payout %+v, output %+v", a.TxID, po, o)
				}
				var paid uint64
				for _, pm := range po.Payments {
					paid += pm.Assets.Lovelace
				}
				switch {
				case po.Role != nil && len(po.Payments) > 1:
					mergedRoles++
				case po.Address != nil && len(po.Payments) > 1:
					mergedAddresses++
					if len(po.Assets.Tokens) > 0 {
						mergedWithTokens++
					}
				case po.Address != nil && len(po.Assets.Tokens) == 0 && po.Assets.Lovelace > paid:
					withChange++
				case po.Address != nil:
					for i := uint32(0); ; i++ {
						o, ok := outputs[chain.TxOutRef{TxID: a.TxID, Index: i}]
						if !ok {
							break
						}
						if i != po.Ref.Index && bytes.Equal(o.Address, outputs[*po.Ref].Address) {
							changeBeside++
						}
					}
				}
			}
			if !slices.Equal(roles, a.Payouts) {
				t.Fatalf("apply %s: role payouts %v, want %v", a.TxID, roles, a.Payouts)
			}
			semanticsChecked++
			addressPayouts += len(addrs)
			if len(addrs) > 0 && !slices.Equal(addrs, a.AddressPayouts) {
				t.Fatalf("apply %s: address payouts %v, want %v", a.TxID, addrs, a.AddressPayouts)
			}
			if p.Interval.FromMillis == nil || p.Interval.ToMillis == nil || *p.Interval.FromMillis > *p.Interval.ToMillis {
				t.Fatalf("apply %s: interval %+v", a.TxID, p.Interval)
			}
			// Merkleized inputs carry their continuation.
			in, err := marlowe.ParseRedeemerJSON(p.Inputs)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range in {
				if i.Merkleized() && i.Continuation == nil {
					t.Fatalf("apply %s: merkleized input without its continuation", a.TxID)
				}
			}
		case devnet.ActivityWithdraw:
			r := findKind(rs, record.KindPayoutWithdrawn)
			if r == nil {
				t.Fatalf("withdraw %s: no payout_withdrawn record", a.TxID)
			}
			var p record.PayoutWithdrawn
			mustUnmarshal(t, r.Payload, &p)
			var got []chain.TxOutRef
			for _, w := range p.Payouts {
				got = append(got, w.Ref)
			}
			slices.SortFunc(got, chain.TxOutRef.Compare)
			if !slices.Equal(got, a.Spent) {
				t.Fatalf("withdraw %s: %v, want %v", a.TxID, got, a.Spent)
			}
		case devnet.ActivityInvalid, devnet.ActivityRejected:
			if len(rs) != 0 {
				t.Fatalf("%s %s: %d records", a.Kind, a.TxID, len(rs))
			}
		}
		counts[record.Kind(a.Kind)]++
	}
	// Every record belongs to some activity, in transaction order.
	for i := 1; i < len(records); i++ {
		a, b := records[i-1], records[i]
		if b.Block.BlockNo < a.Block.BlockNo || (b.Block.BlockNo == a.Block.BlockNo && b.TxIndex < a.TxIndex) {
			t.Fatal("records out of chain order")
		}
	}
	rejected := logs.FilterMessageSnippet("semantics do not accept").Len()
	t.Logf("activities %v; %d steps, %d address payouts found (%d of several payments, %d of them with tokens, %d with the payee's change, %d beside it), %d role payouts of several payments; semantics refused %d steps",
		counts, semanticsChecked, addressPayouts, mergedAddresses, mergedWithTokens, withChange, changeBeside, mergedRoles, rejected)
	if addressPayouts == 0 {
		t.Fatal("no address payouts found: the semantics never ran")
	}
	if mergedRoles == 0 || mergedAddresses == 0 || mergedWithTokens == 0 || withChange+changeBeside == 0 {
		t.Fatal("the devnet made no merged payout")
	}
	if rejected > 0 {
		t.Fatalf("the semantics refused %d of %d steps", rejected, semanticsChecked)
	}
}

func findKind(rs []record.Record, k record.Kind) *record.Record {
	for i := range rs {
		if rs[i].Kind == k {
			return &rs[i]
		}
	}
	return nil
}

func mustUnmarshal(t *testing.T, js json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(js, v); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
}

func TestParseMarloweTags(t *testing.T) {
	tags, err := ParseMarloweTags(mustHex(t, "8202828161618261621807"))
	if err != nil || string(tags["a"]) != "null" || string(tags["b"]) != "7" {
		t.Fatalf("v2: %v %v", tags, err)
	}
	tags, err = ParseMarloweTags(mustHex(t, "82018261618261626178"))
	if err != nil || string(tags["a"]) != "null" || string(tags["b"]) != `"x"` {
		t.Fatalf("v1: %v %v", tags, err)
	}
	tags, err = ParseMarloweTags(mustHex(t, "8202818182626162626263"))
	if err != nil || tags["abbc"] == nil {
		t.Fatalf("chunked: %v %v", tags, err)
	}
	for _, bad := range []string{"8203818161", "01", "82028161", "8202"} {
		if _, err := ParseMarloweTags(mustHex(t, bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestMetadatumJSON(t *testing.T) {
	// {"msg": ["hi", h'00ff'], 5: -3}
	js := MetadatumJSON(mustHex(t, "a2636d7367826268694200ff0522"))
	var v map[string]any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	if v["5"].(float64) != -3 || v["msg"].([]any)[1] != "0x00ff" {
		t.Fatalf("%s", js)
	}
	if got := string(MetadatumJSON([]byte{0xff})); got != `{"cbor":"ff"}` {
		t.Fatal(got)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := marlowe.ParseHexInput([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
