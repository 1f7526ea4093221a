package client

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader gives a message in reads of random sizes, the last one with
// io.EOF or, when eofAlone, followed by a read of none with io.EOF (both
// are what a WebSocket message reader does).
type chunkReader struct {
	data     []byte
	rng      *rand.Rand
	eofAlone bool
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), 1+r.rng.IntN(3000), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	if len(r.data) == 0 && !r.eofAlone {
		return n, io.EOF
	}
	return n, nil
}

// TestFrameReader: each message comes out whole, whatever its size and
// however it is read, and stays as it was while later ones are read into
// the same slab; an append to one cannot reach the next; after a message
// larger than a slab the reader goes back to slabs of the usual size.
func TestFrameReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var fr frameReader
	var msgs, got [][]byte
	sizes := []int{0, 1, 100, minRead - 1, minRead, 3000, slabSize - 1, slabSize, slabSize + 1, 5 * slabSize, 7, 2500}
	for range 200 {
		sizes = append(sizes, rng.IntN(6000))
	}
	for i, size := range sizes {
		msg := make([]byte, size)
		for j := range msg {
			msg[j] = byte(rng.Uint32())
		}
		data, err := fr.next(&chunkReader{data: bytes.Clone(msg), rng: rng, eofAlone: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, msg) {
			t.Fatalf("message %d (%d bytes): read %d bytes, not the message", i, size, len(data))
		}
		if cap(data) != len(data) {
			t.Fatalf("message %d: capacity %d beyond its %d bytes", i, cap(data), len(data))
		}
		if size > slabSize && fr.slab != nil {
			t.Fatalf("message %d of %d bytes: its slab of %d bytes kept for the next", i, size, len(fr.slab))
		}
		if len(fr.slab) > slabSize {
			t.Fatalf("a slab of %d bytes kept", len(fr.slab))
		}
		msgs, got = append(msgs, msg), append(got, data)
		if i > 0 {
			_ = append(got[i-1], 0xff) // must not write into message i
		}
	}
	for i := range msgs {
		if !bytes.Equal(got[i], msgs[i]) {
			t.Fatalf("message %d changed after later reads", i)
		}
	}
	// Small messages share slabs: far fewer than one per message.
	var small frameReader
	slabs := map[*byte]bool{}
	for range 100 {
		data, err := small.next(&chunkReader{data: make([]byte, 2000), rng: rng})
		if err != nil {
			t.Fatal(err)
		}
		slabs[&small.slab[0]] = true
		_ = data
	}
	if len(slabs) > 100*2000/(slabSize-minRead)+1 {
		t.Fatalf("100 messages of 2,000 bytes in %d slabs", len(slabs))
	}
}

// TestFrameReaderError: a read's error is returned.
func TestFrameReaderError(t *testing.T) {
	var fr frameReader
	want := errors.New("connection lost")
	r := io.MultiReader(bytes.NewReader([]byte("abc")), errReader{want})
	if _, err := fr.next(r); !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
