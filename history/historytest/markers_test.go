package historytest

import (
	"encoding/json"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

func TestRolledBackTo(t *testing.T) {
	hdr := func(slot uint64) chain.BlockHeader {
		var h chain.Hash32
		h[0] = byte(slot)
		return chain.BlockHeader{Slot: slot, Hash: h}
	}
	marker := func(seq int64, to uint64) record.Record {
		p, _ := json.Marshal(record.RolledBack{To: hdr(to).Point()})
		return record.Record{Seq: seq, Kind: record.KindRolledBack, Block: hdr(to), Payload: p}
	}
	by := func(seq int64) *int64 { return &seq }
	log := []record.Record{
		{Seq: 1, Kind: record.KindContractCreated, Block: hdr(5)},
		{Seq: 2, Kind: record.KindContractCreated, Block: hdr(6), RolledBackBy: by(4)},
		{Seq: 3, Kind: record.KindInputsApplied, Block: hdr(7), RolledBackBy: by(4)},
		marker(4, 5),
		{Seq: 5, Kind: record.KindContractCreated, Block: hdr(8), RolledBackBy: by(6)},
		marker(6, 5),
		{Seq: 7, Kind: record.KindContractCreated, Block: hdr(9), RolledBackBy: by(8)},
		marker(8, 8),
	}
	cases := []struct {
		to   uint64
		log  []record.Record
		want chain.Point
		ok   bool
	}{
		{5, log, hdr(8).Point(), true},     // the last marker to slot 5 undid block 8
		{5, log[:4], hdr(7).Point(), true}, // the newest block the first marker undid
		{8, log, hdr(9).Point(), true},
		{6, log, chain.Point{}, false}, // no marker to slot 6
		{5, log[:3], chain.Point{}, false},
	}
	for _, c := range cases {
		got, ok := RolledBackTo(c.log, hdr(c.to).Point())
		if got != c.want || ok != c.ok {
			t.Errorf("to %d over %d records: %v %v, want %v %v", c.to, len(c.log), got, ok, c.want, c.ok)
		}
	}
}
