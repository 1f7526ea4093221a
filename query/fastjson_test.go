package query

import (
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/apitest"
)

// TestFastJSONMatchesEncodingJSON: the hand-written contract page is byte
// for byte what encoding/json writes.
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	cs := apitest.OddContracts()
	h := cs[0].ID.TxID
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
		apitest.MatchesEncodingJSON(t, appendContractPage(nil, &tc.page, tc.next, tc.cursor, tip),
			envelope{Results: results, Next: tc.next, Cursor: tc.cursor, Total: tc.page.Total,
				Seq: tc.page.At.Seq, Block: tc.page.At.Block, NodeTip: tipOf(tip)})
	}
}
