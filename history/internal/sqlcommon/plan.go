package sqlcommon

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// Mark is a rollback mark as statement arguments.
type Mark struct {
	MarkerSeq int64
	ToSlot    int64
}

// TagRow is a contract tag.
type TagRow struct {
	ContractID []byte
	Tag        string
}

// Plan is a commit validated and turned into rows. A backend builds it with
// NewPlan before it touches the database, completes it inside its
// transaction (CheckHead, ResolveAdditions, PlanUTxO) and then writes, in
// this order: Records, Marks, Contracts, Tags, Parties, Breadcrumbs, Tip,
// the UTxO plan, Horizon.
type Plan struct {
	Records     []RecordRow
	Marks       []Mark // in MarkerSeq order
	Contracts   []ContractRow
	Tags        []TagRow
	Parties     []PartyRow
	Breadcrumbs []HeaderRow // newest first
	Tip         TipRow
	// Horizon is nil when the commit leaves the stored horizon as it is.
	Horizon *HeaderRow

	steps     []history.UTxOStep
	additions []history.PartyAddition
	// indexed holds the encoded ids of the batch's contracts.
	indexed map[string]bool
}

// PlanCommit is a store's first step of a commit: refused on a closed
// store (errs.Check), then NewPlan, with its error translated as the
// commit's.
func PlanCommit(d Dialect, errs *storage.Errors, p *history.CommitParams) (*Plan, error) {
	if err := errs.Check(); err != nil {
		return nil, err
	}
	pl, err := NewPlan(d, p)
	if err != nil {
		return nil, errs.Translate("commit", err)
	}
	return pl, nil
}

// NewPlan validates a commit and encodes everything that does not depend on
// the stored state, for a backend of dialect d.
func NewPlan(d Dialect, p *history.CommitParams) (*Plan, error) {
	pl := &Plan{
		Records:   make([]RecordRow, len(p.Records)),
		steps:     p.Checkpoint.UTxO,
		additions: p.PartyAdditions,
		indexed:   make(map[string]bool, len(p.Contracts)),
	}
	for i := range p.Records {
		row, err := NewRecordRow(d, &p.Records[i])
		if err != nil {
			return nil, err
		}
		pl.Records[i] = row
	}
	for _, m := range p.Marks {
		slot, err := Int64("rollback slot", m.To.Slot)
		if err != nil {
			return nil, err
		}
		if m.MarkerSeq <= 0 {
			return nil, fmt.Errorf("rollback mark with marker seq %d", m.MarkerSeq)
		}
		pl.Marks = append(pl.Marks, Mark{MarkerSeq: m.MarkerSeq, ToSlot: slot})
	}
	slices.SortStableFunc(pl.Marks, func(a, b Mark) int { return cmp.Compare(a.MarkerSeq, b.MarkerSeq) })
	if err := pl.addContracts(p.Contracts); err != nil {
		return nil, err
	}
	for _, b := range p.Checkpoint.Breadcrumbs {
		h, err := NewHeaderRow(b)
		if err != nil {
			return nil, fmt.Errorf("breadcrumb: %w", err)
		}
		pl.Breadcrumbs = append(pl.Breadcrumbs, h)
	}
	var err error
	if pl.Tip, err = NewTipRow(p.Checkpoint.Tip); err != nil {
		return nil, fmt.Errorf("tip: %w", err)
	}
	if p.Checkpoint.Horizon != (chain.BlockHeader{}) {
		h, err := NewHeaderRow(p.Checkpoint.Horizon)
		if err != nil {
			return nil, fmt.Errorf("horizon: %w", err)
		}
		pl.Horizon = &h
	}
	for i, s := range p.Checkpoint.UTxO {
		if (s.Forward == nil) == (s.Rollback == nil) {
			return nil, fmt.Errorf("UTxO step %d: want exactly one of Forward and Rollback", i)
		}
	}
	return pl, nil
}

// addContracts encodes the contract index entries. A contract listed twice
// keeps its last creation; tags and parties are the union.
func (pl *Plan) addContracts(cs []record.ContractIndex) error {
	at := make(map[string]int, len(cs))
	for _, c := range cs {
		block, err := NewHeaderRow(c.Block)
		if err != nil {
			return fmt.Errorf("contract %s: %w", c.ID, err)
		}
		id := RefBytes(c.ID)
		row := ContractRow{
			ContractID: id, Version: c.Version, RolesCurrency: append([]byte{}, c.RolesCurrency...),
			CreatedSeq: c.CreatedSeq, Block: block,
		}
		if i, ok := at[string(id)]; ok {
			pl.Contracts[i] = row
		} else {
			at[string(id)] = len(pl.Contracts)
			pl.Contracts = append(pl.Contracts, row)
		}
		pl.indexed[string(id)] = true
		for _, t := range c.Tags {
			pl.Tags = append(pl.Tags, TagRow{ContractID: id, Tag: t})
		}
		for _, p := range c.Parties {
			pl.Parties = append(pl.Parties, newPartyRow(id, p, c.CreatedSeq))
		}
	}
	return nil
}

// CheckHead checks that the records continue a log whose newest seq is head.
func (pl *Plan) CheckHead(head int64) error {
	for i := range pl.Records {
		if want := head + 1 + int64(i); pl.Records[i].Seq != want {
			return fmt.Errorf("%w: record %d of the batch has seq %d, want %d (head %d)",
				record.ErrSeqMismatch, i, pl.Records[i].Seq, want, head)
		}
	}
	newHead := head + int64(len(pl.Records))
	for _, m := range pl.Marks {
		if m.MarkerSeq > newHead {
			return fmt.Errorf("rollback mark by seq %d beyond the head %d", m.MarkerSeq, newHead)
		}
	}
	return nil
}

// AdditionContracts lists the encoded ids of the contracts that party
// additions refer to and that this batch does not index: the backend looks
// them up for ResolveAdditions.
func (pl *Plan) AdditionContracts() [][]byte {
	var ids [][]byte
	seen := make(map[string]bool)
	for _, a := range pl.additions {
		id := RefBytes(a.Contract)
		if pl.indexed[string(id)] || seen[string(id)] {
			continue
		}
		seen[string(id)] = true
		ids = append(ids, id)
	}
	return ids
}

// ResolveAdditions adds the party additions to Parties. stored holds the
// encoded ids of AdditionContracts that are in the index; an addition to a
// contract neither stored nor in the batch is refused with
// history.ErrNotFound (the index has no entry to extend).
func (pl *Plan) ResolveAdditions(stored map[string]bool) error {
	for _, a := range pl.additions {
		id := RefBytes(a.Contract)
		if !pl.indexed[string(id)] && !stored[string(id)] {
			return fmt.Errorf("party addition by seq %d: contract %s: %w", a.Seq, a.Contract, record.ErrNotFound)
		}
		for _, p := range a.Parties {
			pl.Parties = append(pl.Parties, newPartyRow(id, p, a.Seq))
		}
	}
	pl.additions = nil
	return nil
}
