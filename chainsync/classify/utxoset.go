package classify

import (
	"errors"
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// UTxOKind tells an open contract output from an unclaimed payout.
type UTxOKind uint8

// Kinds of tracked outputs.
const (
	KindContract UTxOKind = 1
	KindPayout   UTxOKind = 2
)

// String names the kind.
func (k UTxOKind) String() string {
	switch k {
	case KindContract:
		return "contract"
	case KindPayout:
		return "payout"
	}
	return "unknown"
}

// TrackedUTxO is an output the follower watches: the current output of an open
// contract, or a payout not yet withdrawn.
type TrackedUTxO struct {
	Ref        chain.TxOutRef
	Kind       UTxOKind
	ContractID chain.TxOutRef
	Version    string // script version, "v1".."v5"
	Address    []byte // the full address (payment and stake part)
	// RolesCurrency and Role name the role token that may withdraw a payout.
	RolesCurrency []byte
	Role          []byte
	// Datum is the raw CBOR of a contract output's datum (MarloweData), kept
	// so that the step that spends it can be evaluated; nil for payouts and
	// for contract outputs whose datum is missing or undecodable.
	Datum []byte
}

// UTxOChanges are the changes one block made to the tracked set.
type UTxOChanges struct {
	Block   chain.BlockHeader
	Added   []TrackedUTxO
	Removed []TrackedUTxO
}

// Empty reports whether the block changed nothing.
func (c *UTxOChanges) Empty() bool { return len(c.Added) == 0 && len(c.Removed) == 0 }

// ErrRollbackTooDeep is returned for a rollback beyond the blocks whose
// changes are still known. Following cannot continue without an explicit
// decision of the operator (re-following from an earlier point).
var ErrRollbackTooDeep = errors.New("rollback deeper than the retained history")

// UTxOSet is the set of tracked outputs with an undo log of the recent
// blocks' changes, so that rollbacks restore it exactly.
type UTxOSet struct {
	byRef map[chain.TxOutRef]TrackedUTxO
	txids map[chain.Hash32]int // tracked outputs per transaction id

	// undo holds the changes of recent blocks, oldest first; only blocks that
	// changed something have an entry.
	undo []UTxOChanges
	// horizon is the newest block whose changes are no longer known; a
	// rollback to a point before it cannot be undone.
	horizon chain.BlockHeader
	// depth is how many blocks behind the newest block changes are kept.
	depth uint64

	// onTxID is told when a transaction id starts (+1) or stops (-1) being
	// tracked; the prefilter follows it.
	onTxID func(id chain.Hash32, delta int)
}

// NewUTxOSet returns an empty set that keeps the changes of the last depth
// blocks (the security parameter k is the deepest rollback a node makes:
// 2,160 on mainnet).
func NewUTxOSet(depth uint64) *UTxOSet {
	return &UTxOSet{
		byRef: make(map[chain.TxOutRef]TrackedUTxO),
		txids: make(map[chain.Hash32]int),
		depth: depth,
	}
}

// Len returns the number of tracked outputs.
func (s *UTxOSet) Len() int { return len(s.byRef) }

// Get returns the tracked output at ref.
func (s *UTxOSet) Get(ref chain.TxOutRef) (TrackedUTxO, bool) {
	u, ok := s.byRef[ref]
	return u, ok
}

// TracksTxID reports whether an output of transaction id is tracked.
func (s *UTxOSet) TracksTxID(id chain.Hash32) bool { return s.txids[id] > 0 }

// All returns every tracked output, ordered by reference.
func (s *UTxOSet) All() []TrackedUTxO {
	out := make([]TrackedUTxO, 0, len(s.byRef))
	for _, u := range s.byRef {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b TrackedUTxO) int { return a.Ref.Compare(b.Ref) })
	return out
}

// Restore replaces the set's contents: set is the tracked outputs as of the
// newest block of recent (or of horizon when recent is empty), recent the
// changes of the blocks the caller still knows, oldest first, and horizon the
// newest block before them whose changes are not known.
func (s *UTxOSet) Restore(set []TrackedUTxO, recent []UTxOChanges, horizon chain.BlockHeader) {
	for id := range s.txids {
		s.txidDelta(id, -s.txids[id])
	}
	s.byRef = make(map[chain.TxOutRef]TrackedUTxO, len(set))
	s.txids = make(map[chain.Hash32]int)
	for _, u := range set {
		s.add(u)
	}
	s.undo = append(s.undo[:0], recent...)
	s.horizon = horizon
}

func (s *UTxOSet) txidDelta(id chain.Hash32, delta int) {
	before := s.txids[id]
	after := before + delta
	if after <= 0 {
		delete(s.txids, id)
	} else {
		s.txids[id] = after
	}
	if s.onTxID != nil {
		switch {
		case before == 0 && after > 0:
			s.onTxID(id, 1)
		case before > 0 && after <= 0:
			s.onTxID(id, -1)
		}
	}
}

func (s *UTxOSet) add(u TrackedUTxO) {
	if _, dup := s.byRef[u.Ref]; dup {
		return
	}
	s.byRef[u.Ref] = u
	s.txidDelta(u.Ref.TxID, 1)
}

func (s *UTxOSet) remove(ref chain.TxOutRef) (TrackedUTxO, bool) {
	u, ok := s.byRef[ref]
	if !ok {
		return u, false
	}
	delete(s.byRef, ref)
	s.txidDelta(ref.TxID, -1)
	return u, true
}

// commit records a block's changes in the undo log and forgets changes that
// are now deeper than the retained depth.
func (s *UTxOSet) commit(c UTxOChanges) {
	if !c.Empty() {
		s.undo = append(s.undo, c)
	}
	if c.Block.BlockNo < s.depth {
		return
	}
	oldest := c.Block.BlockNo - s.depth
	n := 0
	for n < len(s.undo) && s.undo[n].Block.BlockNo < oldest {
		s.horizon = s.undo[n].Block
		n++
	}
	if n > 0 {
		s.undo = slices.Delete(s.undo, 0, n)
	}
}

// RollBack undoes the changes of every block after p and returns them,
// newest first.
func (s *UTxOSet) RollBack(p chain.Point) ([]UTxOChanges, error) {
	if !s.horizon.Hash.IsZero() && p.Slot < s.horizon.Slot {
		return nil, fmt.Errorf("%w: to slot %d, but changes before slot %d are no longer kept",
			ErrRollbackTooDeep, p.Slot, s.horizon.Slot)
	}
	var undone []UTxOChanges
	for len(s.undo) > 0 {
		last := s.undo[len(s.undo)-1]
		if last.Block.Slot <= p.Slot {
			break
		}
		for i := len(last.Added) - 1; i >= 0; i-- {
			s.remove(last.Added[i].Ref)
		}
		for _, u := range last.Removed {
			s.add(u)
		}
		undone = append(undone, last)
		s.undo = s.undo[:len(s.undo)-1]
	}
	return undone, nil
}
