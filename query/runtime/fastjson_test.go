package runtime

import (
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/apitest"
)

// TestFastJSONMatchesEncodingJSON: the hand-written contract list is byte
// for byte what encoding/json writes.
func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	cs := apitest.OddContracts()
	for _, page := range [][]contractstore.Contract{cs, nil} {
		items := []item{}
		for i := range page {
			c := &page[i]
			items = append(items, item{Resource: contractHeaderOf(c), Links: contractLinks{Contract: linkContract(c.ID), Transactions: linkTransactions(c.ID)}})
		}
		apitest.MatchesEncodingJSON(t, appendContractList(nil, page), list{Results: items})
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
