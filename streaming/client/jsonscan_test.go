package client

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestStringStop8 holds the eight-byte test to stringClass's byte by byte,
// for every byte value at every position among bytes that do not stop the
// scan, and for random words.
func TestStringStop8(t *testing.T) {
	byBytes := func(w [8]byte) bool {
		for _, c := range w {
			if stringClass[c] != 0 {
				return true
			}
		}
		return false
	}
	check := func(w [8]byte) {
		if got, want := stringStop8(binary.LittleEndian.Uint64(w[:])), byBytes(w); got != want {
			t.Fatalf("%q: stringStop8 %v, byte by byte %v", w[:], got, want)
		}
	}
	for _, filler := range []byte{'a', '0', ' ', '!', '#', '[', ']', '~', 0x7f} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = filler
				}
				w[pos] = byte(c)
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		// Mostly printable ASCII, as in frames, with some of the rest.
		for i := range w {
			if r.IntN(4) != 0 {
				w[i] = 0x20 + w[i]%0x60
			}
		}
		check(w)
	}
}
