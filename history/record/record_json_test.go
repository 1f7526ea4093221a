package record_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// TestRecordJSON: a RolledBack record, about no transaction, has no txId
// and no txIndex; every other record has both, and each reads back.
func TestRecordJSON(t *testing.T) {
	ref := chain.TxOutRef{Index: 1}
	ref.TxID[0] = 0xab
	rb := int64(9)
	recs := []record.Record{
		{Seq: 3, Kind: record.KindRolledBack, Block: chain.BlockHeader{Slot: 5}, Payload: json.RawMessage(`{"to":{"slot":4,"hash":"<&>"}}`)},
		{Seq: 2, Kind: record.KindContractCreated, TxID: ref.TxID, Contract: &ref, Payload: json.RawMessage(`{}`), RolledBackBy: &rb},
		{Seq: 1, Kind: record.KindInputsApplied, TxIndex: 0, Contract: &ref, Payload: json.RawMessage(`{}`)},
	}
	for i, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		has := strings.Contains(string(b), `"txId"`) && strings.Contains(string(b), `"txIndex"`)
		if has != (r.Kind != record.KindRolledBack) {
			t.Errorf("record %d: %s", i, b)
		}
		var back record.Record
		if err := json.Unmarshal(b, &back); err != nil || back.Seq != r.Seq || back.Kind != r.Kind || back.TxID != r.TxID {
			t.Errorf("record %d: %s: %+v %v", i, b, back, err)
		}
		if p, _ := json.Marshal(&r); string(p) != string(b) {
			t.Errorf("record %d: pointer %s, value %s", i, p, b)
		}
	}
}
