package devnet

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// chainFileMagic is the first line of a chain file.
const chainFileMagic = "marlowe-follower devnet chain 1\n"

// chainFileSyncEvery bounds how long a written change may stay unsynced.
const chainFileSyncEvery = time.Second

// ChainMeta says what made the chain of a chain file. A devnet refuses to
// continue a file whose chain another network or other generator settings
// made.
type ChainMeta struct {
	NetworkMagic uint32          `json:"networkMagic"`
	Generator    GeneratorConfig `json:"generator"`
}

// ErrChainFile is wrapped by errors about a chain file's content.
var ErrChainFile = errors.New("devnet chain file")

// ChainFile keeps a devnet's chain in a file: every change of the chain
// (a block appended, a rollback) in the order it happened, each written
// before any client is served it. A devnet started again on the file
// serves the same chain, and in journal mode the same journal, forks
// included, and continues after it (RunConfig.ChainFile).
//
// The file is a first line "marlowe-follower devnet chain 1", a JSON line
// of ChainMeta, then one record per change: a tag byte ('B' for a block,
// 'R' for a rollback), the payload's length as a uvarint, the payload and a
// CRC-32C (big-endian) of tag and payload. A block's payload is its block
// type (one byte), slot and block number (uvarints), hash (32 bytes) and
// bare era block CBOR; a rollback's is the point's slot (uvarint) and hash
// (32 bytes, zero for the origin). A torn record at the end (the process
// was killed while writing) is cut off when the file is opened. Writes go
// to the operating system at once and are synced at most a second later
// and on Close: a killed process loses nothing it served, a machine that
// loses power may lose the last second.
type ChainFile struct {
	path string

	mu       sync.Mutex
	f        *os.File
	buf      []byte
	lastSync time.Time
}

// OpenChainFile opens the chain file at path, creating it for meta if it
// does not exist, and returns the changes it holds, oldest first. An
// existing file must have been made for the same meta.
func OpenChainFile(path string, meta ChainMeta) (*ChainFile, []Op, error) {
	want, err := json.Marshal(meta)
	if err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return createChainFile(path, want)
	}
	if err != nil {
		return nil, nil, err
	}
	_, ops, end, err := readChainFile(f, want)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("%w %s: %w", ErrChainFile, path, err)
	}
	if err := f.Truncate(end); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if _, err := f.Seek(end, io.SeekStart); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	return &ChainFile{path: path, f: f, lastSync: time.Now()}, ops, nil
}

// ReadChainMeta reads what made the chain of a chain file.
func ReadChainMeta(path string) (ChainMeta, error) {
	var meta ChainMeta
	f, err := os.Open(path)
	if err != nil {
		return meta, err
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	magic, err := r.ReadString('\n')
	if err != nil || magic != chainFileMagic {
		return meta, fmt.Errorf("%w %s: not a devnet chain file (or of another format version)", ErrChainFile, path)
	}
	line, err := r.ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &meta)
	}
	if err != nil {
		return meta, fmt.Errorf("%w %s: chain description: %w", ErrChainFile, path, err)
	}
	return meta, nil
}

// ReadChainFile reads a chain file without changing it: what made the
// chain and its changes, oldest first (a torn last record left out).
func ReadChainFile(path string) (ChainMeta, []Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return ChainMeta{}, nil, err
	}
	defer func() { _ = f.Close() }()
	meta, ops, _, err := readChainFile(f, nil)
	if err != nil {
		return meta, nil, fmt.Errorf("%w %s: %w", ErrChainFile, path, err)
	}
	return meta, ops, nil
}

func createChainFile(path string, meta []byte) (*ChainFile, []Op, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, nil, err
	}
	head := append([]byte(chainFileMagic), meta...)
	head = append(head, '\n')
	if _, err := f.Write(head); err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, nil, err
	}
	return &ChainFile{path: path, f: f, lastSync: time.Now()}, nil, nil
}

// readChainFile reads the changes and returns the offset after the last
// whole record. With wantMeta the file must describe that chain.
func readChainFile(f *os.File, wantMeta []byte) (ChainMeta, []Op, int64, error) {
	var stored ChainMeta
	r := bufio.NewReaderSize(f, 1<<20)
	magic, err := r.ReadString('\n')
	if err != nil || magic != chainFileMagic {
		return stored, nil, 0, errors.New("not a devnet chain file (or of another format version)")
	}
	metaLine, err := r.ReadBytes('\n')
	if err != nil {
		return stored, nil, 0, errors.New("no chain description")
	}
	if err := json.Unmarshal(metaLine, &stored); err != nil {
		return stored, nil, 0, fmt.Errorf("chain description: %w", err)
	}
	if wantMeta != nil && !bytes.Equal(bytes.TrimSpace(metaLine), wantMeta) {
		var want ChainMeta
		_ = json.Unmarshal(wantMeta, &want)
		return stored, nil, 0, fmt.Errorf("the chain was made for %s, not %s: use the settings it was made with, or another directory",
			describeMeta(stored), describeMeta(want))
	}
	end := int64(len(magic) + len(metaLine))
	var ops []Op
	for {
		op, n, err := readChainRecord(r)
		if err != nil {
			// The end, or a torn last record: keep what came before.
			return stored, ops, end, nil
		}
		ops = append(ops, op)
		end += n
	}
}

// describeMeta names the settings that tell chains apart.
func describeMeta(m ChainMeta) string {
	g := m.Generator
	s := fmt.Sprintf("network magic %d, seed %d, marlowe share %g, block size %d, rollbacks every %d (depth %d), %d active contracts, slot gap %d",
		m.NetworkMagic, g.Seed, g.MarloweShare, g.MeanBlockSize, g.RollbackEvery, g.MaxRollbackDepth, g.MaxActive, g.MeanSlotGap)
	if !g.Clock.IsZero() {
		s += fmt.Sprintf(", clock %+v, after slot %d", g.Clock, g.After.Slot)
	}
	return s
}

// readChainRecord reads one record and returns its size in the file.
func readChainRecord(r *bufio.Reader) (Op, int64, error) {
	tag, err := r.ReadByte()
	if err != nil {
		return Op{}, 0, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil || n > maxReplayLine {
		return Op{}, 0, errors.New("bad record length")
	}
	payload := make([]byte, n+4)
	if _, err := io.ReadFull(r, payload); err != nil {
		return Op{}, 0, err
	}
	sum := binary.BigEndian.Uint32(payload[n:])
	payload = payload[:n]
	if crc32.Update(crc32.Checksum([]byte{tag}, castagnoli), castagnoli, payload) != sum {
		return Op{}, 0, errors.New("bad checksum")
	}
	size := int64(1 + uvarintLen(n) + int(n) + 4)
	p := &payloadReader{b: payload}
	switch tag {
	case 'B':
		t := p.byte()
		h := chain.BlockHeader{Slot: p.uvarint(), BlockNo: p.uvarint()}
		copy(h.Hash[:], p.bytes(32))
		raw := p.rest()
		if p.err != nil || len(raw) == 0 {
			return Op{}, 0, errors.New("bad block record")
		}
		return Op{Block: &StoredBlock{Type: block.Type(t), Header: h, Raw: raw}}, size, nil
	case 'R':
		pt := chain.Point{Slot: p.uvarint()}
		copy(pt.Hash[:], p.bytes(32))
		if p.err != nil || len(p.rest()) != 0 {
			return Op{}, 0, errors.New("bad rollback record")
		}
		if pt.Hash.IsZero() {
			pt = chain.Origin
		}
		return Op{Rollback: &pt}, size, nil
	}
	return Op{}, 0, fmt.Errorf("unknown record %q", tag)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func uvarintLen(n uint64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], n)
}

type payloadReader struct {
	b   []byte
	err error
}

func (p *payloadReader) byte() byte {
	b := p.bytes(1)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func (p *payloadReader) uvarint() uint64 {
	v, n := binary.Uvarint(p.b)
	if n <= 0 {
		p.err = errors.New("bad uvarint")
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *payloadReader) bytes(n int) []byte {
	if len(p.b) < n {
		p.err = errors.New("short record")
		p.b = nil
		return nil
	}
	b := p.b[:n]
	p.b = p.b[n:]
	return b
}

func (p *payloadReader) rest() []byte {
	b := p.b
	p.b = nil
	return b
}

// Path returns the file's path.
func (c *ChainFile) Path() string { return c.path }

// Append records a block appended to the chain.
func (c *ChainFile) Append(b StoredBlock) error {
	payload := []byte{byte(b.Type)}
	payload = binary.AppendUvarint(payload, b.Header.Slot)
	payload = binary.AppendUvarint(payload, b.Header.BlockNo)
	payload = append(payload, b.Header.Hash[:]...)
	payload = append(payload, b.Raw...)
	return c.write('B', payload)
}

// RollBack records a rollback of the chain to p.
func (c *ChainFile) RollBack(p chain.Point) error {
	payload := binary.AppendUvarint(nil, p.Slot)
	payload = append(payload, p.Hash[:]...)
	return c.write('R', payload)
}

// Record records op.
func (c *ChainFile) Record(op Op) error {
	if op.Rollback != nil {
		return c.RollBack(*op.Rollback)
	}
	return c.Append(*op.Block)
}

func (c *ChainFile) write(tag byte, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return fmt.Errorf("%w %s: closed", ErrChainFile, c.path)
	}
	rec := append(c.buf[:0], tag)
	rec = binary.AppendUvarint(rec, uint64(len(payload)))
	rec = append(rec, payload...)
	sum := crc32.Update(crc32.Checksum([]byte{tag}, castagnoli), castagnoli, payload)
	rec = binary.BigEndian.AppendUint32(rec, sum)
	c.buf = rec
	if _, err := c.f.Write(rec); err != nil {
		return fmt.Errorf("%w %s: %w", ErrChainFile, c.path, err)
	}
	if time.Since(c.lastSync) >= chainFileSyncEvery {
		c.lastSync = time.Now()
		if err := c.f.Sync(); err != nil {
			return fmt.Errorf("%w %s: %w", ErrChainFile, c.path, err)
		}
	}
	return nil
}

// Close syncs and closes the file. It is idempotent.
func (c *ChainFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil {
		return nil
	}
	err := c.f.Sync()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	c.f = nil
	return err
}

// sameOp reports whether two changes are the same: the same block (point)
// or a rollback to the same point.
func sameOp(a, b Op) bool {
	switch {
	case a.Block != nil && b.Block != nil:
		return a.Block.Header == b.Block.Header
	case a.Rollback != nil && b.Rollback != nil:
		return *a.Rollback == *b.Rollback
	}
	return false
}
