package sqlcommon

import (
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
)

// ChangeRow is one block's changes to the tracked set as the columns of the
// utxo_changes table.
type ChangeRow struct {
	Block   HeaderRow
	Added   []byte // JSON list, see UTxOListJSON
	Removed []byte
}

// ChangeColumns are the utxo_changes columns in the order of ChangeRow.Dest.
const ChangeColumns = "slot, block_no, block_hash, added, removed"

// Dest returns the scan destinations for ChangeColumns.
func (r *ChangeRow) Dest() []any {
	return []any{&r.Block.Slot, &r.Block.BlockNo, &r.Block.Hash, &r.Added, &r.Removed}
}

// Args returns the row as statement arguments in ChangeColumns order.
func (r *ChangeRow) Args() []any {
	return []any{r.Block.Slot, r.Block.BlockNo, r.Block.Hash, r.Added, r.Removed}
}

// Changes decodes the row.
func (r *ChangeRow) Changes() (classify.UTxOChanges, error) {
	var c classify.UTxOChanges
	var err error
	if c.Block, err = r.Block.Header(); err != nil {
		return c, err
	}
	if c.Added, err = UTxOListFromJSON(r.Added); err != nil {
		return c, err
	}
	c.Removed, err = UTxOListFromJSON(r.Removed)
	return c, err
}

// UTxOPlan is the net effect of a commit's UTxO steps on the two tables.
// A backend applies it in this order: delete the utxo_changes rows of
// DeleteChanges, insert InsertChanges, delete the utxos of DeleteRefs, then
// insert InsertUTxOs where no output with the same ref remains.
type UTxOPlan struct {
	DeleteChanges []int64 // slots
	InsertChanges []ChangeRow
	DeleteRefs    [][]byte
	InsertUTxOs   []UTxORow
}

// RollbackFloor returns the lowest slot the commit rolls back to, and
// whether it rolls back at all: the backend loads the stored utxo_changes
// rows after that slot for PlanUTxO.
func (pl *Plan) RollbackFloor() (int64, bool) {
	var floor int64
	found := false
	for _, s := range pl.steps {
		if s.Rollback == nil {
			continue
		}
		slot, err := Int64("rollback slot", s.Rollback.Slot)
		if err != nil {
			slot = 0 // PlanUTxO reports it
		}
		if !found || slot < floor {
			floor, found = slot, true
		}
	}
	return floor, found
}

// pendingChange is a block's changes known during planning: stored, or
// rolled forward in this commit.
type pendingChange struct {
	changes classify.UTxOChanges
	stored  bool
}

// refOps is the net effect of a sequence of deletes and insert-if-absent
// operations on one ref: whether any delete happened, and the first insert
// after the last delete (or the first insert, when there was no delete).
type refOps struct {
	deleted bool
	insert  *classify.TrackedUTxO
}

// PlanUTxO replays the commit's UTxO steps, in order, as the follower's
// UTxO set does (a forward removes the block's spent outputs and adds its
// new ones; a rollback undoes the blocks after its point, newest first), and
// reduces them to set-based row changes. stored are the utxo_changes rows
// after RollbackFloor (oldest first; none when the commit has no rollback)
// and horizon the stored horizon: a rollback before it is refused with
// history.ErrRollbackTooDeep. Blocks without changes get no row.
func (pl *Plan) PlanUTxO(stored []ChangeRow, horizon HeaderRow) (*UTxOPlan, error) {
	list := make([]pendingChange, 0, len(stored)+len(pl.steps))
	for i := range stored {
		c, err := stored[i].Changes()
		if err != nil {
			return nil, fmt.Errorf("stored UTxO changes: %w", err)
		}
		list = append(list, pendingChange{changes: c, stored: true})
	}
	ops := make(map[string]*refOps)
	var order []string
	op := func(ref []byte) *refOps {
		o, ok := ops[string(ref)]
		if !ok {
			o = &refOps{}
			ops[string(ref)] = o
			order = append(order, string(ref))
		}
		return o
	}
	del := func(u classify.TrackedUTxO) {
		o := op(RefBytes(u.Ref))
		o.deleted, o.insert = true, nil
	}
	ins := func(u classify.TrackedUTxO) {
		if o := op(RefBytes(u.Ref)); o.insert == nil {
			o.insert = &u
		}
	}
	out := &UTxOPlan{}
	for i, s := range pl.steps {
		if f := s.Forward; f != nil {
			if f.Empty() {
				continue
			}
			if n := len(list); n > 0 && list[n-1].changes.Block.Slot >= f.Block.Slot {
				return nil, fmt.Errorf("UTxO step %d: changes of the block at slot %d after those of slot %d",
					i, f.Block.Slot, list[n-1].changes.Block.Slot)
			}
			for _, u := range f.Removed {
				del(u)
			}
			for _, u := range f.Added {
				ins(u)
			}
			list = append(list, pendingChange{changes: *f})
			continue
		}
		p := *s.Rollback
		if !isZero(horizon.Hash) && p.Slot < uint64(horizon.Slot) {
			return nil, fmt.Errorf("%w: to slot %d, but UTxO changes before slot %d are no longer kept",
				record.ErrRollbackTooDeep, p.Slot, horizon.Slot)
		}
		for len(list) > 0 {
			last := list[len(list)-1]
			if last.changes.Block.Slot <= p.Slot {
				break
			}
			for j := len(last.changes.Added) - 1; j >= 0; j-- {
				del(last.changes.Added[j])
			}
			for _, u := range last.changes.Removed {
				ins(u)
			}
			if last.stored {
				slot, _ := Int64("slot", last.changes.Block.Slot)
				out.DeleteChanges = append(out.DeleteChanges, slot)
			}
			list = list[:len(list)-1]
		}
	}
	for _, c := range list {
		if c.stored {
			continue
		}
		row, err := newChangeRow(&c.changes)
		if err != nil {
			return nil, err
		}
		out.InsertChanges = append(out.InsertChanges, row)
	}
	for _, ref := range order {
		o := ops[ref]
		if o.deleted {
			out.DeleteRefs = append(out.DeleteRefs, []byte(ref))
		}
		if o.insert != nil {
			out.InsertUTxOs = append(out.InsertUTxOs, NewUTxORow(*o.insert))
		}
	}
	return out, nil
}

func newChangeRow(c *classify.UTxOChanges) (ChangeRow, error) {
	h, err := NewHeaderRow(c.Block)
	if err != nil {
		return ChangeRow{}, fmt.Errorf("UTxO changes: %w", err)
	}
	added, err := UTxOListJSON(c.Added)
	if err != nil {
		return ChangeRow{}, err
	}
	removed, err := UTxOListJSON(c.Removed)
	if err != nil {
		return ChangeRow{}, err
	}
	return ChangeRow{Block: h, Added: added, Removed: removed}, nil
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
