// Package plutusdata implements Plutus Data, the value type of Cardano datums and
// redeemers, with a CBOR codec that reads every valid form the ledger accepts and
// writes the canonical form the Plutus serialiser writes, and the cardano-cli
// "detailed schema" JSON form.
//
// The decoder works on a byte slice without reflection. It bounds nesting depth
// and never allocates from a declared length more than the remaining input can
// hold, so hostile input costs at most linear memory. The encoder is canonical:
// re-encoding a datum that a Haskell tool wrote gives identical bytes, which is
// what datum and merkleization hashes depend on.
package plutusdata

import (
	"bytes"
	"cmp"
	"math/big"
	"slices"
	"strconv"
)

// Data is a Plutus Data value: one of *Constr, *Map, *List, *Integer or *Bytes.
type Data interface {
	isData()
}

// Constr is a constructor application: a constructor index and its fields.
type Constr struct {
	Index  uint64
	Fields []Data
}

// Pair is one key/value entry of a Map.
type Pair struct {
	Key   Data
	Value Data
}

// Map is an association list. Order is significant and duplicates are kept,
// exactly as in the ledger's Data type.
type Map struct {
	Pairs []Pair
}

// List is a list of values.
type List struct {
	Items []Data
}

// Integer is an arbitrary-precision integer. Values that fit in an int64 are
// held without a big.Int so that decoding ordinary datums allocates little.
type Integer struct {
	small int64
	big   *big.Int // nil when the value is small
}

// Bytes is a byte string.
type Bytes struct {
	B []byte
}

func (*Constr) isData()  {}
func (*Map) isData()     {}
func (*List) isData()    {}
func (*Integer) isData() {}
func (*Bytes) isData()   {}

// NewConstr returns a constructor application.
func NewConstr(index uint64, fields ...Data) *Constr {
	if fields == nil {
		fields = []Data{}
	}
	return &Constr{Index: index, Fields: fields}
}

// NewList returns a list.
func NewList(items ...Data) *List {
	if items == nil {
		items = []Data{}
	}
	return &List{Items: items}
}

// NewMap returns a map with the given entries in order.
func NewMap(pairs ...Pair) *Map {
	if pairs == nil {
		pairs = []Pair{}
	}
	return &Map{Pairs: pairs}
}

// NewBytes returns a byte string. The slice is not copied.
func NewBytes(b []byte) *Bytes { return &Bytes{B: b} }

// NewInt returns an integer holding v.
func NewInt(v int64) *Integer { return &Integer{small: v} }

// NewBigInt returns an integer holding a copy of v.
func NewBigInt(v *big.Int) *Integer {
	if v.IsInt64() {
		return &Integer{small: v.Int64()}
	}
	return &Integer{big: new(big.Int).Set(v)}
}

// Big returns a copy of the integer's value.
func (i *Integer) Big() *big.Int {
	if i.big == nil {
		return big.NewInt(i.small)
	}
	return new(big.Int).Set(i.big)
}

// Int64 returns the value and whether it fits in an int64.
func (i *Integer) Int64() (int64, bool) {
	if i.big == nil {
		return i.small, true
	}
	return 0, false
}

// Uint64 returns the value and whether it fits in a uint64.
func (i *Integer) Uint64() (uint64, bool) {
	if i.big == nil {
		return uint64(i.small), i.small >= 0
	}
	if !i.big.IsUint64() {
		return 0, false
	}
	return i.big.Uint64(), true
}

// Sign returns -1, 0 or +1 depending on the sign of the value.
func (i *Integer) Sign() int {
	switch {
	case i.big != nil:
		return i.big.Sign()
	case i.small < 0:
		return -1
	case i.small > 0:
		return 1
	}
	return 0
}

// String returns the decimal form of the value.
func (i *Integer) String() string {
	if i.big == nil {
		return strconv.FormatInt(i.small, 10)
	}
	return i.big.String()
}

// cmp compares two integers.
func (i *Integer) cmp(j *Integer) int {
	if i.big == nil && j.big == nil {
		return cmp.Compare(i.small, j.small)
	}
	return i.Big().Cmp(j.Big())
}

// Equal reports whether a and b are the same value. Encoding forms (definite or
// indefinite lengths, chunking) are not part of a value, so they do not matter.
func Equal(a, b Data) bool {
	switch x := a.(type) {
	case *Constr:
		y, ok := b.(*Constr)
		return ok && x.Index == y.Index && slices.EqualFunc(x.Fields, y.Fields, Equal)
	case *Map:
		y, ok := b.(*Map)
		return ok && slices.EqualFunc(x.Pairs, y.Pairs, func(p, q Pair) bool { return Equal(p.Key, q.Key) && Equal(p.Value, q.Value) })
	case *List:
		y, ok := b.(*List)
		return ok && slices.EqualFunc(x.Items, y.Items, Equal)
	case *Integer:
		y, ok := b.(*Integer)
		return ok && x.cmp(y) == 0
	case *Bytes:
		y, ok := b.(*Bytes)
		return ok && bytes.Equal(x.B, y.B)
	}
	return false
}
