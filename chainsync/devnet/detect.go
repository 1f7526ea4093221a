package devnet

import (
	"errors"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/block"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// detectType tells the era of a bare block from its shape. Byron blocks are
// [header, body, extra] whose header's consensus data has 4 fields (main
// blocks) or 2 (epoch boundary blocks). Later blocks are [header, ...] whose
// header is [header_body, signature]: a header body of 15 fields (Shelley to
// Alonzo) holds the protocol major version at index 13, one of 10 fields
// (Babbage, Conway) holds [major, minor] at index 9. Shelley to Mary blocks
// have four parts and Alonzo and later five; within a shape the protocol
// major version tells the era: 2 Shelley, 3 Allegra, 4 Mary, 7-8 Babbage, 9
// and up Conway. A block ready for the next era already carries that era's
// version, so an Allegra block may be taken for a Mary block; the newer
// era's decoder reads the older era's blocks, so that is harmless.
func detectType(raw []byte) (block.Type, error) {
	r := &shapeReader{b: raw}
	n, err := r.array()
	if err != nil {
		return 0, err
	}
	h, err := r.array()
	if err != nil {
		return 0, err
	}
	if n == 3 && h == 5 { // Byron: header = [magic, prev, proof, consensus, extra]
		for range 3 {
			if err := r.skip(); err != nil {
				return 0, err
			}
		}
		cons, err := r.array()
		if err != nil {
			return 0, err
		}
		if cons == 2 {
			return block.TypeByronEBB, nil
		}
		return block.TypeByron, nil
	}
	if h != 2 {
		return 0, fmt.Errorf("block header of %d fields is no known era's", h)
	}
	body, err := r.array()
	if err != nil {
		return 0, err
	}
	var major uint64
	switch body {
	case 15:
		for range 13 {
			if err := r.skip(); err != nil {
				return 0, err
			}
		}
		major, err = r.uint()
	case 10:
		for range 9 {
			if err := r.skip(); err != nil {
				return 0, err
			}
		}
		if _, err = r.array(); err == nil {
			major, err = r.uint()
		}
	default:
		return 0, fmt.Errorf("block header body of %d fields is no known era's", body)
	}
	if err != nil {
		return 0, err
	}
	// The protocol version a block carries is what its producer is ready
	// for, often the next era's, so the block's shape decides first: four
	// parts up to Mary, five from Alonzo; a 15-field header body up to
	// Alonzo, 10 fields from Babbage.
	switch {
	case body == 15 && n == 5:
		return block.TypeAlonzo, nil
	case body == 15 && major <= 2:
		return block.TypeShelley, nil
	case body == 15 && major == 3:
		return block.TypeAllegra, nil
	case body == 15:
		return block.TypeMary, nil
	case major <= 8:
		return block.TypeBabbage, nil
	}
	return block.TypeConway, nil
}

// shapeReader reads just enough CBOR to see a block's shape.
type shapeReader struct {
	b   []byte
	pos int
}

var errShape = errors.New("not a block")

func (r *shapeReader) head() (major byte, arg uint64, err error) {
	if r.pos >= len(r.b) {
		return 0, 0, errShape
	}
	ib := r.b[r.pos]
	r.pos++
	major, info := ib>>5, ib&0x1f
	switch {
	case info < 24:
		return major, uint64(info), nil
	case info <= 27:
		n := 1 << (info - 24)
		if len(r.b)-r.pos < n {
			return 0, 0, errShape
		}
		for i := 0; i < n; i++ {
			arg = arg<<8 | uint64(r.b[r.pos+i])
		}
		r.pos += n
		return major, arg, nil
	}
	return 0, 0, errShape
}

func (r *shapeReader) array() (uint64, error) {
	m, n, err := r.head()
	if err != nil || m != 4 {
		return 0, errShape
	}
	return n, nil
}

func (r *shapeReader) uint() (uint64, error) {
	m, n, err := r.head()
	if err != nil || m != 0 {
		return 0, errShape
	}
	return n, nil
}

func (r *shapeReader) skip() error {
	n, err := pd.Skip(r.b[r.pos:])
	if err != nil {
		return err
	}
	r.pos += n
	return nil
}
