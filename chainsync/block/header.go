package block

import (
	"errors"
	"math"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// DefaultByronEpochLength is the number of slots in a Byron epoch on mainnet
// and preprod: ten times the security parameter k = 2160.
const DefaultByronEpochLength = 21600

// Options tunes decoding. The zero value suits mainnet and preprod.
type Options struct {
	// ByronEpochLength is the number of slots in a Byron epoch, used to turn
	// a Byron block's epoch and slot-in-epoch into an absolute slot. Zero
	// means DefaultByronEpochLength.
	ByronEpochLength uint64

	// Copy makes DecodeBlock decode from its own copy of the input, so that
	// the result shares no memory with the caller's buffer and the buffer can
	// be reused. It costs one allocation of the block's size (for blocks whose
	// transactions are decoded; headers never alias). Without it the
	// byte slices of the result (addresses, asset names, datums, redeemer
	// data, metadata values) alias the input.
	Copy bool
}

func (o Options) byronEpochLength() uint64 {
	if o.ByronEpochLength == 0 {
		return DefaultByronEpochLength
	}
	return o.ByronEpochLength
}

// blockLength is the number of entries in the block array of each type.
func blockLength(t Type) int {
	switch {
	case t == TypeByronEBB || t == TypeByron:
		return 3
	case t.HasPlutus():
		return 5
	}
	return 4
}

// DecodeHeader reads the header of a block of any era: its slot, number,
// hash and previous hash. It reads only the header, so it does not check
// the rest of the block. raw is the bare era block as chain-sync delivers it
// (no hard-fork-combinator wrapper) and t its node-to-client block type. The
// result has no transactions and shares no memory with raw.
func DecodeHeader(t Type, raw []byte, opts Options) (Block, error) {
	r := reader{buf: raw}
	b, _, err := decodeHeader(&r, t, opts)
	if err != nil {
		return Block{}, withType(err, t)
	}
	return b, nil
}

// withType records the block type in a *DecodeError.
func withType(err error, t Type) error {
	var de *DecodeError
	if errors.As(err, &de) {
		de.Type = t
	}
	return err
}

// decodeHeader reads the block array head and the header, leaving r at the
// second entry of the block array, which it returns.
func decodeHeader(r *reader, t Type, opts Options) (Block, list, error) {
	if t > TypeConway {
		return Block{}, list{}, r.errAt(0, ErrMalformed, "unknown block type %d", uint(t))
	}
	start := r.pos
	l, err := r.array(1)
	if err != nil {
		return Block{}, l, inField(err, "block")
	}
	if want := blockLength(t); !l.indef && l.n != want {
		return Block{}, l, r.errAt(start, ErrMalformed, "block: want %d entries, got %d", want, l.n)
	}
	if ok, err := r.more(&l); err != nil || !ok {
		if err == nil {
			err = r.errAt(r.pos, ErrMalformed, "block has no header")
		}
		return Block{}, l, err
	}
	hstart := r.pos
	if err := r.skip(); err != nil {
		return Block{}, l, inField(err, "header")
	}
	hdr := r.buf[hstart:r.pos]
	hr := reader{buf: r.buf[:r.pos], pos: hstart}
	b := Block{Type: t}
	if t == TypeByronEBB || t == TypeByron {
		err = byronHeader(&hr, t, opts.byronEpochLength(), &b)
	} else {
		err = shelleyHeader(&hr, &b)
	}
	if err != nil {
		return Block{}, l, inField(err, "header")
	}
	if t == TypeByronEBB || t == TypeByron {
		b.Header.Hash = byronHash(t, hdr)
	} else {
		b.Header.Hash = blake2b.Sum256(hdr)
	}
	return b, l, nil
}

// byronHash is the hash of a Byron header: blake2b-256 of the header wrapped
// in the array [type, header].
func byronHash(t Type, hdr []byte) chain.Hash32 {
	var small [1024]byte
	var buf []byte
	if len(hdr)+2 <= len(small) {
		buf = small[:len(hdr)+2]
	} else {
		buf = make([]byte, len(hdr)+2)
	}
	buf[0], buf[1] = 0x82, byte(t)
	copy(buf[2:], hdr)
	return blake2b.Sum256(buf)
}

// shelleyHeader reads [header_body, signature], where header_body starts with
// block number, slot and previous hash (null for the first block).
func shelleyHeader(r *reader, b *Block) error {
	if _, err := r.fixedArray(2, "header"); err != nil {
		return err
	}
	bodyStart := r.pos
	l, err := r.array(1)
	if err != nil {
		return inField(err, "body")
	}
	if !l.indef && l.n < 3 {
		return r.errAt(bodyStart, ErrMalformed, "header body: want at least 3 entries, got %d", l.n)
	}
	if b.Header.BlockNo, err = r.uint(); err != nil {
		return inField(err, "body.block_number")
	}
	if b.Header.Slot, err = r.uint(); err != nil {
		return inField(err, "body.slot")
	}
	if !r.isNull() {
		if b.PrevHash, err = r.hash32(); err != nil {
			return inField(err, "body.prev_hash")
		}
	}
	// The rest of the header was checked to be well formed by skip.
	return nil
}

// byronHeader reads a Byron header:
//
//	[protocol_magic, prev_block, body_proof, consensus_data, extra_data]
//
// where consensus_data is [[epoch, slot], pubkey, [difficulty], signature]
// for a main block and [epoch, [difficulty]] for an epoch boundary block.
func byronHeader(r *reader, t Type, epochLength uint64, b *Block) error {
	indef, err := r.fixedArray(5, "header")
	if err != nil {
		return err
	}
	if err := r.skip(); err != nil {
		return inField(err, "protocol_magic")
	}
	if b.PrevHash, err = r.hash32(); err != nil {
		return inField(err, "prev_block")
	}
	if err := r.skip(); err != nil {
		return inField(err, "body_proof")
	}
	var epoch, slot uint64
	if t == TypeByronEBB {
		cindef, err := r.fixedArray(2, "consensus_data")
		if err != nil {
			return inField(err, "consensus_data")
		}
		if epoch, err = r.uint(); err != nil {
			return inField(err, "consensus_data.epoch")
		}
		if b.Header.BlockNo, err = difficulty(r); err != nil {
			return inField(err, "consensus_data.difficulty")
		}
		if err := r.closeFixed(cindef, "consensus_data"); err != nil {
			return inField(err, "consensus_data")
		}
	} else {
		cindef, err := r.fixedArray(4, "consensus_data")
		if err != nil {
			return inField(err, "consensus_data")
		}
		sindef, err := r.fixedArray(2, "slot_id")
		if err != nil {
			return inField(err, "consensus_data.slot_id")
		}
		if epoch, err = r.uint(); err != nil {
			return inField(err, "consensus_data.slot_id.epoch")
		}
		slotAt := r.pos
		if slot, err = r.uint(); err != nil {
			return inField(err, "consensus_data.slot_id.slot")
		}
		if slot >= epochLength {
			return r.errAt(slotAt, ErrMalformed, "slot %d of an epoch of %d slots: wrong Byron epoch length?", slot, epochLength)
		}
		if err := r.closeFixed(sindef, "slot_id"); err != nil {
			return inField(err, "consensus_data.slot_id")
		}
		if err := r.skip(); err != nil {
			return inField(err, "consensus_data.pubkey")
		}
		if b.Header.BlockNo, err = difficulty(r); err != nil {
			return inField(err, "consensus_data.difficulty")
		}
		if err := r.skip(); err != nil {
			return inField(err, "consensus_data.signature")
		}
		if err := r.closeFixed(cindef, "consensus_data"); err != nil {
			return inField(err, "consensus_data")
		}
	}
	if epoch > (math.MaxUint64-slot)/epochLength {
		return r.errAt(r.pos, ErrMalformed, "epoch %d overflows the slot number", epoch)
	}
	b.Header.Slot = epoch*epochLength + slot
	if err := r.skip(); err != nil {
		return inField(err, "extra_data")
	}
	return r.closeFixed(indef, "header")
}

// difficulty reads [chain_difficulty], the Byron block number.
func difficulty(r *reader) (uint64, error) {
	indef, err := r.fixedArray(1, "difficulty")
	if err != nil {
		return 0, err
	}
	v, err := r.uint()
	if err != nil {
		return 0, err
	}
	return v, r.closeFixed(indef, "difficulty")
}
