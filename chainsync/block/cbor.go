package block

import (
	"errors"
	"fmt"
	"math"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// MaxDepth bounds how many indefinite-length arrays and maps may be open at
// once inside one item. Definite-length nesting needs no memory to skip and
// is not limited. An indefinite level takes at least two bytes and a
// transaction at most 16,384, so no value that can be on chain comes close.
const MaxDepth = 8192

// Errors wrapped by DecodeError.
var (
	// ErrTruncated means the input ends inside a data item.
	ErrTruncated = errors.New("unexpected end of input")
	// ErrMalformed means the input is not well-formed CBOR, or a well-formed
	// item does not have the shape the ledger gives that field.
	ErrMalformed = errors.New("malformed")
	// ErrTooDeep means more than MaxDepth indefinite-length containers are
	// open at once.
	ErrTooDeep = errors.New("nesting too deep")
)

// DecodeError reports where and why a block could not be decoded.
type DecodeError struct {
	Type   Type   // the block type being decoded
	Offset int    // byte offset in the block where the problem was found
	Tx     int    // index of the transaction, or -1 outside transactions
	Field  string // the part being decoded, e.g. "body.outputs[2].value"
	Reason string // what is wrong
	Err    error  // ErrTruncated, ErrMalformed or ErrTooDeep
}

// Error describes the problem with its location.
func (e *DecodeError) Error() string {
	s := e.Type.String() + " block"
	if e.Tx >= 0 {
		s += fmt.Sprintf(" tx %d", e.Tx)
	}
	if e.Field != "" {
		s += " " + e.Field
	}
	return fmt.Sprintf("%s: at byte %d: %v: %s", s, e.Offset, e.Err, e.Reason)
}

// Unwrap returns the kind of problem: ErrTruncated, ErrMalformed or ErrTooDeep.
func (e *DecodeError) Unwrap() error { return e.Err }

// inField prefixes the field path of a *DecodeError. It runs on error paths
// only, so building field names costs nothing on success.
func inField(err error, field string) error {
	var de *DecodeError
	if errors.As(err, &de) {
		if de.Field == "" {
			de.Field = field
		} else if de.Field[0] == '[' {
			de.Field = field + de.Field
		} else {
			de.Field = field + "." + de.Field
		}
	}
	return err
}

// inFieldIndex is inField for the i-th element of a list field.
func inFieldIndex(err error, field string, i int) error {
	return inField(err, fmt.Sprintf("%s[%d]", field, i))
}

// CBOR major types.
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
	nullByte       = 0xf6
)

var majorNames = [8]string{"unsigned integer", "negative integer", "byte string", "text string", "array", "map", "tag", "simple value"}

// reader reads CBOR data items from a byte slice. It never allocates for
// definite-length items and never trusts a declared length beyond what the
// remaining input can hold.
type reader struct {
	buf []byte
	pos int
}

func (r *reader) errAt(off int, kind error, format string, args ...any) error {
	return &DecodeError{Offset: off, Tx: -1, Err: kind, Reason: fmt.Sprintf(format, args...)}
}

func (r *reader) truncated(off int) error {
	return r.errAt(off, ErrTruncated, "the item does not end before the input does (byte %d)", len(r.buf))
}

func (r *reader) remaining() int { return len(r.buf) - r.pos }

// head reads the initial byte and argument of a data item. For an
// indefinite-length item or a break it returns info 31 and argument 0.
// Non-minimal argument encodings are accepted.
func (r *reader) head() (major, info byte, arg uint64, err error) {
	if r.pos >= len(r.buf) {
		return 0, 0, 0, r.truncated(r.pos)
	}
	b := r.buf[r.pos]
	major, info = b>>5, b&0x1f
	if info < 24 {
		r.pos++
		return major, info, uint64(info), nil
	}
	var n int
	switch info {
	case 24:
		n = 1
	case 25:
		n = 2
	case 26:
		n = 4
	case 27:
		n = 8
	case infoIndefinite:
		if major == majorUint || major == majorNegint || major == majorTag {
			return 0, 0, 0, r.errAt(r.pos, ErrMalformed, "indefinite length on a %s", majorNames[major])
		}
		r.pos++
		return major, info, 0, nil
	default:
		return 0, 0, 0, r.errAt(r.pos, ErrMalformed, "reserved additional information %d", info)
	}
	if len(r.buf)-r.pos-1 < n {
		return 0, 0, 0, r.truncated(r.pos)
	}
	p := r.buf[r.pos+1 : r.pos+1+n]
	for _, c := range p {
		arg = arg<<8 | uint64(c)
	}
	r.pos += 1 + n
	return major, info, arg, nil
}

// expect reads a head and checks its major type. Indefinite lengths are
// reported with indef and are accepted only where allowIndef is set.
func (r *reader) expect(want byte, allowIndef bool) (arg uint64, indef bool, err error) {
	start := r.pos
	major, info, arg, err := r.head()
	if err != nil {
		return 0, false, err
	}
	if major != want || (info == infoIndefinite && major == majorSimple) {
		r.pos = start
		return 0, false, r.errAt(start, ErrMalformed, "want %s, got %s", majorNames[want], r.describe(major, info))
	}
	if info == infoIndefinite {
		if !allowIndef {
			r.pos = start
			return 0, false, r.errAt(start, ErrMalformed, "indefinite-length %s not allowed here", majorNames[major])
		}
		return 0, true, nil
	}
	return arg, false, nil
}

func (r *reader) describe(major, info byte) string {
	if major == majorSimple && info == infoIndefinite {
		return "break"
	}
	return majorNames[major]
}

// uint reads an unsigned integer.
func (r *reader) uint() (uint64, error) {
	v, _, err := r.expect(majorUint, false)
	return v, err
}

// uint32 reads an unsigned integer that must fit in 32 bits.
func (r *reader) uint32() (uint32, error) {
	start := r.pos
	v, err := r.uint()
	if err == nil && v > math.MaxUint32 {
		return 0, r.errAt(start, ErrMalformed, "integer %d does not fit in 32 bits", v)
	}
	return uint32(v), err
}

// int64 reads a signed integer in the int64 range.
func (r *reader) int64() (int64, error) {
	start := r.pos
	major, info, arg, err := r.head()
	if err != nil {
		return 0, err
	}
	switch {
	case major != majorUint && major != majorNegint:
		r.pos = start
		return 0, r.errAt(start, ErrMalformed, "want integer, got %s", r.describe(major, info))
	case arg > math.MaxInt64:
		return 0, r.errAt(start, ErrMalformed, "integer out of 64-bit range")
	case major == majorNegint:
		return -1 - int64(arg), nil
	}
	return int64(arg), nil
}

// bytes reads a byte string. A definite-length string aliases the input; an
// indefinite-length one is gathered into a new slice.
func (r *reader) bytes() ([]byte, error) {
	start := r.pos
	n, indef, err := r.expect(majorBytes, true)
	if err != nil {
		return nil, err
	}
	if !indef {
		if n > uint64(r.remaining()) {
			return nil, r.truncated(start)
		}
		b := r.buf[r.pos : r.pos+int(n) : r.pos+int(n)]
		r.pos += int(n)
		return b, nil
	}
	out := []byte{}
	for {
		if r.pos >= len(r.buf) {
			return nil, r.truncated(r.pos)
		}
		if r.buf[r.pos] == breakByte {
			r.pos++
			return out, nil
		}
		chunkAt := r.pos
		n, indef, err := r.expect(majorBytes, true)
		if err != nil {
			return nil, err
		}
		if indef {
			return nil, r.errAt(chunkAt, ErrMalformed, "nested indefinite-length chunk")
		}
		if n > uint64(r.remaining()) {
			return nil, r.truncated(chunkAt)
		}
		out = append(out, r.buf[r.pos:r.pos+int(n)]...)
		r.pos += int(n)
	}
}

// hash32 reads a 32-byte byte string.
func (r *reader) hash32() (h chain.Hash32, err error) {
	err = r.fixedBytes(h[:])
	return h, err
}

// hash28 reads a 28-byte byte string.
func (r *reader) hash28() (h chain.Hash28, err error) {
	err = r.fixedBytes(h[:])
	return h, err
}

// fixedBytes reads a byte string of exactly len(dst) bytes into dst.
func (r *reader) fixedBytes(dst []byte) error {
	start := r.pos
	b, err := r.bytes()
	if err != nil {
		return err
	}
	if len(b) != len(dst) {
		return r.errAt(start, ErrMalformed, "want %d-byte hash, got %d bytes", len(dst), len(b))
	}
	copy(dst, b)
	return nil
}

// list is an array or map being read: a count of the entries left, or
// indefinite (ended by a break).
type list struct {
	n     int
	indef bool
}

// more reports whether the list has another entry, consuming the break that
// ends an indefinite list.
func (r *reader) more(l *list) (bool, error) {
	if l.indef {
		if r.pos >= len(r.buf) {
			return false, r.truncated(r.pos)
		}
		if r.buf[r.pos] == breakByte {
			r.pos++
			return false, nil
		}
		return true, nil
	}
	if l.n == 0 {
		return false, nil
	}
	l.n--
	return true, nil
}

// entries reads a list head with head (minSize bytes at least an entry),
// then calls entry for every entry of the list, until its end.
func (r *reader) entries(head func(minSize int) (list, error), minSize int, entry func() error) error {
	l, err := head(minSize)
	if err != nil {
		return err
	}
	for {
		more, err := r.more(&l)
		if err != nil || !more {
			return err
		}
		if err := entry(); err != nil {
			return err
		}
	}
}

// array reads an array head. Every entry takes at least minSize bytes, so a
// declared count that the remaining input cannot hold is an error.
func (r *reader) array(minSize int) (list, error) {
	return r.container(majorArray, minSize)
}

// set reads the head of a set: an array, with or without tag 258.
func (r *reader) set(minSize int) (list, error) {
	if err := r.skipTag(tagSet); err != nil {
		return list{}, err
	}
	return r.array(minSize)
}

// mapHead reads a map head; every key-value pair takes at least minSize bytes.
func (r *reader) mapHead(minSize int) (list, error) {
	return r.container(majorMap, minSize)
}

func (r *reader) container(major byte, minSize int) (list, error) {
	start := r.pos
	n, indef, err := r.expect(major, true)
	if err != nil {
		return list{}, err
	}
	if indef {
		return list{indef: true}, nil
	}
	if n > uint64(r.remaining()/minSize) {
		return list{}, r.errAt(start, ErrTruncated, "%s of %d entries cannot fit in the %d bytes left", majorNames[major], n, r.remaining())
	}
	return list{n: int(n)}, nil
}

// fixedArray reads the head of an array that must have exactly n entries.
// The caller reads the n entries and then calls closeFixed with the returned
// flag, which checks the break of an indefinite-length array.
func (r *reader) fixedArray(n int, what string) (indef bool, err error) {
	start := r.pos
	l, err := r.array(1)
	if err != nil {
		return false, err
	}
	if !l.indef && l.n != n {
		return false, r.errAt(start, ErrMalformed, "%s: want %d entries, got %d", what, n, l.n)
	}
	return l.indef, nil
}

// fixed reads an array of exactly n entries, the entries with entries.
func (r *reader) fixed(n int, what string, entries func() error) error {
	indef, err := r.fixedArray(n, what)
	if err != nil {
		return err
	}
	if err := entries(); err != nil {
		return err
	}
	return r.closeFixed(indef, what)
}

// closeFixed checks the end of an array read with fixedArray.
func (r *reader) closeFixed(indef bool, what string) error {
	if !indef {
		return nil
	}
	if r.pos >= len(r.buf) {
		return r.truncated(r.pos)
	}
	if r.buf[r.pos] != breakByte {
		return r.errAt(r.pos, ErrMalformed, "%s has too many entries", what)
	}
	r.pos++
	return nil
}

// end checks that a list has no entries left.
func (r *reader) end(l *list, what string) error {
	start := r.pos
	more, err := r.more(l)
	if err != nil {
		return err
	}
	if more {
		return r.errAt(start, ErrMalformed, "%s has too many entries", what)
	}
	return nil
}

// skipTag consumes tag num if the next item is that tag.
func (r *reader) skipTag(num uint64) error {
	if r.pos >= len(r.buf) || r.buf[r.pos]>>5 != majorTag {
		return nil
	}
	start := r.pos
	_, _, arg, err := r.head()
	if err != nil {
		return err
	}
	if arg != num {
		r.pos = start
	}
	return nil
}

// tag reads a tag head that must be num.
func (r *reader) tag(num uint64) error {
	start := r.pos
	arg, _, err := r.expect(majorTag, false)
	if err != nil {
		return err
	}
	if arg != num {
		return r.errAt(start, ErrMalformed, "want tag %d, got tag %d", num, arg)
	}
	return nil
}

// isNull consumes a null if it is next.
func (r *reader) isNull() bool {
	if r.pos < len(r.buf) && r.buf[r.pos] == nullByte {
		r.pos++
		return true
	}
	return false
}

// peekMajor returns the major type of the next item.
func (r *reader) peekMajor() (byte, error) {
	if r.pos >= len(r.buf) {
		return 0, r.truncated(r.pos)
	}
	return r.buf[r.pos] >> 5, nil
}

// frame is an open indefinite-length container while skipping.
type frame struct {
	pend  uint64 // items owed to definite containers before a break may come
	indef bool   // the frame ends with a break
	isMap bool   // an indefinite map: its direct entries must pair up
	odd   bool   // an odd number of direct entries has been read
}

// skip moves past one well-formed data item without building it. It does not
// recurse: definite-length containers only add to a count of items owed, and
// each open indefinite-length container takes one frame, at most MaxDepth.
func (r *reader) skip() error {
	var small [32]frame
	stack := small[:0]
	f := frame{pend: 1}
	for {
		if f.pend == 0 {
			if !f.indef {
				return nil
			}
			if r.pos >= len(r.buf) {
				return r.truncated(r.pos)
			}
			if r.buf[r.pos] == breakByte {
				if f.isMap && f.odd {
					return r.errAt(r.pos, ErrMalformed, "indefinite map with a key and no value")
				}
				r.pos++
				f = stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				continue
			}
			f.odd = !f.odd
		} else {
			f.pend--
		}
		start := r.pos
		major, info, arg, err := r.head()
		if err != nil {
			return err
		}
		switch major {
		case majorBytes, majorText:
			if info == infoIndefinite {
				if err := r.skipChunks(major); err != nil {
					return err
				}
			} else if arg > uint64(r.remaining()) {
				return r.truncated(start)
			} else {
				r.pos += int(arg)
			}
		case majorArray, majorMap:
			if info == infoIndefinite {
				if len(stack) >= MaxDepth {
					return r.errAt(start, ErrTooDeep, "more than %d indefinite-length containers open", MaxDepth)
				}
				stack = append(stack, f)
				f = frame{indef: true, isMap: major == majorMap}
				continue
			}
			per := uint64(1)
			if major == majorMap {
				per = 2
			}
			if arg > uint64(r.remaining())/per {
				return r.errAt(start, ErrTruncated, "%s of %d entries cannot fit in the %d bytes left", majorNames[major], arg, r.remaining())
			}
			f.pend += arg * per
		case majorTag:
			f.pend++
		case majorSimple:
			if info == infoIndefinite {
				return r.errAt(start, ErrMalformed, "unexpected break")
			}
			if info == 24 && arg < 32 {
				return r.errAt(start, ErrMalformed, "simple value %d in two bytes", arg)
			}
		}
	}
}

// skipChunks skips the chunks of an indefinite-length byte or text string
// up to and including its break.
func (r *reader) skipChunks(major byte) error {
	for {
		if r.pos >= len(r.buf) {
			return r.truncated(r.pos)
		}
		if r.buf[r.pos] == breakByte {
			r.pos++
			return nil
		}
		start := r.pos
		n, indef, err := r.expect(major, true)
		if err != nil {
			return err
		}
		if indef {
			return r.errAt(start, ErrMalformed, "nested indefinite-length chunk")
		}
		if n > uint64(r.remaining()) {
			return r.truncated(start)
		}
		r.pos += int(n)
	}
}

// raw skips one item and returns its bytes, aliasing the input.
func (r *reader) raw() ([]byte, error) {
	start := r.pos
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.buf[start:r.pos:r.pos], nil
}
