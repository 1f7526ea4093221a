package query

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// TestFastJSONMatchesEncodingJSON: the hand-written contract page is byte
// for byte what encoding/json writes.
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	var h chain.Hash32
	for i := range h {
		h[i] = byte(i * 7)
	}
	odd := []string{"v5", "", "a\"b\\c", "tab\there\nnl\r\b\f\x01\x1f", "\u2028\u2029<>&", "bad\xffutf8", "ünïcødé 😀"}
	var cs []contractstore.Contract
	for i, s := range odd {
		cs = append(cs, contractstore.Contract{
			ID: chain.TxOutRef{TxID: h, Index: uint32(i * 1000)}, Seq: int64(i), Block: chain.BlockHeader{Slot: uint64(i) << 40, BlockNo: 7, Hash: h},
			Version: s, RolesCurrency: h[:28*(i%2)], Address: s + "addr", Tags: json.RawMessage(`{"a":null,"b":{"n":[1,2]}}`),
			Metadata: json.RawMessage(`{"1564":[2,["x"]]}`), Status: contractstore.StatusOpen, Steps: i, LastSeq: int64(i * 3),
			LastBlock: chain.BlockHeader{Slot: 5, BlockNo: 1 << 62, Hash: h},
		})
	}
	cs[0].Tags, cs[0].Metadata = nil, nil
	total := int64(41)
	next, cursor := "/contracts?cursor=abc&tag=%22x%22", "abc"
	tip := chain.Tip{Point: chain.Point{Slot: 99, Hash: h}, BlockNo: 12}
	for _, tc := range []struct {
		page         contractstore.ContractPage
		next, cursor *string
	}{
		{contractstore.ContractPage{Contracts: cs, Total: &total, At: contractstore.Position{Seq: 9, Block: cs[1].Block}}, &next, &cursor},
		{contractstore.ContractPage{}, nil, nil},
	} {
		results := make([]contractHeaderJSON, len(tc.page.Contracts))
		for i := range tc.page.Contracts {
			results[i] = contractHeaderOf(&tc.page.Contracts[i])
		}
		want, err := api.EncodeJSON(envelope{Results: results, Next: tc.next, Cursor: tc.cursor, Total: tc.page.Total,
			Seq: tc.page.At.Seq, Block: tc.page.At.Block, NodeTip: tipOf(tip)})
		if err != nil {
			t.Fatal(err)
		}
		got := appendContractPage(nil, &tc.page, tc.next, tc.cursor, tip)
		if !bytes.Equal(got, want) {
			t.Fatalf("hand-written:\n%s\nencoding/json:\n%s", got, want)
		}
	}
}
