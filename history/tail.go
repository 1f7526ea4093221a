package history

import (
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// tail is the end of the log a store fanned out last, held so that a
// go-live request a few commits behind the head is taken with the records
// it missed. Without it a feed goes live only at the exact head: at a
// high commit rate, or with the store's mailbox behind, its request lands
// after the next commit, it is sent back to catch up, and every catch-up
// ends behind again. The records are those of the live batches (shared,
// read only); the tail holds at most limit of them, whole batches, oldest
// out first.
type tail struct {
	batches []tailBatch // oldest first; seqs run on without a gap
	records int
	limit   int
}

// tailBatch is one fanned-out batch and the contract index lookup its
// fan-out used (nil: none was read, as no live filter needed one).
type tailBatch struct {
	records []record.Record
	index   func(*chain.TxOutRef) *record.ContractIndex
}

// add appends a batch that continues the log after the tail's last seq;
// one that does not (the log went on without the tail) starts it again.
func (t *tail) add(records []record.Record, index func(*chain.TxOutRef) *record.ContractIndex) {
	if len(records) == 0 || t.limit <= 0 {
		return
	}
	if last, ok := t.last(); ok && records[0].Seq != last+1 {
		t.reset()
	}
	t.batches = append(t.batches, tailBatch{records: records, index: index})
	t.records += len(records)
	for t.records > t.limit && len(t.batches) > 1 {
		t.records -= len(t.batches[0].records)
		t.batches[0] = tailBatch{}
		t.batches = t.batches[1:]
	}
}

func (t *tail) reset() {
	clear(t.batches)
	t.batches, t.records = t.batches[:0], 0
}

// last returns the newest seq the tail holds.
func (t *tail) last() (int64, bool) {
	if len(t.batches) == 0 {
		return 0, false
	}
	b := t.batches[len(t.batches)-1].records
	return b[len(b)-1].Seq, true
}

// from returns the oldest cursor the tail serves at head: the seq before
// its first record (head itself when it holds none, or stops short of
// head).
func (t *tail) from(head int64) int64 {
	if last, ok := t.last(); !ok || last != head {
		return head
	}
	return t.batches[0].records[0].Seq - 1
}

// after returns the records after cursor the filter matches, at most max
// of them (max 0: any number); ok false when the tail cannot say: it does
// not reach back to cursor, more than max match, or the filter needs a
// contract index a batch was fanned out without.
func (t *tail) after(cursor, head int64, f *record.Filter, max int) (out []record.Record, ok bool) {
	if cursor < t.from(head) || cursor > head {
		return nil, false
	}
	needIndex := f.NeedsIndex()
	for i := range t.batches {
		b := &t.batches[i]
		recs := b.records
		if recs[len(recs)-1].Seq <= cursor {
			continue
		}
		if needIndex && b.index == nil {
			return nil, false
		}
		if recs[0].Seq <= cursor {
			recs = recs[cursor-recs[0].Seq+1:]
		}
		for j := range recs {
			if f.Matches(&recs[j], lookup(b.index, recs[j].Contract)) {
				out = append(out, recs[j])
			}
		}
		if max > 0 && len(out) > max {
			return nil, false
		}
	}
	return out, true
}

// lookup is index's entry for id (none without an index).
func lookup(index func(*chain.TxOutRef) *record.ContractIndex, id *chain.TxOutRef) *record.ContractIndex {
	if index == nil {
		return nil
	}
	return index(id)
}
