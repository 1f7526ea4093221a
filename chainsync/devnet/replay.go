package devnet

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// maxReplayLine bounds one line of a replay file: a 16 MiB block in hex,
// the largest message the node-to-client protocol carries, and a prefix.
const maxReplayLine = 32<<20 + 64

// HeaderFunc decodes the header of a bare era block of the given type, for
// example block.DecodeHeader.
type HeaderFunc func(block.Type, []byte) (chain.BlockHeader, error)

// TypeFunc detects the block type of a bare era block.
type TypeFunc func(raw []byte) (block.Type, error)

// ReplayOptions says how to read a replay file.
type ReplayOptions struct {
	// Header decodes each block's header; required.
	Header HeaderFunc
	// DetectType gives the block type of lines without a TYPE: prefix. If
	// it is nil such lines are an error: the type cannot be guessed
	// reliably from the bytes alone (Shelley, Allegra, Mary and Alonzo
	// headers have the same shape).
	DetectType TypeFunc
}

// ErrReplay is wrapped by errors about the content of a replay file.
var ErrReplay = errors.New("replay file")

// ReadReplay reads a replay file into blocks, in file order. Errors name the
// line. A replay file holds real blocks for the devnet node to serve, one
// block per line, oldest first:
//
//	# comment lines and blank lines are ignored
//	85828a1a00b82b21...        bare era block CBOR as hex; the block type
//	                           comes from ReplayOptions.DetectType
//	7:85828a1a00b82b21...      TYPE:HEX with an explicit block type: the
//	conway:85828a1a00b82b21... node-to-client number (0-255) or an era name
//
// The blocks keep their real headers, decoded by ReplayOptions.Header. They
// generally do not link to each other (different eras, gaps), so they are
// stored with ChainStore.AppendUnlinked, which only requires slots and block
// numbers that never decrease (NewReplayStore). Generated blocks can be
// appended after them with ChainStore.Append. WriteReplay writes the format.
func ReadReplay(r io.Reader, opts ReplayOptions) ([]StoredBlock, error) {
	if opts.Header == nil {
		return nil, errors.New("read replay: no header function")
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxReplayLine)
	var blocks []StoredBlock
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		b, err := parseReplayLine(text, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %w", ErrReplay, line, err)
		}
		blocks = append(blocks, b)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read replay: %w", err)
	}
	return blocks, nil
}

func parseReplayLine(text string, opts ReplayOptions) (StoredBlock, error) {
	typeText, hexText, explicit := strings.Cut(text, ":")
	if !explicit {
		hexText = typeText
	}
	raw, err := hex.DecodeString(strings.TrimSpace(hexText))
	if err != nil {
		return StoredBlock{}, fmt.Errorf("block hex: %w", err)
	}
	if len(raw) == 0 {
		return StoredBlock{}, errors.New("empty block")
	}
	var t block.Type
	switch {
	case explicit:
		if t, err = ParseBlockType(strings.TrimSpace(typeText)); err != nil {
			return StoredBlock{}, err
		}
	case opts.DetectType != nil:
		if t, err = opts.DetectType(raw); err != nil {
			return StoredBlock{}, fmt.Errorf("detect block type: %w", err)
		}
	default:
		return StoredBlock{}, errors.New("no block type: write TYPE:HEX or give a type detector")
	}
	h, err := opts.Header(t, raw)
	if err != nil {
		return StoredBlock{}, fmt.Errorf("%s block header: %w", t, err)
	}
	return StoredBlock{Type: t, Header: h, Raw: raw}, nil
}

// ParseBlockType reads a block type: its node-to-client number (0-255) or
// the era name block.Type.String gives ("byron-ebb", "byron", "shelley",
// "allegra", "mary", "alonzo", "babbage", "conway").
func ParseBlockType(s string) (block.Type, error) {
	if n, err := strconv.ParseUint(s, 10, 8); err == nil {
		return block.Type(n), nil
	}
	for t := block.TypeByronEBB; t <= block.TypeConway; t++ {
		if strings.EqualFold(s, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("block type %q: want a number 0-255 or an era name", s)
}

// ReadReplayFile reads the replay file at path.
func ReadReplayFile(path string, opts ReplayOptions) ([]StoredBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	blocks, err := ReadReplay(f, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return blocks, nil
}

// NewReplayStore returns a store holding blocks, appended in order with
// AppendUnlinked: slots and block numbers must never decrease and no block
// may appear twice.
func NewReplayStore(blocks []StoredBlock) (*ChainStore, error) {
	s := NewChainStore()
	for i, b := range blocks {
		if err := s.AppendUnlinked(b); err != nil {
			return nil, fmt.Errorf("%w: block %d of %d: %w", ErrReplay, i+1, len(blocks), err)
		}
	}
	return s, nil
}

// WriteReplay writes blocks as a replay file with explicit block types, one
// TYPE:HEX line each after a comment naming the block, so that ReadReplay
// reads them back without a type detector.
func WriteReplay(w io.Writer, blocks []StoredBlock) error {
	bw := bufio.NewWriter(w)
	for _, b := range blocks {
		fmt.Fprintf(bw, "# %s block %d at %s\n%d:", b.Type, b.Header.BlockNo, b.Header.Point(), b.Type)
		enc := hex.NewEncoder(bw)
		if _, err := enc.Write(b.Raw); err != nil {
			return err
		}
		if err := bw.WriteByte('\n'); err != nil {
			return err
		}
	}
	return bw.Flush()
}
