package runtime

import (
	"encoding/hex"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// The contract list is the view's busiest answer, as it is the native
// API's: its JSON is written by hand with api's writers, byte for byte what
// encoding/json writes for list, item, contractHeaderJSON and
// contractLinks (TestFastJSONMatchesEncodingJSON checks it).

func appendBlock(b []byte, h chain.BlockHeader) []byte {
	b = append(b, `{"slotNo":`...)
	b = strconv.AppendUint(b, h.Slot, 10)
	b = append(b, `,"blockNo":`...)
	b = strconv.AppendUint(b, h.BlockNo, 10)
	b = append(b, `,"blockHeaderHash":`...)
	b = api.AppendHex(b, h.Hash[:])
	return append(b, '}')
}

func appendContractHeader(b []byte, c *contractstore.Contract) []byte {
	b = append(b, `{"contractId":`...)
	b = api.AppendRef(b, c.ID)
	b = append(b, `,"roleTokenMintingPolicyId":`...)
	b = api.AppendHex(b, c.RolesCurrency)
	b = append(b, `,"version":"`+languageVersion+`","tags":`...)
	b = api.AppendRaw(b, c.Tags, "{}")
	b = append(b, `,"metadata":`...)
	b = api.AppendRaw(b, c.Metadata, "{}")
	b = append(b, `,"status":"`+confirmed+`","block":`...)
	b = appendBlock(b, c.Block)
	b = append(b, `,"scriptVersion":`...)
	b = api.AppendString(b, c.Version)
	b = append(b, `,"contractStatus":`...)
	b = api.AppendString(b, string(c.Status))
	b = append(b, `,"address":`...)
	b = api.AppendString(b, c.Address)
	b = api.AppendProgress(b, c.Seq, c.Steps, c.LastSeq, c.LastBlock, appendBlock)
	return append(b, '}')
}

// appendContractList writes a page of contract headers with their links.
func appendContractList(b []byte, cs []contractstore.Contract) []byte {
	b = append(b, `{"results":[`...)
	for i := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"resource":`...)
		b = appendContractHeader(b, &cs[i])
		b = append(b, `,"links":{"contract":`...)
		b = appendContractLink(b, cs[i].ID, "")
		b = append(b, `,"transactions":`...)
		b = appendContractLink(b, cs[i].ID, "/transactions")
		b = append(b, "}}"...)
	}
	return append(b, "]}\n"...)
}

// appendContractLink appends linkContract(id)+rest as a JSON string: the
// id's # percent-encoded, the rest as it is.
func appendContractLink(b []byte, id chain.TxOutRef, rest string) []byte {
	b = append(b, `"contracts/`...)
	b = hex.AppendEncode(b, id.TxID[:])
	b = append(b, "%23"...)
	b = strconv.AppendUint(b, uint64(id.Index), 10)
	b = append(b, rest...)
	return append(b, '"')
}
