package client

import "io"

// frameReader reads a connection's messages into slabs: each message is
// read straight into the free end of the current slab and handed out as a
// sub-slice of it (its capacity cut at its end), which no later message
// overwrites. A message is then neither read into a scratch buffer and
// copied out (a copy and an allocation per frame) nor given a buffer of
// its own: at the tip, where a frame is a few kilobytes, one allocation
// serves several frames. A slab stays in memory while anything still
// holds one of its messages (a batch's records): the cost of that is
// bounded by slabSize.
type frameReader struct {
	slab []byte // the current slab; slab[:off] has been handed out
	off  int
}

// slabSize is the size of a slab: several frames at the tip (a few
// kilobytes each), and within Go's small size classes (32 KiB takes the
// large objects' path, slower and held by a span of its own).
const slabSize = 16 << 10

// minRead is the least room a read is given (bytes.Buffer's MinRead).
const minRead = 512

// next reads a message from r to its end and returns its bytes.
func (fr *frameReader) next(r io.Reader) ([]byte, error) {
	if len(fr.slab)-fr.off < minRead {
		fr.slab, fr.off = make([]byte, slabSize), 0
	}
	start := fr.off
	for {
		if fr.off == len(fr.slab) {
			// The message does not fit: it moves to a slab of twice its
			// size so far (a large batch gets a buffer of its own).
			n := fr.off - start
			grown := make([]byte, max(slabSize, 2*n))
			copy(grown, fr.slab[start:fr.off])
			fr.slab, start, fr.off = grown, 0, n
		}
		m, err := r.Read(fr.slab[fr.off:])
		fr.off += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	msg := fr.slab[start:fr.off:fr.off]
	if len(fr.slab) > slabSize {
		// After a message larger than a slab, the next one starts a slab of
		// the usual size rather than keep the large one for later frames.
		fr.slab, fr.off = nil, 0
	}
	return msg, nil
}
