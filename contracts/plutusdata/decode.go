package plutusdata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
)

// DefaultMaxDepth bounds the nesting of decoded values. Every level of nesting
// takes at least one byte, and a datum is bounded by the ledger's maximum
// transaction size (16,384 bytes), so any datum that can be on chain fits.
const DefaultMaxDepth = 16384

// DecodeError reports where and why CBOR input is not Plutus Data.
type DecodeError struct {
	Offset int    // byte offset in the input where the problem was found
	Reason string // what is wrong
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("plutus data CBOR at byte %d: %s", e.Offset, e.Reason)
}

// ErrTrailingBytes is wrapped by Decode when a complete value is followed by
// more input.
var ErrTrailingBytes = errors.New("trailing bytes after the value")

// DecodeOptions tunes the decoder. The zero value uses the defaults.
type DecodeOptions struct {
	// MaxDepth bounds nesting; 0 means DefaultMaxDepth.
	MaxDepth int
}

// Decode decodes exactly one Plutus Data value that spans the whole input.
// Byte strings of the result that were one piece in the input share its
// memory: do not change the input while the result is in use.
func Decode(b []byte) (Data, error) {
	return DecodeOptions{}.Decode(b)
}

// Decode decodes exactly one Plutus Data value that spans the whole input.
func (o DecodeOptions) Decode(b []byte) (Data, error) {
	d, n, err := o.DecodePrefix(b)
	if err != nil {
		return nil, err
	}
	if n != len(b) {
		return nil, &DecodeError{Offset: n, Reason: fmt.Sprintf("%v (%d more)", ErrTrailingBytes, len(b)-n)}
	}
	return d, nil
}

// DecodePrefix decodes one Plutus Data value at the start of b and returns it
// with the number of bytes it took.
func (o DecodeOptions) DecodePrefix(b []byte) (Data, int, error) {
	max := o.MaxDepth
	if max <= 0 {
		max = DefaultMaxDepth
	}
	r := reader{buf: b, maxDepth: max}
	d, err := r.data(0)
	if err != nil {
		return nil, 0, err
	}
	return d, r.pos, nil
}

// Skip returns the length of the CBOR data item at the start of b without
// building it. It accepts any well-formed CBOR item, not only Plutus Data, and
// is what callers use to slice raw datum bytes out of a larger structure.
func Skip(b []byte) (int, error) {
	r := reader{buf: b, maxDepth: DefaultMaxDepth}
	if err := r.skip(0); err != nil {
		return 0, err
	}
	return r.pos, nil
}

const (
	majorUint   = 0
	majorNegint = 1
	majorBytes  = 2
	majorText   = 3
	majorArray  = 4
	majorMap    = 5
	majorTag    = 6
	majorSimple = 7

	infoIndefinite = 31
	breakByte      = 0xff
)

type reader struct {
	buf      []byte
	pos      int
	maxDepth int

	// Nodes are carved out of slabs and indefinite-length items are gathered
	// on a shared stack, so that decoding allocates a few large blocks rather
	// than one small block per node.
	constrs  []Constr
	integers []Integer
	byteStrs []Bytes
	lists    []List
	stack    []Data
}

const slabSize = 64

// carve takes the next node from a slab, starting a new slab of slabSize
// nodes when it is used up.
func carve[T any](slab *[]T) *T {
	if len(*slab) == 0 {
		*slab = make([]T, slabSize)
	}
	x := &(*slab)[0]
	*slab = (*slab)[1:]
	return x
}

func (r *reader) newConstr(index uint64, fields []Data) *Constr {
	c := carve(&r.constrs)
	c.Index, c.Fields = index, fields
	return c
}

func (r *reader) newSmall(v int64) *Integer {
	i := carve(&r.integers)
	i.small = v
	return i
}

func (r *reader) newBytes(b []byte) *Bytes {
	x := carve(&r.byteStrs)
	x.B = b
	return x
}

func (r *reader) newList(items []Data) *List {
	l := carve(&r.lists)
	l.Items = items
	return l
}

func (r *reader) fail(off int, format string, args ...any) error {
	return &DecodeError{Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// head reads an item head. For indefinite lengths it returns indefinite=true.
func (r *reader) head() (major byte, arg uint64, indefinite bool, err error) {
	start := r.pos
	if r.pos >= len(r.buf) {
		return 0, 0, false, r.fail(start, "unexpected end of input")
	}
	ib := r.buf[r.pos]
	r.pos++
	major = ib >> 5
	info := ib & 0x1f
	switch {
	case info < 24:
		return major, uint64(info), false, nil
	case info <= 27:
		n := 1 << (info - 24)
		if len(r.buf)-r.pos < n {
			r.pos = start
			return 0, 0, false, r.fail(start, "unexpected end of input in an item head")
		}
		switch n {
		case 1:
			arg = uint64(r.buf[r.pos])
		case 2:
			arg = uint64(binary.BigEndian.Uint16(r.buf[r.pos:]))
		case 4:
			arg = uint64(binary.BigEndian.Uint32(r.buf[r.pos:]))
		default:
			arg = binary.BigEndian.Uint64(r.buf[r.pos:])
		}
		r.pos += n
		return major, arg, false, nil
	case info == infoIndefinite:
		switch major {
		case majorBytes, majorText, majorArray, majorMap:
			return major, 0, true, nil
		case majorSimple:
			return major, 0, false, r.fail(start, "unexpected break")
		}
		return 0, 0, false, r.fail(start, "indefinite length is not allowed for major type %d", major)
	}
	return 0, 0, false, r.fail(start, "reserved additional information %d", info)
}

// atBreak consumes a break byte if one is next.
func (r *reader) atBreak() (bool, error) {
	if r.pos >= len(r.buf) {
		return false, r.fail(r.pos, "unexpected end of input before break")
	}
	if r.buf[r.pos] == breakByte {
		r.pos++
		return true, nil
	}
	return false, nil
}

// capacity bounds a preallocation from a declared count: every item takes at
// least minSize bytes, so no more can fit in the remaining input.
func (r *reader) capacity(declared uint64, minSize int) (int, error) {
	remaining := uint64(len(r.buf)-r.pos) / uint64(minSize)
	if declared > remaining {
		return 0, r.fail(r.pos, "declared length %d exceeds the remaining input", declared)
	}
	return int(declared), nil
}

func (r *reader) data(depth int) (Data, error) {
	if depth >= r.maxDepth {
		return nil, r.fail(r.pos, "nesting deeper than %d", r.maxDepth)
	}
	start := r.pos
	major, arg, indef, err := r.head()
	if err != nil {
		return nil, err
	}
	switch major {
	case majorUint:
		if arg <= 1<<63-1 {
			return r.newSmall(int64(arg)), nil
		}
		return &Integer{big: new(big.Int).SetUint64(arg)}, nil
	case majorNegint:
		if arg <= 1<<63-1 {
			return r.newSmall(-1 - int64(arg)), nil
		}
		v := new(big.Int).SetUint64(arg)
		v.Neg(v).Sub(v, bigOne)
		return &Integer{big: v}, nil
	case majorBytes:
		b, err := r.byteString(arg, indef)
		if err != nil {
			return nil, err
		}
		return r.newBytes(b), nil
	case majorArray:
		items, err := r.items(arg, indef, depth)
		if err != nil {
			return nil, err
		}
		return r.newList(items), nil
	case majorMap:
		return r.mapItems(arg, indef, depth)
	case majorTag:
		return r.tagged(start, arg, depth)
	case majorText:
		return nil, r.fail(start, "text string is not Plutus Data")
	}
	return nil, r.fail(start, "simple value or float is not Plutus Data")
}

var bigOne = big.NewInt(1)

func (r *reader) byteString(arg uint64, indef bool) ([]byte, error) {
	if !indef {
		n, err := r.capacity(arg, 1)
		if err != nil {
			return nil, err
		}
		b := r.buf[r.pos : r.pos+n : r.pos+n]
		r.pos += n
		return b, nil
	}
	out := []byte{}
	err := r.untilBreak(func() error {
		size, err := r.chunk(majorBytes, "a chunk of an indefinite byte string must be a definite byte string")
		if err != nil {
			return err
		}
		out = append(out, r.buf[r.pos:r.pos+size]...)
		r.pos += size
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// untilBreak calls item for each item of an indefinite-length item, until
// the break that ends it, which it consumes.
func (r *reader) untilBreak(item func() error) error {
	for {
		brk, err := r.atBreak()
		if err != nil || brk {
			return err
		}
		if err := item(); err != nil {
			return err
		}
	}
}

// chunk reads the head of a chunk of an indefinite-length string of type
// major (bad names the error when it is not a definite string of that type)
// and returns the size of its content.
func (r *reader) chunk(major byte, bad string) (int, error) {
	off := r.pos
	m, n, indef, err := r.head()
	if err != nil {
		return 0, err
	}
	if m != major || indef {
		return 0, r.fail(off, "%s", bad)
	}
	return r.capacity(n, 1)
}

func (r *reader) items(arg uint64, indef bool, depth int) ([]Data, error) {
	if !indef {
		n, err := r.capacity(arg, 1)
		if err != nil {
			return nil, err
		}
		items := make([]Data, n)
		for i := range items {
			if items[i], err = r.data(depth + 1); err != nil {
				return nil, err
			}
		}
		return items, nil
	}
	// Gather the items on the shared stack, then copy them out at their
	// final size. Nested lists push above this one's items and pop back.
	mark := len(r.stack)
	err := r.untilBreak(func() error {
		d, err := r.data(depth + 1)
		if err != nil {
			return err
		}
		r.stack = append(r.stack, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	items := make([]Data, len(r.stack)-mark)
	copy(items, r.stack[mark:])
	clear(r.stack[mark:])
	r.stack = r.stack[:mark]
	return items, nil
}

func (r *reader) mapItems(arg uint64, indef bool, depth int) (Data, error) {
	m := &Map{}
	if !indef {
		n, err := r.capacity(arg, 2)
		if err != nil {
			return nil, err
		}
		m.Pairs = make([]Pair, n)
		for i := range m.Pairs {
			if m.Pairs[i].Key, err = r.data(depth + 1); err != nil {
				return nil, err
			}
			if m.Pairs[i].Value, err = r.data(depth + 1); err != nil {
				return nil, err
			}
		}
		return m, nil
	}
	m.Pairs = []Pair{}
	err := r.untilBreak(func() error {
		k, err := r.data(depth + 1)
		if err != nil {
			return err
		}
		v, err := r.data(depth + 1)
		if err != nil {
			return err
		}
		m.Pairs = append(m.Pairs, Pair{Key: k, Value: v})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (r *reader) tagged(start int, tag uint64, depth int) (Data, error) {
	switch {
	case tag >= 121 && tag <= 127:
		return r.constrFields(tag-121, depth)
	case tag >= 1280 && tag <= 1400:
		return r.constrFields(tag-1280+7, depth)
	case tag == 102:
		off := r.pos
		major, n, indef, err := r.head()
		if err != nil {
			return nil, err
		}
		if major != majorArray || indef || n != 2 {
			return nil, r.fail(off, "tag 102 must wrap a definite array of two items")
		}
		off = r.pos
		major, index, _, err := r.head()
		if err != nil {
			return nil, err
		}
		if major != majorUint {
			return nil, r.fail(off, "tag 102 constructor index must be an unsigned integer")
		}
		return r.constrFields(index, depth)
	case tag == 2 || tag == 3:
		off := r.pos
		major, n, indef, err := r.head()
		if err != nil {
			return nil, err
		}
		if major != majorBytes {
			return nil, r.fail(off, "bignum tag %d must wrap a byte string", tag)
		}
		b, err := r.byteString(n, indef)
		if err != nil {
			return nil, err
		}
		v := new(big.Int).SetBytes(b)
		if tag == 3 {
			v.Neg(v).Sub(v, bigOne)
		}
		if v.IsInt64() {
			return &Integer{small: v.Int64()}, nil
		}
		return &Integer{big: v}, nil
	}
	return nil, r.fail(start, "tag %d is not Plutus Data", tag)
}

func (r *reader) constrFields(index uint64, depth int) (Data, error) {
	off := r.pos
	major, n, indef, err := r.head()
	if err != nil {
		return nil, err
	}
	if major != majorArray {
		return nil, r.fail(off, "constructor fields must be an array")
	}
	fields, err := r.items(n, indef, depth)
	if err != nil {
		return nil, err
	}
	return r.newConstr(index, fields), nil
}

// skip passes over any well-formed CBOR item.
func (r *reader) skip(depth int) error {
	if depth >= r.maxDepth {
		return r.fail(r.pos, "nesting deeper than %d", r.maxDepth)
	}
	start := r.pos
	major, arg, indef, err := r.head()
	if err != nil {
		return err
	}
	switch major {
	case majorUint, majorNegint:
		return nil
	case majorBytes, majorText:
		if !indef {
			n, err := r.capacity(arg, 1)
			if err != nil {
				return err
			}
			r.pos += n
			return nil
		}
		return r.untilBreak(func() error {
			size, err := r.chunk(major, "bad chunk in an indefinite string")
			r.pos += size
			return err
		})
	case majorArray, majorMap:
		per := 1
		if major == majorMap {
			per = 2
		}
		if !indef {
			if _, err := r.capacity(arg, per); err != nil {
				return err
			}
			for i := uint64(0); i < arg*uint64(per); i++ {
				if err := r.skip(depth + 1); err != nil {
					return err
				}
			}
			return nil
		}
		return r.untilBreak(func() error {
			for i := 0; i < per; i++ {
				if err := r.skip(depth + 1); err != nil {
					return err
				}
			}
			return nil
		})
	case majorTag:
		return r.skip(depth + 1)
	case majorSimple:
		return nil
	}
	return r.fail(start, "malformed item")
}
