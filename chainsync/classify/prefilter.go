package classify

import (
	"encoding/binary"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Prefilter decides from a block's raw bytes whether it may touch Marlowe: it
// reports a match when the bytes contain one of the Marlowe script hashes or
// the id of a transaction with a tracked output anywhere. Every transaction
// that creates a Marlowe output carries the script hash in the output's
// address, and every transaction that spends a tracked output names its
// transaction id among its inputs, so a block without a match cannot change
// Marlowe state: only its point needs to go on.
//
// The search looks at every byte position once. A bit set over a hash of the
// first four bytes of each pattern rejects almost every position with one
// lookup in a table small enough to stay in the CPU's first-level cache;
// the few candidates are checked exactly against the patterns. A counting
// table beside it, touched only when patterns come and go, says when a bit
// may be cleared.
type Prefilter struct {
	bits    []uint64 // bit set over 4-byte windows: the scan reads only this
	counts  []uint8  // patterns per bit, saturating
	scripts map[chain.Hash28]struct{}
	txids   map[chain.Hash32]struct{}
}

const (
	filterBits = 18 // 2^18 bits: 32 KiB
	filterSize = 1 << filterBits
)

// NewPrefilter returns a prefilter that knows the Marlowe script hashes and no
// transaction ids.
func NewPrefilter() *Prefilter {
	p := &Prefilter{
		bits:    make([]uint64, filterSize/64),
		counts:  make([]uint8, filterSize),
		scripts: make(map[chain.Hash28]struct{}),
		txids:   make(map[chain.Hash32]struct{}),
	}
	for _, v := range marlowe.ScriptVersions {
		p.addScript(v.Semantics)
		p.addScript(v.Payout)
	}
	return p
}

func windowSlot(w uint32) uint32 { return (w * 0x9E3779B1) >> (32 - filterBits) }

func (p *Prefilter) bump(prefix []byte, delta int) {
	i := windowSlot(binary.LittleEndian.Uint32(prefix))
	c := p.counts[i]
	switch {
	case c == 255: // saturated: stays set forever, which is only conservative
	case delta > 0:
		p.counts[i] = c + 1
	case c > 0:
		p.counts[i] = c - 1
	}
	if p.counts[i] > 0 {
		p.bits[i>>6] |= 1 << (i & 63)
	} else {
		p.bits[i>>6] &^= 1 << (i & 63)
	}
}

func (p *Prefilter) addScript(h chain.Hash28) {
	if _, ok := p.scripts[h]; ok {
		return
	}
	p.scripts[h] = struct{}{}
	p.bump(h[:4], 1)
}

// AddTxID starts watching for a transaction id.
func (p *Prefilter) AddTxID(id chain.Hash32) {
	if _, ok := p.txids[id]; ok {
		return
	}
	p.txids[id] = struct{}{}
	p.bump(id[:4], 1)
}

// RemoveTxID stops watching for a transaction id.
func (p *Prefilter) RemoveTxID(id chain.Hash32) {
	if _, ok := p.txids[id]; !ok {
		return
	}
	delete(p.txids, id)
	p.bump(id[:4], -1)
}

// Match reports whether raw contains a script hash or a watched transaction id.
func (p *Prefilter) Match(raw []byte) bool {
	n := len(raw)
	if n < 28 {
		return false
	}
	bits := p.bits
	for i := 0; i+28 <= n; i++ {
		h := windowSlot(binary.LittleEndian.Uint32(raw[i:]))
		if bits[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		if _, ok := p.scripts[chain.Hash28(raw[i:i+28])]; ok {
			return true
		}
		if i+32 <= n {
			if _, ok := p.txids[chain.Hash32(raw[i:i+32])]; ok {
				return true
			}
		}
	}
	return false
}
