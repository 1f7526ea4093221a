// Package apitest holds the fixtures the tests of both HTTP APIs (query
// and query/runtime) share.
package apitest

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// OddContracts are contract headers whose strings (version, address,
// status) are the ones JSON writers get wrong: empty, quotes and
// backslashes, control characters, U+2028/U+2029 and HTML's <>&, invalid
// UTF-8, and non-ASCII; with and without a roles currency, tags and
// metadata (the first has neither), and numbers up to 2^62. A
// hand-written JSON writer must write them byte for byte as encoding/json
// does.
func OddContracts() []contractstore.Contract {
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
			Metadata: json.RawMessage(`{"1564":[2,["x"]]}`), Status: contractstore.Status(s), Steps: i, LastSeq: int64(i * 3),
			LastBlock: chain.BlockHeader{Slot: 5, BlockNo: 1 << 62, Hash: h},
		})
	}
	cs[0].Tags, cs[0].Metadata = nil, nil
	return cs
}

// MatchesEncodingJSON fails t unless got, a hand-written answer, is byte
// for byte what api.EncodeJSON writes for v.
func MatchesEncodingJSON(t testing.TB, got []byte, v any) {
	t.Helper()
	want, err := api.EncodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("hand-written:\n%s\nencoding/json:\n%s", got, want)
	}
}
