package historytest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// The generated chain draws its contracts' attributes from small sets, so
// that filters match some contracts and not others.
var (
	currencies = [][]byte{nil, bytes.Repeat([]byte{0x11}, 28), bytes.Repeat([]byte{0x22}, 28), bytes.Repeat([]byte{0x33}, 28)}
	tagNames   = []string{"alpha", "beta", "gamma", "delta"}
	roleNames  = [][]byte{[]byte("buyer"), []byte("seller"), []byte("mediator")}
)

// address returns the bech32-looking text of the nth test address.
func address(n int) string { return fmt.Sprintf("addr_test1qz%06d", n) }

// hashOf derives a hash from a tag and three numbers.
func hashOf(tag byte, a, b, c uint64) chain.Hash32 {
	var in [25]byte
	in[0] = tag
	binary.BigEndian.PutUint64(in[1:], a)
	binary.BigEndian.PutUint64(in[9:], b)
	binary.BigEndian.PutUint64(in[17:], c)
	return sha256.Sum256(in[:])
}

// genBlock is one generated block: what the processor would hand the store.
type genBlock struct {
	Header  chain.BlockHeader
	Records []record.Record // seqs not yet assigned
	// Contracts' CreatedSeq and Additions' Seq index Records until the
	// writer assigns seqs.
	Contracts []record.ContractIndex
	Additions []history.PartyAddition
	Changes   classify.UTxOChanges
}

// spendOne spends one of *from, chosen with rng, in c and takes it out of
// *from.
func spendOne(rng *rand.Rand, from *[]classify.TrackedUTxO, c *classify.UTxOChanges) classify.TrackedUTxO {
	k := rng.IntN(len(*from))
	u := (*from)[k]
	spendIn(c, u)
	*from = slices.Delete(*from, k, k+1)
	return u
}

// spendIn records that u is spent in the block of c. Changes stay net as
// the classifier makes them: an output created and spent in the same block
// appears in neither list.
func spendIn(c *classify.UTxOChanges, u classify.TrackedUTxO) {
	for i := range c.Added {
		if c.Added[i].Ref == u.Ref {
			c.Added = slices.Delete(c.Added, i, i+1)
			return
		}
	}
	c.Removed = append(c.Removed, u)
}

// genState is what the generator knows after a block.
type genState struct {
	Header  chain.BlockHeader
	Open    []classify.TrackedUTxO // the current output of each open contract
	Payouts []classify.TrackedUTxO
}

// generator makes a deterministic chain of Marlowe-like activity: contracts
// created with tags, roles and parties, inputs applied (continuations,
// payouts, new parties), payouts withdrawn, rejected steps. A block depends
// only on the seed, the fork number, the block number and the state before
// it, so two backends fed the same blocks see the same records.
type generator struct {
	seed uint64
	// maxTxs is the most Marlowe transactions a block has.
	maxTxs int
}

// next returns the block after st on fork and the state after it.
func (g generator) next(st *genState, fork uint64) (genBlock, *genState) {
	no := st.Header.BlockNo + 1
	rng := rand.New(rand.NewPCG(g.seed^fork*0x9e3779b97f4a7c15, no))
	hdr := chain.BlockHeader{Slot: st.Header.Slot + 1 + uint64(rng.IntN(3)), BlockNo: no, Hash: hashOf('b', g.seed, fork, no)}
	next := &genState{Header: hdr, Open: slices.Clone(st.Open), Payouts: slices.Clone(st.Payouts)}
	blk := genBlock{Header: hdr, Changes: classify.UTxOChanges{Block: hdr}}
	maxTxs := g.maxTxs
	if maxTxs <= 0 {
		maxTxs = 4
	}
	for i := range rng.IntN(maxTxs + 1) {
		txID := hashOf('t', g.seed, fork, no<<16|uint64(i))
		rec := record.Record{Block: hdr, TxID: txID, TxIndex: i}
		switch x := rng.IntN(100); {
		case x < 35 || len(next.Open) == 0:
			id := chain.TxOutRef{TxID: txID}
			cur := currencies[rng.IntN(len(currencies))]
			idx := record.ContractIndex{ID: id, Version: []string{"v1", "v3"}[rng.IntN(2)], RolesCurrency: cur,
				CreatedSeq: int64(len(blk.Records)), Block: hdr}
			for _, t := range tagNames {
				if rng.IntN(3) == 0 {
					idx.Tags = append(idx.Tags, t)
				}
			}
			idx.Parties = append(idx.Parties, record.Party{Address: address(rng.IntN(12))})
			if cur != nil {
				for _, r := range roleNames[:1+rng.IntN(len(roleNames))] {
					idx.Parties = append(idx.Parties, record.Party{RoleCurrency: cur, Role: r})
				}
			}
			u := classify.TrackedUTxO{Ref: id, Kind: classify.KindContract, ContractID: id, Version: idx.Version,
				Address: []byte{0x70, byte(no), byte(i)}, RolesCurrency: cur, Datum: datum(rng)}
			next.Open = append(next.Open, u)
			blk.Changes.Added = append(blk.Changes.Added, u)
			blk.Contracts = append(blk.Contracts, idx)
			rec.Kind, rec.Contract = record.KindContractCreated, &id
		case x < 75:
			spent := spendOne(rng, &next.Open, &blk.Changes)
			id := spent.ContractID
			rec.Kind, rec.Contract = record.KindInputsApplied, &id
			if rng.IntN(10) < 7 {
				cont := spent
				cont.Ref = chain.TxOutRef{TxID: txID}
				cont.Datum = datum(rng)
				next.Open = append(next.Open, cont)
				blk.Changes.Added = append(blk.Changes.Added, cont)
			}
			if rng.IntN(2) == 0 {
				p := classify.TrackedUTxO{Ref: chain.TxOutRef{TxID: txID, Index: 1}, Kind: classify.KindPayout,
					ContractID: id, Version: spent.Version, Address: []byte{0x71, byte(no)},
					RolesCurrency: spent.RolesCurrency, Role: roleNames[rng.IntN(len(roleNames))]}
				next.Payouts = append(next.Payouts, p)
				blk.Changes.Added = append(blk.Changes.Added, p)
			}
			if rng.IntN(5) == 0 {
				blk.Additions = append(blk.Additions, history.PartyAddition{Contract: id, Seq: int64(len(blk.Records)),
					Parties: []record.Party{{Address: address(100 + rng.IntN(20))}}})
			}
		case x < 88 && len(next.Payouts) > 0:
			id := spendOne(rng, &next.Payouts, &blk.Changes).ContractID
			rec.Kind, rec.Contract = record.KindPayoutWithdrawn, &id
		case x < 95:
			id := next.Open[rng.IntN(len(next.Open))].ContractID
			rec.Kind, rec.Contract = record.KindApplyInputsRejected, &id
		default:
			// A rejected creation: a record about no contract.
			rec.Kind = record.KindApplyInputsRejected
		}
		rec.Payload = payload(rng, &rec)
		blk.Records = append(blk.Records, rec)
	}
	return blk, next
}

// datum makes the raw datum of a contract output (none, sometimes).
func datum(rng *rand.Rand) []byte {
	if rng.IntN(5) == 0 {
		return nil
	}
	d := make([]byte, 8+rng.IntN(200))
	for i := range d {
		d[i] = byte(rng.Uint32())
	}
	return d
}

// payload makes a record's JSON in one of several spellings (spaces,
// escapes, big numbers, non-objects): backends must return it byte for byte.
func payload(rng *rand.Rand, r *record.Record) json.RawMessage {
	switch rng.IntN(4) {
	case 0:
		return json.RawMessage(fmt.Sprintf(`{"kind":%q,"block":%d,"tx":%d}`, r.Kind, r.Block.BlockNo, r.TxIndex))
	case 1:
		return json.RawMessage(fmt.Sprintf("{ \"block\" : %d,\n  \"text\": \"caf\\u00e9 \u2713 \\\"q\\\"\", \"n\": 123456789012345678901234567890 }",
			r.Block.BlockNo))
	case 2:
		return json.RawMessage(fmt.Sprintf(`[%d, 2.50, -0e0, {"a": null, "b": [true, false]}]`, r.TxIndex))
	}
	return json.RawMessage(fmt.Sprintf(`"tx %s"`, r.TxID))
}

// utxoModel is the tracked output set with its undo log, as the follower's
// classify.UTxOSet keeps it: the reference the backends' checkpoints are
// compared with.
type utxoModel struct {
	set     map[chain.TxOutRef]classify.TrackedUTxO
	undo    []classify.UTxOChanges // oldest first; blocks with changes only
	horizon chain.BlockHeader
}

func newUTxOModel() utxoModel {
	return utxoModel{set: make(map[chain.TxOutRef]classify.TrackedUTxO)}
}

func (m *utxoModel) add(u classify.TrackedUTxO) {
	if _, ok := m.set[u.Ref]; !ok {
		m.set[u.Ref] = u
	}
}

func (m *utxoModel) forward(c classify.UTxOChanges) {
	if c.Empty() {
		return
	}
	for _, u := range c.Removed {
		delete(m.set, u.Ref)
	}
	for _, u := range c.Added {
		m.add(u)
	}
	m.undo = append(m.undo, c)
}

func (m *utxoModel) rollback(p chain.Point) {
	for len(m.undo) > 0 && m.undo[len(m.undo)-1].Block.Slot > p.Slot {
		last := m.undo[len(m.undo)-1]
		for i := len(last.Added) - 1; i >= 0; i-- {
			delete(m.set, last.Added[i].Ref)
		}
		for _, u := range last.Removed {
			m.add(u)
		}
		m.undo = m.undo[:len(m.undo)-1]
	}
}

// prune forgets the changes of blocks more than depth blocks behind
// newest, as the store does; it reports whether the horizon moved.
func (m *utxoModel) prune(newest, depth uint64) bool {
	if depth == 0 || newest < depth {
		return false
	}
	moved := false
	for len(m.undo) > 0 && m.undo[0].Block.BlockNo < newest-depth {
		m.horizon = m.undo[0].Block
		m.undo = m.undo[1:]
		moved = true
	}
	return moved
}

// all returns the set ordered by reference.
func (m *utxoModel) all() []classify.TrackedUTxO {
	out := make([]classify.TrackedUTxO, 0, len(m.set))
	for _, u := range m.set {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b classify.TrackedUTxO) int { return a.Ref.Compare(b.Ref) })
	return out
}
