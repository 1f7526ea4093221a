// Package devnet is the follower's built-in devnet node: an in-memory chain of
// blocks (ChainStore) and a node-to-client chain-sync server (Node) that
// serves it on a Unix socket the way cardano-node serves its local clients,
// rollbacks included. Blocks come from the generator or from a replay file of
// real blocks (ReadReplay).
package devnet

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// StoredBlock is one block of a ChainStore: its block type (the hard-fork
// combinator era tag sent to clients), its header and the bare era block
// CBOR, without the node-to-client wrapper.
type StoredBlock struct {
	Type   block.Type
	Header chain.BlockHeader
	Raw    []byte
}

// Errors returned by ChainStore methods; the returned errors wrap them.
var (
	// ErrNotLinked is returned by Append for a block that does not extend
	// the tip: wrong block number or a slot not after the tip's.
	ErrNotLinked = errors.New("block does not extend the tip")
	// ErrOutOfOrder is returned by AppendUnlinked for a block whose slot or
	// block number is below the tip's, or that is already stored.
	ErrOutOfOrder = errors.New("block is out of order")
	// ErrBadBlock is returned for a block with empty raw bytes, a zero hash
	// or a block type above 255.
	ErrBadBlock = errors.New("bad block")
	// ErrPointNotOnChain is returned by RollBack for a point that is not on
	// the chain.
	ErrPointNotOnChain = errors.New("point is not on the chain")
)

const (
	minChunk = 64 << 10 // first raw-bytes chunk
	maxChunk = 1 << 20  // raw-bytes chunks grow by doubling up to this size
)

// rawLoc says where a block's bytes are in the chunked arena.
type rawLoc struct {
	chunk, off, n uint32
}

// ChainStore is a concurrency-safe in-memory chain of blocks that can roll
// back and switch to a fork. It keeps every block, from the first one, so
// that clients can sync from the origin.
//
// Storage is compact: headers, block types and raw-byte locations live in
// three parallel slices, and the raw bytes are copied into large chunks, so a
// chain of a million small blocks costs about 61 bytes per block plus its raw
// bytes, in a handful of pointer-free allocations. Stored bytes are never
// modified: a rollback copies the partly kept chunk instead of overwriting
// it, so the Raw slices handed out stay valid without locks. Callers must not
// modify them.
//
// Readers follow the chain through a Cursor (NewCursor). Waiting for change
// is done with Changed, a channel closed on the next Append or RollBack.
// The zero value is an empty store ready to use.
type ChainStore struct {
	mu      sync.RWMutex
	headers []chain.BlockHeader
	types   []uint8
	locs    []rawLoc
	chunks  [][]byte
	bytes   int64
	changed chan struct{} // made on demand by Changed, closed on change
	cursors map[*Cursor]struct{}
}

// NewChainStore returns an empty store.
func NewChainStore() *ChainStore { return &ChainStore{} }

// Append adds a block that extends the tip: its block number must be the
// tip's plus one and its slot after the tip's. The first block of an empty
// store may have any number and slot. The caller guarantees that the block's
// previous-hash field names the tip; the store does not decode blocks. The
// raw bytes are copied.
func (s *ChainStore) Append(b StoredBlock) error {
	return s.append(b, true)
}

// AppendUnlinked adds a block without requiring that it extends the tip:
// only that it comes after it, with a slot and a block number that are not
// below the tip's and a point that is not stored yet. It is meant for replay
// files of real blocks, which keep their real headers and generally do not
// link (blocks of different eras, gaps). A store may mix both: replayed
// blocks followed by generated blocks appended with Append. Rollbacks work
// the same on either kind.
func (s *ChainStore) AppendUnlinked(b StoredBlock) error {
	return s.append(b, false)
}

func (s *ChainStore) append(b StoredBlock, linked bool) error {
	h := b.Header
	switch {
	case len(b.Raw) == 0:
		return fmt.Errorf("%w: block %d: empty raw bytes", ErrBadBlock, h.BlockNo)
	case len(b.Raw) > math.MaxUint32:
		return fmt.Errorf("%w: block %d: %d raw bytes", ErrBadBlock, h.BlockNo, len(b.Raw))
	case h.Hash.IsZero():
		return fmt.Errorf("%w: block %d: zero hash", ErrBadBlock, h.BlockNo)
	case b.Type > math.MaxUint8:
		return fmt.Errorf("%w: block %d: block type %d", ErrBadBlock, h.BlockNo, b.Type)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.headers); n > 0 {
		tip := s.headers[n-1]
		if linked && (h.BlockNo != tip.BlockNo+1 || h.Slot <= tip.Slot) {
			return fmt.Errorf("%w: block %d at slot %d after tip %d at slot %d",
				ErrNotLinked, h.BlockNo, h.Slot, tip.BlockNo, tip.Slot)
		}
		if !linked {
			if h.BlockNo < tip.BlockNo || h.Slot < tip.Slot {
				return fmt.Errorf("%w: block %d at slot %d after tip %d at slot %d",
					ErrOutOfOrder, h.BlockNo, h.Slot, tip.BlockNo, tip.Slot)
			}
			if _, dup := s.find(h.Point()); dup {
				return fmt.Errorf("%w: block %d at %s is already stored", ErrOutOfOrder, h.BlockNo, h.Point())
			}
		}
	}
	s.locs = append(s.locs, s.storeRaw(b.Raw))
	s.headers = append(s.headers, h)
	s.types = append(s.types, uint8(b.Type))
	s.notify()
	return nil
}

// storeRaw copies raw into the arena and returns its location.
func (s *ChainStore) storeRaw(raw []byte) rawLoc {
	n := len(raw)
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < n {
		size := minChunk
		if last >= 0 {
			size = min(2*cap(s.chunks[last]), maxChunk)
		}
		s.chunks = append(s.chunks, make([]byte, 0, max(size, n)))
		last++
	}
	c := s.chunks[last]
	loc := rawLoc{chunk: uint32(last), off: uint32(len(c)), n: uint32(n)}
	s.chunks[last] = append(c, raw...)
	s.bytes += int64(n)
	return loc
}

// RollBack drops every block after to, which must be on the chain or the
// origin. Cursors that were given a dropped block will roll back to the fork
// point before anything else. Rolling back to the tip changes nothing.
func (s *ChainStore) RollBack(to chain.Point) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := 0
	if !to.IsOrigin() {
		i, ok := s.find(to)
		if !ok {
			return fmt.Errorf("roll back to %s: %w", to, ErrPointNotOnChain)
		}
		keep = i + 1
	}
	s.truncate(keep)
	return nil
}

// RollBackN drops the newest depth blocks (all of them if depth is larger
// than the chain) and returns the new tip's point.
func (s *ChainStore) RollBackN(depth int) (chain.Point, error) {
	if depth < 0 {
		return chain.Point{}, fmt.Errorf("roll back %d blocks: negative depth", depth)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.truncate(max(len(s.headers)-depth, 0))
	return s.pointAt(len(s.headers)), nil
}

// truncate keeps the first keep blocks. The caller holds the write lock.
func (s *ChainStore) truncate(keep int) {
	if keep >= len(s.headers) {
		return
	}
	if keep == 0 {
		clear(s.chunks)
		s.chunks = s.chunks[:0]
		s.bytes = 0
	} else {
		l := s.locs[keep-1]
		end := int(l.off + l.n)
		clear(s.chunks[l.chunk+1:])
		s.chunks = s.chunks[:l.chunk+1]
		// Copy the kept part of the last chunk: its dropped tail may be
		// held by readers, so it must never be overwritten.
		if old := s.chunks[l.chunk]; end < len(old) {
			nc := make([]byte, end, cap(old))
			copy(nc, old[:end])
			s.chunks[l.chunk] = nc
		}
		s.bytes = 0
		for _, c := range s.chunks {
			s.bytes += int64(len(c))
		}
	}
	s.headers = s.headers[:keep]
	s.types = s.types[:keep]
	s.locs = s.locs[:keep]
	for c := range s.cursors {
		if c.pos > keep {
			c.pos = keep
			c.rollBack = true
		}
	}
	s.notify()
}

// notify wakes every waiter. The caller holds the write lock.
func (s *ChainStore) notify() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// Changed returns a channel that is closed at the next change of the chain:
// an appended block or a rollback. Get the channel before looking at the
// chain so that no change is missed, then select on it and on a context.
func (s *ChainStore) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changedLocked()
}

func (s *ChainStore) changedLocked() chan struct{} {
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Tip returns the newest block's point and number; the zero Tip (origin,
// block number 0) for an empty store.
func (s *ChainStore) Tip() chain.Tip {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tip()
}

func (s *ChainStore) tip() chain.Tip {
	n := len(s.headers)
	if n == 0 {
		return chain.Tip{}
	}
	return chain.Tip{Point: s.headers[n-1].Point(), BlockNo: s.headers[n-1].BlockNo}
}

// Len returns the number of blocks.
func (s *ChainStore) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.headers)
}

// RawSize returns the total size of the stored raw blocks in bytes.
func (s *ChainStore) RawSize() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bytes
}

// Block returns the block at index i, 0 being the oldest. Its Raw must not
// be modified.
func (s *ChainStore) Block(i int) (StoredBlock, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i < 0 || i >= len(s.headers) {
		return StoredBlock{}, false
	}
	return s.blockAt(i), true
}

// Headers returns a copy of every header, oldest first.
func (s *ChainStore) Headers() []chain.BlockHeader {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]chain.BlockHeader(nil), s.headers...)
}

func (s *ChainStore) blockAt(i int) StoredBlock {
	l := s.locs[i]
	c := s.chunks[l.chunk]
	return StoredBlock{
		Type:   block.Type(s.types[i]),
		Header: s.headers[i],
		Raw:    c[l.off : l.off+l.n : l.off+l.n],
	}
}

// Find returns the index of the block at p. The origin is not a block.
func (s *ChainStore) Find(p chain.Point) (int, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.find(p)
}

// find searches by slot (slots never decrease along the chain), then
// compares hashes among the blocks of that slot.
func (s *ChainStore) find(p chain.Point) (int, bool) {
	if p.IsOrigin() {
		return 0, false
	}
	i := sort.Search(len(s.headers), func(i int) bool { return s.headers[i].Slot >= p.Slot })
	for ; i < len(s.headers) && s.headers[i].Slot == p.Slot; i++ {
		if s.headers[i].Hash == p.Hash {
			return i, true
		}
	}
	return 0, false
}

// Intersect returns the first of points that is on the chain (the origin
// always is) with the current tip, or false and the tip.
func (s *ChainStore) Intersect(points []chain.Point) (chain.Point, chain.Tip, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, p, ok := s.intersect(points)
	return p, s.tip(), ok
}

// intersect returns the number of blocks up to and including the first of
// points on the chain.
func (s *ChainStore) intersect(points []chain.Point) (int, chain.Point, bool) {
	for _, p := range points {
		if p.IsOrigin() {
			return 0, p, true
		}
		if i, ok := s.find(p); ok {
			return i + 1, p, true
		}
	}
	return 0, chain.Point{}, false
}

// pointAt returns the point after the first n blocks: the origin or block n-1.
func (s *ChainStore) pointAt(n int) chain.Point {
	if n == 0 {
		return chain.Origin
	}
	return s.headers[n-1].Point()
}

// StepKind says what a Cursor's reader has to do next.
type StepKind uint8

// Step kinds.
const (
	// StepAwait: the reader is at the tip; wait for the channel Next returns.
	StepAwait StepKind = iota
	// StepRollForward: send Step.Block.
	StepRollForward
	// StepRollBackward: roll back to Step.Point.
	StepRollBackward
)

// String names the step kind.
func (k StepKind) String() string {
	switch k {
	case StepAwait:
		return "await"
	case StepRollForward:
		return "roll-forward"
	case StepRollBackward:
		return "roll-backward"
	}
	return "unknown"
}

// Step is the next instruction for a reader, with the tip at the time it was
// taken.
type Step struct {
	Kind  StepKind
	Block StoredBlock // for StepRollForward
	Point chain.Point // for StepRollBackward
	Tip   chain.Tip
}

// Cursor is one reader's position on a ChainStore, for example one
// chain-sync client of the node. Its reader has been given the first Pos
// blocks of the chain. When a rollback drops blocks it had been given, the
// cursor moves back to the fork point and its next step is a roll-backward
// to it, exactly like cardano-node's chain followers. A Cursor is registered
// with its store until Close.
type Cursor struct {
	s        *ChainStore
	mu       sync.Mutex // with s.mu read-locked; s.mu write-locked excludes it
	pos      int
	rollBack bool
}

// NewCursor returns a cursor at the origin whose first step is the first
// block. Close it when the reader goes away.
func (s *ChainStore) NewCursor() *Cursor {
	c := &Cursor{s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cursors == nil {
		s.cursors = make(map[*Cursor]struct{})
	}
	s.cursors[c] = struct{}{}
	return c
}

// Close unregisters the cursor from its store. It is idempotent.
func (c *Cursor) Close() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	delete(c.s.cursors, c)
}

// Intersect moves the cursor to the first of points that is on the chain
// (the origin always is) and returns that point and the tip; the next step
// is then a roll-backward to that point, as cardano-node answers the first
// request after an intersection. If no point is on the chain it returns false
// and the tip and the cursor does not move.
func (c *Cursor) Intersect(points []chain.Point) (chain.Point, chain.Tip, bool) {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	n, p, ok := c.s.intersect(points)
	if ok {
		c.pos, c.rollBack = n, true
	}
	return p, c.s.tip(), ok
}

// Next returns the reader's next step and moves the cursor past it. At the
// tip it returns StepAwait and a channel that is closed when the chain
// changes; then call Next again.
func (c *Cursor) Next() (Step, <-chan struct{}) {
	s := c.s
	s.mu.RLock()
	c.mu.Lock()
	tip := s.tip()
	switch {
	case c.rollBack:
		c.rollBack = false
		p := s.pointAt(c.pos)
		c.mu.Unlock()
		s.mu.RUnlock()
		return Step{Kind: StepRollBackward, Point: p, Tip: tip}, nil
	case c.pos < len(s.headers):
		b := s.blockAt(c.pos)
		c.pos++
		c.mu.Unlock()
		s.mu.RUnlock()
		return Step{Kind: StepRollForward, Block: b, Tip: tip}, nil
	}
	c.mu.Unlock()
	s.mu.RUnlock()
	// At the tip: take the write lock to get the change channel, and look
	// again in case the chain changed in between.
	s.mu.Lock()
	c.mu.Lock()
	at := !c.rollBack && c.pos >= len(s.headers)
	var ch chan struct{}
	if at {
		ch = s.changedLocked()
	}
	c.mu.Unlock()
	s.mu.Unlock()
	if !at {
		return c.Next()
	}
	return Step{Kind: StepAwait, Tip: tip}, ch
}

// Pos returns the point the reader is at: the origin or the last block it
// was given (or the fork point it is about to roll back to).
func (c *Cursor) Pos() chain.Point {
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s.pointAt(c.pos)
}
