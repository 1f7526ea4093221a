package query

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// The contract list is the busiest answer: its JSON is written by hand
// here, byte for byte what encoding/json writes for contractHeaderJSON
// and envelope (TestFastJSONMatchesEncodingJSON checks it), without
// reflection and without re-validating the stored JSON objects.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, as encoding/json does with
// HTML escaping off.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendBlock(b []byte, h chain.BlockHeader) []byte {
	b = append(b, `{"slot":`...)
	b = strconv.AppendUint(b, h.Slot, 10)
	b = append(b, `,"blockNo":`...)
	b = strconv.AppendUint(b, h.BlockNo, 10)
	b = append(b, `,"hash":"`...)
	b = hex.AppendEncode(b, h.Hash[:])
	return append(b, `"}`...)
}

func appendRef(b []byte, r chain.TxOutRef) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, r.TxID[:])
	b = append(b, '#')
	b = strconv.AppendUint(b, uint64(r.Index), 10)
	return append(b, '"')
}

// appendRaw appends stored JSON (compact, as the projection wrote it), or
// def when there is none.
func appendRaw(b []byte, raw json.RawMessage, def string) []byte {
	if len(raw) == 0 {
		return append(b, def...)
	}
	return append(b, raw...)
}

func appendContractHeader(b []byte, c *contractstore.Contract) []byte {
	b = append(b, `{"contractId":`...)
	b = appendRef(b, c.ID)
	b = append(b, `,"roleTokenMintingPolicyId":"`...)
	b = hex.AppendEncode(b, c.RolesCurrency)
	b = append(b, `","version":`...)
	b = appendString(b, c.Version)
	b = append(b, `,"address":`...)
	b = appendString(b, c.Address)
	b = append(b, `,"tags":`...)
	b = appendRaw(b, c.Tags, "{}")
	b = append(b, `,"metadata":`...)
	b = appendRaw(b, c.Metadata, "{}")
	b = append(b, `,"status":`...)
	b = appendString(b, string(c.Status))
	b = append(b, `,"block":`...)
	b = appendBlock(b, c.Block)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, c.Seq, 10)
	b = append(b, `,"steps":`...)
	b = strconv.AppendInt(b, int64(c.Steps), 10)
	b = append(b, `,"lastSeq":`...)
	b = strconv.AppendInt(b, c.LastSeq, 10)
	b = append(b, `,"lastBlock":`...)
	b = appendBlock(b, c.LastBlock)
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
	b = appendOptString(b, next)
	b = append(b, `,"cursor":`...)
	b = appendOptString(b, cursor)
	if page.Total != nil {
		b = append(b, `,"total":`...)
		b = strconv.AppendInt(b, *page.Total, 10)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, page.At.Seq, 10)
	b = append(b, `,"block":`...)
	b = appendBlock(b, page.At.Block)
	b = append(b, `,"nodeTip":`...)
	b = appendBlock(b, chain.BlockHeader{Slot: tip.Point.Slot, BlockNo: tip.BlockNo, Hash: tip.Point.Hash})
	return append(b, "}\n"...)
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendString(b, *s)
}
