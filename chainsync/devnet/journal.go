package devnet

import (
	"sync"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Source is a chain a node serves: each client gets its own Reader.
type Source interface {
	Tip() chain.Tip
	NewReader() Reader
}

// Reader is one client's position on a Source.
type Reader interface {
	// Intersect moves to the first of points the source knows and returns
	// it with the tip; false when it knows none.
	Intersect(points []chain.Point) (chain.Point, chain.Tip, bool)
	// Next returns the next step; at the end, StepAwait with a channel
	// closed when there is more.
	Next() (Step, <-chan struct{})
	Pos() chain.Point
	Close()
}

// NewReader returns a cursor: the node-like reader of the current chain.
func (s *ChainStore) NewReader() Reader { return s.NewCursor() }

// Journal is a Source that gives every client the whole history of the
// chain's changes, forks included, in the order they happened: every block
// appended and every rollback, whatever the client's timing. A client that
// intersects at a block continues right after that block was appended.
// Clients therefore see exactly the same events on every run, which makes
// the follower's log reproducible across crashes and restarts (a real node
// only serves its current chain, so a client behind a fork never sees it).
//
// The point a client intersects at cannot tell where it stood once the
// chain was rolled back to that block since: a client that rested at the
// block before the fork was appended needs the fork, one that took the
// fork and its rollback must not get them again. Resume (see SetResume)
// says which from the client's own committed history.
type Journal struct {
	mu      sync.Mutex
	ops     []journalOp
	at      map[chain.Hash32]int // op index of each block's append
	tip     chain.Tip
	changed chan struct{}
	resume  Resume
}

// Resume tells a journal where a client that intersects at p stands: it
// returns the newest block the client's committed history holds as rolled
// back to p, and false when its history holds no rollback to p. The client
// then continues right after the rollback that undid that block (true), or
// right after p was appended (false). Where the history cannot name every
// rollback (a follower's log marks only rollbacks that undid records),
// the client gets again at most forks it keeps no trace of.
type Resume func(p chain.Point) (chain.Point, bool)

type journalOp struct {
	block    *StoredBlock
	rollback *chain.Point
	tip      chain.Tip // the chain's tip after the op
}

// NewJournal returns an empty journal.
func NewJournal() *Journal {
	return &Journal{at: map[chain.Hash32]int{}, changed: make(chan struct{})}
}

// Append records a block appended to the chain.
func (j *Journal) Append(b StoredBlock) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tip = chain.Tip{Point: b.Header.Point(), BlockNo: b.Header.BlockNo}
	j.at[b.Header.Hash] = len(j.ops)
	j.ops = append(j.ops, journalOp{block: &b, tip: j.tip})
	j.notify()
}

// RollBack records a rollback of the chain to p, whose new tip is tip.
func (j *Journal) RollBack(p chain.Point, tip chain.Tip) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.tip = tip
	j.ops = append(j.ops, journalOp{rollback: &p, tip: tip})
	j.notify()
}

func (j *Journal) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
}

// Tip returns the chain's current tip.
func (j *Journal) Tip() chain.Tip {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.tip
}

// SetResume sets how the journal places a client that intersects at a
// block the chain was rolled back to (nil: right after its append).
func (j *Journal) SetResume(f Resume) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.resume = f
}

// resumeAt is the op a client that intersects at the block appended by op
// i continues at. The caller holds mu.
func (j *Journal) resumeAt(p chain.Point, i int) int {
	if j.resume == nil || !j.rolledBackTo(p, i) {
		return i + 1
	}
	undone, ok := j.resume(p)
	if !ok {
		return i + 1
	}
	at, ok := j.at[undone.Hash]
	if !ok || at <= i {
		return i + 1
	}
	for k := at + 1; k < len(j.ops); k++ {
		if rb := j.ops[k].rollback; rb != nil && rb.Slot < undone.Slot {
			if *rb == p {
				return k + 1
			}
			break
		}
	}
	return i + 1
}

// rolledBackTo reports whether the chain was rolled back to p after op i.
func (j *Journal) rolledBackTo(p chain.Point, i int) bool {
	for _, op := range j.ops[i+1:] {
		if op.rollback != nil && *op.rollback == p {
			return true
		}
	}
	return false
}

// NewReader returns a reader at the start of the journal.
func (j *Journal) NewReader() Reader { return &journalReader{j: j} }

type journalReader struct {
	j       *Journal
	pos     int          // next op
	confirm *chain.Point // intersection to confirm with a roll-backward
	last    chain.Point
}

func (r *journalReader) Intersect(points []chain.Point) (chain.Point, chain.Tip, bool) {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	for _, p := range points {
		if p.IsOrigin() {
			r.pos, r.confirm, r.last = 0, &p, p
			return p, r.j.tip, true
		}
		if i, ok := r.j.at[p.Hash]; ok && r.j.ops[i].block.Header.Slot == p.Slot {
			r.pos, r.confirm, r.last = r.j.resumeAt(p, i), &p, p
			return p, r.j.tip, true
		}
	}
	return chain.Point{}, r.j.tip, false
}

func (r *journalReader) Next() (Step, <-chan struct{}) {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	if r.confirm != nil {
		p := *r.confirm
		r.confirm = nil
		return Step{Kind: StepRollBackward, Point: p, Tip: r.j.tip}, nil
	}
	if r.pos >= len(r.j.ops) {
		return Step{Kind: StepAwait, Tip: r.j.tip}, r.j.changed
	}
	op := r.j.ops[r.pos]
	r.pos++
	if op.rollback != nil {
		r.last = *op.rollback
		return Step{Kind: StepRollBackward, Point: *op.rollback, Tip: op.tip}, nil
	}
	r.last = op.block.Header.Point()
	return Step{Kind: StepRollForward, Block: *op.block, Tip: op.tip}, nil
}

func (r *journalReader) Pos() chain.Point {
	r.j.mu.Lock()
	defer r.j.mu.Unlock()
	return r.last
}

func (r *journalReader) Close() {}
