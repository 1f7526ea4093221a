package runtime

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// TestFastJSONMatchesEncodingJSON: the hand-written contract list is byte
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
			Metadata: json.RawMessage(`{"1564":[2,["x"]]}`), Status: contractstore.Status(s), Steps: i, LastSeq: int64(i * 3),
			LastBlock: chain.BlockHeader{Slot: 5, BlockNo: 1 << 62, Hash: h},
		})
	}
	cs[0].Tags, cs[0].Metadata = nil, nil
	for _, page := range [][]contractstore.Contract{cs, nil} {
		items := []item{}
		for i := range page {
			c := &page[i]
			items = append(items, item{Resource: contractHeaderOf(c), Links: contractLinks{Contract: linkContract(c.ID), Transactions: linkTransactions(c.ID)}})
		}
		want, err := api.EncodeJSON(list{Results: items})
		if err != nil {
			t.Fatal(err)
		}
		if got := appendContractList(nil, page); !bytes.Equal(got, want) {
			t.Fatalf("hand-written:\n%s\nencoding/json:\n%s", got, want)
		}
	}
}

// TestTipJSON: the hand-written tip headers are what encoding/json writes
// for tipJSON.
func TestTipJSON(t *testing.T) {
	v := &View{cfg: Config{Slots: chain.SlotConfig{ZeroSlot: 4492800, ZeroTimeMillis: 1596059091000, SlotLengthMillis: 1000}}}
	var h chain.Hash32
	h[0], h[31] = 0xab, 0x01
	for _, b := range []chain.BlockHeader{{}, {Slot: 12_345_678, BlockNo: 42, Hash: h}, {Slot: 0, BlockNo: 0, Hash: h}} {
		var want tipJSON
		if b.Hash == (chain.Hash32{}) && b.Slot == 0 {
			want.GenesisTime = utcTime(genesisMillis(v.cfg.Slots))
		} else {
			bh := blockOf(b)
			want.BlockHeader, want.SlotTimeUTC = &bh, utcTime(v.cfg.Slots.SlotStart(b.Slot))
		}
		w, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.tip(b); got != string(w) {
			t.Fatalf("tip %+v:\n%s\nencoding/json:\n%s", b, got, w)
		}
	}
}
