package plutusdata

import (
	"math/big"
)

// Encode writes d in the canonical form of the Plutus serialiser
// (PlutusCore.Data.encodeData):
//   - constructor i in 0..6 as tag 121+i, 7..127 as tag 1280+(i-7), otherwise
//     tag 102 wrapping the definite array [i, fields];
//   - constructor fields and lists: indefinite-length when non-empty, 0x80 when empty;
//   - maps: definite length;
//   - integers in [-2^64, 2^64-1] as CBOR integers, others as bignums (tags 2 and 3);
//   - byte strings up to 64 bytes definite, longer ones as an indefinite
//     byte string of 64-byte chunks.
func Encode(d Data) []byte {
	return AppendEncode(make([]byte, 0, 256), d)
}

// AppendEncode appends the canonical encoding of d to dst.
func AppendEncode(dst []byte, d Data) []byte {
	switch x := d.(type) {
	case *Constr:
		switch {
		case x.Index <= 6:
			dst = AppendHead(dst, majorTag, 121+x.Index)
		case x.Index <= 127:
			dst = AppendHead(dst, majorTag, 1280+x.Index-7)
		default:
			dst = AppendHead(dst, majorTag, 102)
			dst = AppendHead(dst, majorArray, 2)
			dst = AppendHead(dst, majorUint, x.Index)
		}
		return appendList(dst, x.Fields)
	case *List:
		return appendList(dst, x.Items)
	case *Map:
		dst = AppendHead(dst, majorMap, uint64(len(x.Pairs)))
		for _, p := range x.Pairs {
			dst = AppendEncode(dst, p.Key)
			dst = AppendEncode(dst, p.Value)
		}
		return dst
	case *Integer:
		return appendInteger(dst, x)
	case *Bytes:
		return appendBytes(dst, x.B)
	}
	panic("plutusdata: encode of a nil or foreign Data value")
}

func appendList(dst []byte, items []Data) []byte {
	if len(items) == 0 {
		return append(dst, 0x80)
	}
	dst = append(dst, 0x9f)
	for _, it := range items {
		dst = AppendEncode(dst, it)
	}
	return append(dst, breakByte)
}

// AppendHead appends a CBOR head, major type major (0 to 7) with argument
// arg, in its shortest form, as canonical CBOR wants it. It is the one
// CBOR head writer of the module: the block encoder and the devnet's
// metadata use it too.
func AppendHead(dst []byte, major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return append(dst, m|byte(arg))
	case arg <= 0xff:
		return append(dst, m|24, byte(arg))
	case arg <= 0xffff:
		return append(dst, m|25, byte(arg>>8), byte(arg))
	case arg <= 0xffffffff:
		return append(dst, m|26, byte(arg>>24), byte(arg>>16), byte(arg>>8), byte(arg))
	}
	return append(dst, m|27, byte(arg>>56), byte(arg>>48), byte(arg>>40), byte(arg>>32),
		byte(arg>>24), byte(arg>>16), byte(arg>>8), byte(arg))
}

const chunkSize = 64

func appendBytes(dst []byte, b []byte) []byte {
	if len(b) <= chunkSize {
		dst = AppendHead(dst, majorBytes, uint64(len(b)))
		return append(dst, b...)
	}
	dst = append(dst, 0x5f)
	for len(b) > 0 {
		n := min(len(b), chunkSize)
		dst = AppendHead(dst, majorBytes, uint64(n))
		dst = append(dst, b[:n]...)
		b = b[n:]
	}
	return append(dst, breakByte)
}

var (
	twoTo64    = new(big.Int).Lsh(big.NewInt(1), 64)
	minusTwo64 = new(big.Int).Neg(twoTo64)
)

func appendInteger(dst []byte, i *Integer) []byte {
	if i.big == nil {
		if i.small >= 0 {
			return AppendHead(dst, majorUint, uint64(i.small))
		}
		return AppendHead(dst, majorNegint, uint64(-1-i.small))
	}
	v := i.big
	switch {
	case v.Sign() >= 0 && v.Cmp(twoTo64) < 0:
		return AppendHead(dst, majorUint, v.Uint64())
	case v.Sign() < 0 && v.Cmp(minusTwo64) >= 0:
		n := new(big.Int).Neg(v)
		n.Sub(n, bigOne)
		return AppendHead(dst, majorNegint, n.Uint64())
	case v.Sign() > 0:
		dst = AppendHead(dst, majorTag, 2)
		return appendBytes(dst, v.Bytes())
	}
	n := new(big.Int).Neg(v)
	n.Sub(n, bigOne)
	dst = AppendHead(dst, majorTag, 3)
	return appendBytes(dst, n.Bytes())
}
