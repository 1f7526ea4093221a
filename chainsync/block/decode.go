package block

import (
	"bytes"
	"errors"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// DecodeBlock decodes a block: its header and, for Alonzo, Babbage and Conway
// blocks, its transactions. For earlier eras it returns the header only, as
// DecodeHeader does. raw is the bare era block as chain-sync delivers it and
// t its node-to-client block type.
//
// Byte slices in the result (addresses, asset names, inline datums, witness
// datums, redeemer data, metadata values) alias raw unless opts.Copy is set:
// keep raw unchanged while the result is in use, or detach what you keep with
// Tx.Clone or Block.Clone.
//
// As in the ledger, assets and minted quantities of zero are dropped, and a
// redeemer key (tag, index) that appears twice keeps its first position and
// its last value. Unknown keys in transaction bodies, outputs, witness sets
// and auxiliary data are skipped. Anything else that is not what the ledger
// would accept for the fields read here is a *DecodeError naming the
// transaction and field.
func DecodeBlock(t Type, raw []byte, opts Options) (*Block, error) {
	if opts.Copy && t.HasPlutus() {
		raw = bytes.Clone(raw)
	}
	d := decoder{r: reader{buf: raw}}
	hb, l, err := decodeHeader(&d.r, t, opts)
	if err != nil {
		return nil, withType(err, t)
	}
	b := &hb
	if !t.HasPlutus() {
		return b, nil
	}
	if err := d.body(b, &l); err != nil {
		return nil, withType(err, t)
	}
	return b, nil
}

// Minimum encoded sizes of list entries, used to refuse declared counts
// that the remaining input cannot hold before allocating for them.
const (
	minTxBody   = 7  // {0: [], 1: [], 2: 0}
	minInput    = 36 // [h'<32 bytes>', 0]
	minOutput   = 3  // [h'', 0]
	minPolicy   = 31 // h'<28 bytes>': {}
	minAsset    = 2  // h'': 0
	minRedeemer = 7  // [0, 0, 0, [0, 0]]
	minMetadata = 2  // 0: 0
)

// decoder holds the reader and the slabs that the slices and pointers of a
// decoded block are carved from, so that a block takes a few allocations
// rather than several per transaction.
type decoder struct {
	r       reader
	refs    slab[chain.TxOutRef]
	outs    slab[TxOut]
	assets  slab[Asset]
	mints   slab[MintAsset]
	reds    slab[Redeemer]
	metas   slab[Metadatum]
	hashes  slab[chain.Hash32]
	numbers slab[uint64]

	assetBuf []Asset     // reused while reading a multi-asset value
	mintBuf  []MintAsset // reused while reading a mint field
}

// slab hands out pieces of larger allocations. Pieces are capped, so an
// append to one never writes into the next.
type slab[T any] struct {
	free []T
	next int
}

// items reads the entries of the list l, each with item, into a slice from
// s (taken at the list's length when the head gives it); an entry's error
// is marked with its index.
func items[T any](r *reader, l list, s *slab[T], item func(*T) error) ([]T, error) {
	var out []T
	if !l.indef {
		out = s.take(l.n)
	}
	for i := 0; ; i++ {
		more, err := r.more(&l)
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		var zero T
		out = append(out, zero)
		if err := item(&out[i]); err != nil {
			return nil, inFieldIndex(err, "", i)
		}
	}
}

// take returns an empty slice with room for n values, or nil for n = 0.
func (s *slab[T]) take(n int) []T {
	if n == 0 {
		return nil
	}
	if n > len(s.free) {
		s.next = min(max(2*s.next, 32), 4096)
		s.free = make([]T, max(n, s.next))
	}
	out := s.free[:0:n]
	s.free = s.free[n:]
	return out
}

// one returns a pointer to a copy of v.
func (s *slab[T]) one(v T) *T {
	p := s.take(1)[:1]
	p[0] = v
	return &p[0]
}

// inTx records the transaction index and field of a *DecodeError.
func inTx(err error, i int, field string) error {
	var de *DecodeError
	if errors.As(err, &de) && de.Tx < 0 {
		de.Tx = i
	}
	return inField(err, field)
}

// body reads the four entries after the header of an Alonzo-or-later block:
//
//	[* transaction_body], [* transaction_witness_set],
//	{* transaction_index => auxiliary_data}, [* transaction_index]
func (d *decoder) body(b *Block, blk *list) error {
	r := &d.r
	next := func(what string) error {
		ok, err := r.more(blk)
		if err == nil && !ok {
			err = r.errAt(r.pos, ErrMalformed, "block ends before its %s", what)
		}
		return err
	}

	if err := next("transaction bodies"); err != nil {
		return err
	}
	l, err := r.array(minTxBody)
	if err != nil {
		return inField(err, "transaction_bodies")
	}
	var txs []Tx
	if !l.indef {
		txs = make([]Tx, 0, l.n)
	}
	for i := 0; ; i++ {
		more, err := r.more(&l)
		if err != nil {
			return inField(err, "transaction_bodies")
		}
		if !more {
			break
		}
		txs = append(txs, Tx{Index: i, IsValid: true})
		tx := &txs[i]
		start := r.pos
		if err := d.txBody(tx); err != nil {
			return inTx(err, i, "body")
		}
		tx.ID = blake2b.Sum256(r.buf[start:r.pos])
	}

	if err := next("witness sets"); err != nil {
		return err
	}
	start := r.pos
	if l, err = r.array(1); err != nil {
		return inField(err, "transaction_witness_sets")
	}
	n := 0
	for ; ; n++ {
		more, err := r.more(&l)
		if err != nil {
			return inField(err, "transaction_witness_sets")
		}
		if !more {
			break
		}
		if n >= len(txs) {
			return r.errAt(start, ErrMalformed, "more witness sets than the %d transaction bodies", len(txs))
		}
		if err := d.witnesses(&txs[n]); err != nil {
			return inTx(err, n, "witnesses")
		}
	}
	if n != len(txs) {
		return r.errAt(start, ErrMalformed, "%d witness sets for %d transaction bodies", n, len(txs))
	}

	if err := next("auxiliary data"); err != nil {
		return err
	}
	if err := d.auxDataSet(txs); err != nil {
		return err
	}

	if err := next("invalid transactions"); err != nil {
		return err
	}
	if err := d.invalidTxs(txs); err != nil {
		return inField(err, "invalid_transactions")
	}
	if err := r.end(blk, "block"); err != nil {
		return err
	}
	if r.pos != len(r.buf) {
		return r.errAt(r.pos, ErrMalformed, "%d bytes after the block", len(r.buf)-r.pos)
	}
	b.Txs = txs
	return nil
}

// auxDataSet reads {* transaction_index => auxiliary_data}.
func (d *decoder) auxDataSet(txs []Tx) error {
	r := &d.r
	l, err := r.mapHead(2)
	if err != nil {
		return inField(err, "auxiliary_data_set")
	}
	var small [8]uint64
	seen := small[:]
	if len(txs) > 64*len(small) {
		seen = make([]uint64, (len(txs)+63)/64)
	}
	for {
		more, err := r.more(&l)
		if err != nil {
			return inField(err, "auxiliary_data_set")
		}
		if !more {
			return nil
		}
		at := r.pos
		i, err := r.uint()
		if err != nil {
			return inField(err, "auxiliary_data_set")
		}
		if i >= uint64(len(txs)) {
			return r.errAt(at, ErrMalformed, "auxiliary data for transaction %d of %d", i, len(txs))
		}
		if seen[i/64]&(1<<(i%64)) != 0 {
			return r.errAt(at, ErrMalformed, "auxiliary data for transaction %d twice", i)
		}
		seen[i/64] |= 1 << (i % 64)
		if err := d.auxData(&txs[i]); err != nil {
			return inTx(err, int(i), "auxiliary_data")
		}
	}
}

// invalidTxs reads [* transaction_index] and clears IsValid of those listed.
func (d *decoder) invalidTxs(txs []Tx) error {
	r := &d.r
	return r.entries(r.set, 1, func() error {
		at := r.pos
		i, err := r.uint()
		if err != nil {
			return err
		}
		if i >= uint64(len(txs)) {
			return r.errAt(at, ErrMalformed, "invalid transaction %d of %d", i, len(txs))
		}
		txs[i].IsValid = false
		return nil
	})
}

// CBOR tags the ledger uses.
const (
	tagEncodedCBOR   = 24  // bytes holding a CBOR item
	tagSet           = 258 // a set, around an array
	tagAuxiliaryData = 259 // Alonzo-form auxiliary data
)
