package historytest

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// writer plays the history store in front of a backend: it numbers the
// records of the blocks it is given, marks rollbacks, keeps the contract
// index, the breadcrumbs and the UTxO set, batches all of it into commits,
// and keeps a model of everything it committed to compare reads with.
type writer struct {
	tb    testing.TB
	b     history.Backend
	gen   generator
	fork  uint64
	depth uint64 // blocks of UTxO changes kept; 0 keeps all

	head  int64
	log   []record.Record // every record, log[seq-1], RolledBackBy as marked
	index map[chain.TxOutRef]*record.ContractIndex
	utxo  utxoModel
	tip   chain.Tip

	chain  []genBlock  // the current chain, oldest first
	states []*genState // states[i] is the state after chain[i-1]; states[0] the genesis

	pending       history.CommitParams
	pendingBlocks int
	// heads holds the head after each commit.
	heads []int64
	// onCommit, when set, is called with each batch before it is committed.
	onCommit func(p *history.CommitParams, head int64)
}

func newWriter(tb testing.TB, b history.Backend, seed uint64, depth uint64) *writer {
	return &writer{
		tb: tb, b: b, gen: generator{seed: seed}, depth: depth,
		index: make(map[chain.TxOutRef]*record.ContractIndex), utxo: newUTxOModel(),
		states: []*genState{{}},
	}
}

// tipHeader is the newest block of the current chain (zero for none).
func (w *writer) tipHeader() chain.BlockHeader { return w.states[len(w.states)-1].Header }

// grow generates n blocks on the current chain and adds them to the batch.
func (w *writer) grow(n int) {
	for range n {
		blk, st := w.gen.next(w.states[len(w.states)-1], w.fork)
		w.forward(blk, st)
	}
}

// forward adds one block to the batch.
func (w *writer) forward(blk genBlock, st *genState) {
	p := &w.pending
	first := w.head + 1
	for i := range blk.Records {
		r := blk.Records[i]
		w.head++
		r.Seq = w.head
		w.log = append(w.log, r)
		p.Records = append(p.Records, r)
	}
	for _, c := range blk.Contracts {
		c.CreatedSeq += first
		p.Contracts = append(p.Contracts, c)
		w.indexContract(c)
	}
	for _, a := range blk.Additions {
		a.Seq += first
		p.PartyAdditions = append(p.PartyAdditions, a)
		w.index[a.Contract].Parties = mergeParties(w.index[a.Contract].Parties, a.Parties)
	}
	if !blk.Changes.Empty() {
		c := blk.Changes
		p.Checkpoint.UTxO = append(p.Checkpoint.UTxO, history.UTxOStep{Forward: &c})
		w.utxo.forward(c)
	}
	if w.utxo.prune(blk.Header.BlockNo, w.depth) {
		p.Checkpoint.Horizon = w.utxo.horizon
	}
	w.chain = append(w.chain, blk)
	w.states = append(w.states, st)
	w.pendingBlocks++
}

// indexContract updates the index model with a creation: a re-creation
// keeps the entry, with the new seq and block, and the union of tags and
// parties.
func (w *writer) indexContract(c record.ContractIndex) {
	old, ok := w.index[c.ID]
	if !ok {
		cp := c
		cp.Tags = slices.Clone(c.Tags)
		cp.Parties = mergeParties(nil, c.Parties)
		w.index[c.ID] = &cp
		return
	}
	old.CreatedSeq, old.Block = c.CreatedSeq, c.Block
	for _, t := range c.Tags {
		if !slices.Contains(old.Tags, t) {
			old.Tags = append(old.Tags, t)
		}
	}
	old.Parties = mergeParties(old.Parties, c.Parties)
}

// mergeParties adds the parties of add not yet in ps.
func mergeParties(ps, add []record.Party) []record.Party {
	for _, p := range add {
		if !slices.ContainsFunc(ps, func(q record.Party) bool { return partyEqual(p, q) }) {
			ps = append(ps, p)
		}
	}
	return ps
}

func partyEqual(a, b record.Party) bool {
	return a.Address == b.Address && bytes.Equal(a.RoleCurrency, b.RoleCurrency) && bytes.Equal(a.Role, b.Role)
}

// rollBack rolls the current chain back by n blocks (to the block n below
// the tip, never below the UTxO horizon) and switches to a new fork. It
// appends a RolledBack marker and its mark when a current record is undone.
func (w *writer) rollBack(n int) {
	n = min(n, len(w.chain)-1)
	for n > 0 && w.chain[len(w.chain)-1-n].Header.Slot < w.utxo.horizon.Slot {
		n--
	}
	if n <= 0 {
		return
	}
	to := w.chain[len(w.chain)-1-n].Header
	w.rollBackTo(to)
	w.chain = w.chain[:len(w.chain)-n]
	w.states = w.states[:len(w.states)-n]
	w.fork++
}

// rollBackTo adds a rollback to the header's point to the batch.
func (w *writer) rollBackTo(to chain.BlockHeader) {
	p := &w.pending
	affected := slices.ContainsFunc(w.log, func(r record.Record) bool {
		return r.Block.Slot > to.Slot && r.RolledBackBy == nil && r.Kind != record.KindRolledBack
	})
	if affected {
		w.head++
		marker := w.head
		payload, _ := json.Marshal(map[string]any{"to": to.Point()})
		w.log = append(w.log, record.Record{Seq: marker, Kind: record.KindRolledBack, Block: to, Payload: payload})
		p.Records = append(p.Records, w.log[marker-1])
		p.Marks = append(p.Marks, history.RollbackMark{MarkerSeq: marker, To: to.Point()})
		for i := range w.log[:marker-1] {
			r := &w.log[i]
			if r.Block.Slot > to.Slot && r.RolledBackBy == nil && r.Kind != record.KindRolledBack {
				m := marker
				r.RolledBackBy = &m
			}
		}
	}
	pt := to.Point()
	p.Checkpoint.UTxO = append(p.Checkpoint.UTxO, history.UTxOStep{Rollback: &pt})
	w.utxo.rollback(pt)
	w.pendingBlocks++
}

// breadcrumbs returns the newest ten headers of the current chain, newest first.
func (w *writer) breadcrumbs() []chain.BlockHeader {
	var out []chain.BlockHeader
	for i := len(w.chain) - 1; i >= 0 && len(out) < 10; i-- {
		out = append(out, w.chain[i].Header)
	}
	return out
}

// play runs a scenario: each n > 0 grows n blocks, each n < 0 rolls -n
// back, each 0 commits.
func (w *writer) play(script ...int) {
	for _, n := range script {
		switch {
		case n > 0:
			w.grow(n)
		case n < 0:
			w.rollBack(-n)
		default:
			w.flush()
		}
	}
}

// walk makes steps random moves: six in ten grow 1 to maxGrow blocks, two
// roll 1 to 6 back, two commit, each commit followed by committed.
func (w *writer) walk(rng *rand.Rand, steps, maxGrow int, committed func()) {
	for range steps {
		switch x := rng.IntN(10); {
		case x < 6:
			w.grow(1 + rng.IntN(maxGrow))
		case x < 8:
			w.rollBack(1 + rng.IntN(6))
		default:
			w.flush()
			committed()
		}
	}
}

// extend grows the current chain by n blocks and commits them.
func (w *writer) extend(n int) {
	w.tb.Helper()
	w.grow(n)
	w.flush()
}

// flush commits the batch.
func (w *writer) flush() {
	w.tb.Helper()
	if err := w.commit(); err != nil {
		w.tb.Fatalf("commit: %v", err)
	}
}

// commit commits the batch and returns the backend's error.
func (w *writer) commit() error {
	p := &w.pending
	p.Checkpoint.Breadcrumbs = w.breadcrumbs()
	h := w.tipHeader()
	w.tip = chain.Tip{Point: h.Point(), BlockNo: h.BlockNo + 2}
	p.Checkpoint.Tip = w.tip
	if w.onCommit != nil {
		w.onCommit(p, w.head)
	}
	if err := w.b.Commit(context.Background(), p); err != nil {
		return err
	}
	w.heads = append(w.heads, w.head)
	w.pending = history.CommitParams{}
	w.pendingBlocks = 0
	return nil
}

// checkLog fails t unless the backend's whole log is the records written.
func (w *writer) checkLog(t testing.TB, what string) {
	t.Helper()
	checkRecords(t, what, readAll(t, w.b, record.RecordListParams{}, 1000), w.log)
}

// checkpoint returns the checkpoint the backend must hold after the last commit.
func (w *writer) checkpoint() *history.Checkpoint {
	return &history.Checkpoint{
		Head: w.head, Breadcrumbs: w.breadcrumbs(), Tip: w.tip,
		UTxOs: w.utxo.all(), Recent: slices.Clone(w.utxo.undo), Horizon: w.utxo.horizon,
	}
}

// current returns the records current as of seq s, markers excluded, in
// seq order: what ModeSnapshot lists.
func (w *writer) current(s int64) []record.Record {
	var out []record.Record
	for _, r := range w.log[:min(int(s), len(w.log))] {
		if r.Kind != record.KindRolledBack && r.Current(s) {
			out = append(out, r)
		}
	}
	return out
}

// matching returns the records of list that pass the filter, per
// history.Filter.Matches over the index model.
func (w *writer) matching(f *record.Filter, list []record.Record) []record.Record {
	var out []record.Record
	for i := range list {
		var idx *record.ContractIndex
		if c := list[i].Contract; c != nil {
			idx = w.index[*c]
		}
		if f.Matches(&list[i], idx) {
			out = append(out, list[i])
		}
	}
	return out
}

// replay feeds another backend the blocks of this writer's current chain
// only, as a follower that never saw the rolled-back blocks would.
func (w *writer) replay(tb testing.TB, b history.Backend, perCommit int) *writer {
	o := newWriter(tb, b, w.gen.seed, w.depth)
	for i, blk := range w.chain {
		o.forward(blk, w.states[i+1])
		if o.pendingBlocks >= perCommit {
			o.flush()
		}
	}
	o.flush()
	return o
}

// utxoEqual compares tracked outputs, nil and empty byte strings alike.
func utxoEqual(a, b classify.TrackedUTxO) bool {
	return a.Ref == b.Ref && a.Kind == b.Kind && a.ContractID == b.ContractID && a.Version == b.Version &&
		bytes.Equal(a.Address, b.Address) && bytes.Equal(a.RolesCurrency, b.RolesCurrency) && bytes.Equal(a.Role, b.Role) &&
		bytes.Equal(a.Datum, b.Datum)
}
