package block

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Mainnet size limits (protocol parameters maxBlockBodySize and maxTxSize).
const (
	MaxBlockBodySize = 90112
	MaxTxSize        = 16384
)

// HeaderSpec is what varies between the headers of built blocks. The rest of
// the header is deterministic filler of realistic sizes: signatures and VRF
// proofs are never checked by a follower.
type HeaderSpec struct {
	Slot    uint64
	BlockNo uint64
	// PrevHash is the hash of the previous block; zero for the first block,
	// whose header then says null.
	PrevHash chain.Hash32
}

// BuildConwayBlock builds a Conway block holding txs and returns its raw
// bytes (the bare era block, node-to-client block type 7) with the block as
// DecodeBlock reads it back (its byte slices alias raw).
//
// Each Tx gives the content of one transaction; ID and Index are ignored and
// computed. The encoding is deterministic:
//   - inputs, collateral and reference inputs are tag-258 sets in the order
//     given, so a caller can build the unsorted sets real transactions have;
//   - outputs use the legacy array form unless they have an inline datum or a
//     script reference (HasScriptRef adds a small native script);
//   - assets, mint, witness datums (by hash), redeemers (Conway map form, by
//     tag and index) and metadata (Alonzo form, by label) are in canonical
//     order, so the built block may list them in another order than txs.
//
// Datums must be keyed by DatumHash of their bytes. Datums, redeemer data,
// inline datums and metadata values must each be one CBOR item; gouroboros
// and the ledger further require Plutus Data and metadata values. Repeated
// inputs in a set, assets, redeemer keys or metadata labels are errors, as
// are zero asset quantities.
func BuildConwayBlock(h HeaderSpec, txs []Tx) (raw []byte, b *Block, err error) {
	var bodies, wits, aux, invalid encoder
	bodies.array(len(txs))
	wits.array(len(txs))
	nAux, nInvalid := 0, 0
	for i := range txs {
		if len(txs[i].Metadata) > 0 {
			nAux++
		}
		if !txs[i].IsValid {
			nInvalid++
		}
	}
	aux.mapHead(nAux)
	invalid.array(nInvalid)
	for i := range txs {
		et, err := encodeTx(&txs[i])
		if err != nil {
			return nil, nil, fmt.Errorf("build conway block: tx %d: %w", i, err)
		}
		bodies.raw(et.body)
		wits.raw(et.wits)
		if et.aux != nil {
			aux.uint(uint64(i))
			aux.raw(et.aux)
		}
		if !txs[i].IsValid {
			invalid.uint(uint64(i))
		}
	}
	parts := [4][]byte{bodies.buf, wits.buf, aux.buf, invalid.buf}
	var hashes []byte
	size := 0
	for _, p := range parts {
		ph := blake2b.Sum256(p)
		hashes = append(hashes, ph[:]...)
		size += len(p)
	}
	header := encodeHeader(h, size, blake2b.Sum256(hashes))

	var e encoder
	e.buf = make([]byte, 0, 1+len(header)+size)
	e.array(5)
	e.raw(header)
	for _, p := range parts {
		e.raw(p)
	}
	b, err = DecodeBlock(TypeConway, e.buf, Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("build conway block: the built block does not decode: %w", err)
	}
	return e.buf, b, nil
}

// encodeHeader encodes [header_body, kes_signature], the header body having
// the 10 fields of a Babbage or Conway header.
func encodeHeader(h HeaderSpec, bodySize int, bodyHash chain.Hash32) []byte {
	var e encoder
	e.array(2)
	e.array(10)
	e.uint(h.BlockNo)
	e.uint(h.Slot)
	if h.PrevHash.IsZero() {
		e.null()
	} else {
		e.bytes(h.PrevHash[:])
	}
	e.bytes(filler("issuer vkey", 32))
	e.bytes(filler("vrf vkey", 32))
	e.array(2)
	e.bytes(filler("vrf output", 64))
	e.bytes(filler("vrf proof", 80))
	e.uint(uint64(bodySize))
	e.bytes(bodyHash[:])
	e.array(4)
	e.bytes(filler("hot vkey", 32))
	e.uint(h.Slot / 129600) // op cert sequence number: any number will do
	e.uint(h.Slot / 129600) // KES period: slots per KES period on mainnet
	e.bytes(filler("op cert signature", 64))
	e.array(2)
	e.uint(10)
	e.uint(0)
	e.bytes(filler("kes signature", 448))
	return e.buf
}

// filler returns n deterministic bytes derived from label.
func filler(label string, n int) []byte {
	out := make([]byte, 0, n)
	seed := blake2b.Sum256([]byte(label))
	for len(out) < n {
		out = append(out, seed[:min(len(seed), n-len(out))]...)
		seed = blake2b.Sum256(seed[:])
	}
	return out
}

// encodedTx is a transaction's three parts as they go into a block; aux is
// nil without metadata.
type encodedTx struct {
	body, wits, aux []byte
}

// encodeTx encodes the body, witness set and auxiliary data of tx.
func encodeTx(tx *Tx) (encodedTx, error) {
	var et encodedTx
	var err error
	if et.aux, err = encodeAux(tx.Metadata); err != nil {
		return et, err
	}
	if et.body, err = encodeBody(tx, et.aux); err != nil {
		return et, err
	}
	et.wits, err = encodeWitnesses(tx)
	return et, err
}

// encodeBody encodes the transaction body map in key order.
func encodeBody(tx *Tx, aux []byte) ([]byte, error) {
	for _, s := range []struct {
		name string
		refs []chain.TxOutRef
	}{{"inputs", tx.Inputs}, {"collateral", tx.Collateral}, {"reference inputs", tx.ReferenceInputs}} {
		seen := make(map[chain.TxOutRef]bool, len(s.refs))
		for _, r := range s.refs {
			if seen[r] {
				return nil, fmt.Errorf("%s: %s appears twice", s.name, r)
			}
			seen[r] = true
		}
	}
	n := 3
	for _, present := range []bool{tx.TTL != nil, aux != nil, tx.ValidityStart != nil, len(tx.Mint) > 0,
		len(tx.Collateral) > 0, tx.CollateralReturn != nil, len(tx.ReferenceInputs) > 0} {
		if present {
			n++
		}
	}
	var e encoder
	e.mapHead(n)
	e.uint(keyInputs)
	e.refs(tx.Inputs)
	e.uint(keyOutputs)
	e.array(len(tx.Outputs))
	for i := range tx.Outputs {
		if err := e.output(&tx.Outputs[i]); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	e.uint(keyFee)
	e.uint(tx.Fee)
	if tx.TTL != nil {
		e.uint(keyTTL)
		e.uint(*tx.TTL)
	}
	if aux != nil {
		e.uint(keyAuxDataHash)
		h := blake2b.Sum256(aux)
		e.bytes(h[:])
	}
	if tx.ValidityStart != nil {
		e.uint(keyValidityStart)
		e.uint(*tx.ValidityStart)
	}
	if len(tx.Mint) > 0 {
		e.uint(keyMint)
		if err := e.mint(tx.Mint); err != nil {
			return nil, fmt.Errorf("mint: %w", err)
		}
	}
	if len(tx.Collateral) > 0 {
		e.uint(keyCollateral)
		e.refs(tx.Collateral)
	}
	if tx.CollateralReturn != nil {
		e.uint(keyCollateralReturn)
		if err := e.output(tx.CollateralReturn); err != nil {
			return nil, fmt.Errorf("collateral return: %w", err)
		}
	}
	if len(tx.ReferenceInputs) > 0 {
		e.uint(keyReferenceInputs)
		e.refs(tx.ReferenceInputs)
	}
	return e.buf, nil
}

// encodeWitnesses encodes {? 4: 258([datums]), ? 5: {redeemers}}.
func encodeWitnesses(tx *Tx) ([]byte, error) {
	hashes := slices.SortedFunc(maps.Keys(tx.Datums), func(a, b chain.Hash32) int {
		return slices.Compare(a[:], b[:])
	})
	for _, h := range hashes {
		d := tx.Datums[h]
		if err := checkItem(d); err != nil {
			return nil, fmt.Errorf("datum %s: %w", h, err)
		}
		if DatumHash(d) != h {
			return nil, fmt.Errorf("datum under key %s hashes to %s", h, DatumHash(d))
		}
	}
	reds := slices.Clone(tx.Redeemers)
	slices.SortStableFunc(reds, func(a, b Redeemer) int {
		return cmp.Or(cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.Index, b.Index))
	})
	for i, rd := range reds {
		if i > 0 && reds[i-1].Tag == rd.Tag && reds[i-1].Index == rd.Index {
			return nil, fmt.Errorf("two redeemers for tag %d index %d", rd.Tag, rd.Index)
		}
		if err := checkItem(rd.Data); err != nil {
			return nil, fmt.Errorf("redeemer %d/%d data: %w", rd.Tag, rd.Index, err)
		}
	}
	n := 0
	if len(hashes) > 0 {
		n++
	}
	if len(reds) > 0 {
		n++
	}
	var e encoder
	e.mapHead(n)
	if len(hashes) > 0 {
		e.uint(keyPlutusData)
		e.tag(tagSet)
		e.array(len(hashes))
		for _, h := range hashes {
			e.raw(tx.Datums[h])
		}
	}
	if len(reds) > 0 {
		e.uint(keyRedeemers)
		e.mapHead(len(reds))
		for _, rd := range reds {
			e.array(2)
			e.uint(uint64(rd.Tag))
			e.uint(uint64(rd.Index))
			e.array(2)
			e.raw(rd.Data)
			e.array(2)
			e.uint(rd.Mem)
			e.uint(rd.Steps)
		}
	}
	return e.buf, nil
}

// encodeAux encodes #6.259({0: metadata}), or returns nil without metadata.
func encodeAux(md []Metadatum) ([]byte, error) {
	if len(md) == 0 {
		return nil, nil
	}
	sorted := slices.Clone(md)
	slices.SortStableFunc(sorted, func(a, b Metadatum) int { return cmp.Compare(a.Label, b.Label) })
	var e encoder
	e.tag(tagAuxiliaryData)
	e.mapHead(1)
	e.uint(0)
	e.mapHead(len(sorted))
	for i, m := range sorted {
		if i > 0 && sorted[i-1].Label == m.Label {
			return nil, fmt.Errorf("metadata label %d twice", m.Label)
		}
		if err := checkItem(m.Value); err != nil {
			return nil, fmt.Errorf("metadata label %d: %w", m.Label, err)
		}
		e.uint(m.Label)
		e.raw(m.Value)
	}
	return e.buf, nil
}

// TxID returns the id BuildConwayBlock gives tx: the hash of the body it
// encodes. It is much cheaper than building a block to learn it.
func TxID(tx *Tx) (chain.Hash32, error) {
	et, err := encodeTx(tx)
	if err != nil {
		return chain.Hash32{}, err
	}
	return blake2b.Sum256(et.body), nil
}

// TxBodySize returns the size of the transaction body BuildConwayBlock
// would encode for tx: the bytes its id is the hash of.
func TxBodySize(tx *Tx) (int, error) {
	et, err := encodeTx(tx)
	return len(et.body), err
}

// TxSize returns the size of tx as a standalone transaction
// [body, witnesses, is_valid, auxiliary_data / null], which the ledger
// limits to MaxTxSize.
func TxSize(tx *Tx) (int, error) {
	et, err := encodeTx(tx)
	if err != nil {
		return 0, err
	}
	n := 1 + len(et.body) + len(et.wits) + 1 + 1
	if et.aux != nil {
		n += len(et.aux) - 1
	}
	return n, nil
}

// BodySize is the exact block body size (the header's block_body_size) of a
// list of transactions built by BuildConwayBlock, kept up to date as
// transactions are added, so a generator can fill blocks up to
// MaxBlockBodySize. The zero value is an empty block.
type BodySize struct {
	txs, auxN, invalidN int
	parts               int // bytes of bodies, witness sets, aux entries and invalid indexes
}

// Plus returns the size with tx added as the next transaction.
func (s BodySize) Plus(tx *Tx) (BodySize, error) {
	et, err := encodeTx(tx)
	if err != nil {
		return s, err
	}
	s.parts += len(et.body) + len(et.wits)
	if et.aux != nil {
		s.parts += uintLen(uint64(s.txs)) + len(et.aux)
		s.auxN++
	}
	if !tx.IsValid {
		s.parts += uintLen(uint64(s.txs))
		s.invalidN++
	}
	s.txs++
	return s, nil
}

// Total returns the block body size in bytes.
func (s BodySize) Total() int {
	return 2*uintLen(uint64(s.txs)) + uintLen(uint64(s.auxN)) + uintLen(uint64(s.invalidN)) + s.parts
}

// Txs returns the number of transactions added.
func (s BodySize) Txs() int { return s.txs }

// uintLen is the size of a CBOR head with argument v.
func uintLen(v uint64) int {
	switch {
	case v < 24:
		return 1
	case v <= 0xff:
		return 2
	case v <= 0xffff:
		return 3
	case v <= 0xffffffff:
		return 5
	}
	return 9
}
