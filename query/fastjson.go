package query

import (
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// The contract list is the busiest answer: its JSON is written by hand
// here (with api's writers), byte for byte what encoding/json writes for
// contractHeaderJSON and envelope (TestFastJSONMatchesEncodingJSON checks
// it).

func appendContractHeader(b []byte, c *contractstore.Contract) []byte {
	b = append(b, `{"contractId":`...)
	b = api.AppendRef(b, c.ID)
	b = append(b, `,"roleTokenMintingPolicyId":`...)
	b = api.AppendHex(b, c.RolesCurrency)
	b = append(b, `,"version":`...)
	b = api.AppendString(b, c.Version)
	b = append(b, `,"address":`...)
	b = api.AppendString(b, c.Address)
	b = append(b, `,"tags":`...)
	b = api.AppendRaw(b, c.Tags, "{}")
	b = append(b, `,"metadata":`...)
	b = api.AppendRaw(b, c.Metadata, "{}")
	b = append(b, `,"status":`...)
	b = api.AppendString(b, string(c.Status))
	b = append(b, `,"block":`...)
	b = api.AppendBlock(b, c.Block)
	b = api.AppendProgress(b, c.Seq, c.Steps, c.LastSeq, c.LastBlock, api.AppendBlock)
	return append(b, '}')
}

// appendContractPage writes a contract page's envelope.
func appendContractPage(b []byte, page *contractstore.ContractPage, next, cursor *string, tip chain.Tip) []byte {
	b = append(b, `{"results":[`...)
	for i := range page.Contracts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendContractHeader(b, &page.Contracts[i])
	}
	b = append(b, `],"next":`...)
	b = api.AppendOptString(b, next)
	b = append(b, `,"cursor":`...)
	b = api.AppendOptString(b, cursor)
	if page.Total != nil {
		b = append(b, `,"total":`...)
		b = strconv.AppendInt(b, *page.Total, 10)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, page.At.Seq, 10)
	b = append(b, `,"block":`...)
	b = api.AppendBlock(b, page.At.Block)
	b = append(b, `,"nodeTip":`...)
	b = api.AppendBlock(b, chain.BlockHeader{Slot: tip.Point.Slot, BlockNo: tip.BlockNo, Hash: tip.Point.Hash})
	return append(b, "}\n"...)
}
