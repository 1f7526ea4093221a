// Package chain holds the plain types every stage of the pipeline shares:
// hashes, chain points, block headers, tips and transaction output references.
// It imports nothing from the project.
package chain

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Hash32 is a 32-byte blake2b-256 hash: block hashes, transaction ids, datum hashes.
type Hash32 [32]byte

// Hash28 is a 28-byte blake2b-224 hash: key hashes, script hashes, policy ids.
type Hash28 [28]byte

// String returns the lowercase hex of the hash.
func (h Hash32) String() string { return hex.EncodeToString(h[:]) }

// String returns the lowercase hex of the hash.
func (h Hash28) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether every byte is zero.
func (h Hash32) IsZero() bool { return h == Hash32{} }

// MarshalText writes the hash as hex.
func (h Hash32) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads a hash from hex.
func (h *Hash32) UnmarshalText(text []byte) error { return unmarshalText(h, text, ParseHash32) }

// MarshalText writes the hash as hex.
func (h Hash28) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText reads a hash from hex.
func (h *Hash28) UnmarshalText(text []byte) error { return unmarshalText(h, text, ParseHash28) }

// unmarshalText sets *dst to what parse reads from text; it leaves *dst as
// it is when parse fails.
func unmarshalText[T any](dst *T, text []byte, parse func(string) (T, error)) error {
	v, err := parse(string(text))
	if err == nil {
		*dst = v
	}
	return err
}

// ParseHash32 reads 64 hex digits.
func ParseHash32(s string) (Hash32, error) {
	var h Hash32
	err := parseHex(h[:], s)
	return h, err
}

// ParseHash28 reads 56 hex digits.
func ParseHash28(s string) (Hash28, error) {
	var h Hash28
	err := parseHex(h[:], s)
	return h, err
}

// parseHex reads the hash s, hex digits for all of dst, into dst.
func parseHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("hash %q: want %d hex digits, got %d", s, 2*len(dst), len(s))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return fmt.Errorf("hash %q: %w", s, err)
	}
	return nil
}

// Point is a position on the chain: a block's slot and hash, or the origin
// (the zero value) before the first block.
type Point struct {
	Slot uint64 `json:"slot"`
	Hash Hash32 `json:"hash"`
}

// Origin is the point before the first block.
var Origin = Point{}

// IsOrigin reports whether p is the origin.
func (p Point) IsOrigin() bool { return p == Origin }

// String returns "origin" or "SLOT.HASH".
func (p Point) String() string {
	if p.IsOrigin() {
		return "origin"
	}
	return strconv.FormatUint(p.Slot, 10) + "." + p.Hash.String()
}

// ErrBadPoint is wrapped by ParsePoint errors.
var ErrBadPoint = errors.New("bad chain point")

// ParsePoint reads "origin" or "SLOT.HASH".
func ParsePoint(s string) (Point, error) {
	if s == "origin" {
		return Origin, nil
	}
	slot, hash, ok := strings.Cut(s, ".")
	if !ok {
		return Point{}, fmt.Errorf("%w %q: want origin or SLOT.HASH", ErrBadPoint, s)
	}
	n, err := strconv.ParseUint(slot, 10, 64)
	if err != nil {
		return Point{}, fmt.Errorf("%w %q: slot: %v", ErrBadPoint, s, err)
	}
	h, err := ParseHash32(hash)
	if err != nil {
		return Point{}, fmt.Errorf("%w %q: %v", ErrBadPoint, s, err)
	}
	return Point{Slot: n, Hash: h}, nil
}

// BlockHeader identifies a block: every message and record carries one.
type BlockHeader struct {
	Slot    uint64 `json:"slot"`
	BlockNo uint64 `json:"blockNo"`
	Hash    Hash32 `json:"hash"`
}

// Point returns the header's chain point.
func (h BlockHeader) Point() Point { return Point{Slot: h.Slot, Hash: h.Hash} }

// Tip is the newest block of a chain as a node reports it.
type Tip struct {
	Point   Point  `json:"point"`
	BlockNo uint64 `json:"blockNo"`
}

// TxOutRef names a transaction output: the id of the transaction that made
// it and the output's index. Its text form is "TXID#INDEX"; a Marlowe
// contract id is the TxOutRef of the output that created it.
type TxOutRef struct {
	TxID  Hash32 `json:"txId"`
	Index uint32 `json:"index"`
}

// String returns "TXID#INDEX".
func (r TxOutRef) String() string {
	return r.TxID.String() + "#" + strconv.FormatUint(uint64(r.Index), 10)
}

// MarshalText writes "TXID#INDEX".
func (r TxOutRef) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads "TXID#INDEX".
func (r *TxOutRef) UnmarshalText(text []byte) error { return unmarshalText(r, text, ParseTxOutRef) }

// ParseTxOutRef reads "TXID#INDEX".
func ParseTxOutRef(s string) (TxOutRef, error) {
	id, ix, ok := strings.Cut(s, "#")
	if !ok {
		return TxOutRef{}, fmt.Errorf("output reference %q: want TXID#INDEX", s)
	}
	h, err := ParseHash32(id)
	if err != nil {
		return TxOutRef{}, fmt.Errorf("output reference %q: %w", s, err)
	}
	n, err := strconv.ParseUint(ix, 10, 32)
	if err != nil {
		return TxOutRef{}, fmt.Errorf("output reference %q: index: %v", s, err)
	}
	return TxOutRef{TxID: h, Index: uint32(n)}, nil
}

// Compare orders references as the ledger sorts transaction inputs: by
// transaction id bytes, then by index.
func (r TxOutRef) Compare(o TxOutRef) int {
	if c := strings.Compare(string(r.TxID[:]), string(o.TxID[:])); c != 0 {
		return c
	}
	return cmp.Compare(r.Index, o.Index)
}
