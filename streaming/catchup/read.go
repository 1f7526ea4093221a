package catchup

import (
	"context"

	"github.com/marlowe-follower/follower/history/record"
)

// Query is one catch-up read: the records matching Filter after the
// cursor, at most Max of them (Max of 0 reads one page's worth).
type Query struct {
	Filter record.Filter
	From   record.Cursor
	Max    int
}

// Result is what a Read found: every matching record between the query's
// cursor and Cursor, in seq order.
type Result struct {
	// Records are read only: copies of the shared ones (their payloads
	// shared) or, from the page at the head, the page's own.
	Records []record.Record
	// JSON holds each record's encoding (Config.Encode), shared: callers
	// must not modify it; an entry is nil when the record was read through
	// the index (the caller encodes it).
	JSON [][]byte
	// Cursor is the position after the records read: a snapshot cursor
	// while in the snapshot, a log cursor once it is complete.
	Cursor record.Cursor
	// AtHead: the log was read up to the head the read started under (the
	// caller may go live at Cursor).
	AtHead bool
}

// maxScanPages bounds the pages one Read scans for a filter that matches
// few of their records: the read returns what it found and where it
// stopped, and the caller reads on.
const maxScanPages = 8

// Read reads the next records of q. ErrAhead means q's snapshot is beyond
// the head: ask again shortly.
func (c *Cache) Read(ctx context.Context, q Query) (Result, error) {
	limit := q.Max
	if limit <= 0 {
		limit = c.cfg.PageRecords
	}
	limit = min(limit, record.MaxListLimit)
	if c.closed.Err() != nil {
		return Result{Cursor: q.From}, ErrClosed
	}
	head := c.src.Head()
	if q.From.Snapshot > head {
		return Result{Cursor: q.From}, ErrAhead
	}
	res := Result{Cursor: q.From}
	scanned := 0
	for len(res.Records) < limit && scanned < maxScanPages {
		snap := res.Cursor.Snapshot
		bound := head
		if snap > 0 {
			bound = snap
		}
		if res.Cursor.Seq >= bound {
			if snap == 0 {
				res.AtHead = true
				break
			}
			res.Cursor = record.Cursor{Seq: snap} // the snapshot is complete: the log after it
			continue
		}
		var err error
		if c.cfg.MaxBytes > 0 && Shared(&q.Filter) {
			err = c.scan(ctx, &q.Filter, &res, bound, limit)
		} else {
			err = c.direct(ctx, &q.Filter, &res, bound, limit)
		}
		if err != nil {
			return Result{Cursor: q.From}, err
		}
		scanned++
	}
	return res, nil
}

// scan reads one shared page from the cursor on, appending the records that
// pass the filter (a snapshot's: those current as of it, markers left out).
func (c *Cache) scan(ctx context.Context, f *record.Filter, res *Result, bound int64, limit int) error {
	snap := res.Cursor.Snapshot
	p, err := c.pageFor(ctx, res.Cursor.Seq+1, snap)
	if err != nil {
		return err
	}
	end := min(p.hi, bound)
	if res.Records == nil && snap == 0 && len(f.Kinds) == 0 && p.hi == p.readHead {
		// Every record from the cursor on, in the page at the head (the
		// subscriptions following the tip): the page's own records,
		// shared, not a copy each. Only there: a page behind the head
		// that a subscription's batch keeps would outlive its eviction.
		from := res.Cursor.Seq + 1 - p.lo
		to := min(from+int64(limit), end-p.lo+1)
		res.Records, res.JSON = p.recs[from:to:to], p.json[from:to:to]
		res.Cursor.Seq = p.lo + to - 1
		return nil
	}
	if res.Records == nil {
		n := min(limit, int(end-res.Cursor.Seq))
		res.Records, res.JSON = make([]record.Record, 0, n), make([][]byte, 0, n)
	}
	for i := res.Cursor.Seq + 1 - p.lo; i <= end-p.lo; i++ {
		r := &p.recs[i]
		if snap > 0 && (r.Kind == record.KindRolledBack || r.RolledBackBy != nil && *r.RolledBackBy <= snap) {
			continue
		}
		if !f.Matches(r, nil) {
			continue
		}
		res.Records = append(res.Records, *r)
		res.JSON = append(res.JSON, p.json[i])
		if len(res.Records) == limit {
			res.Cursor.Seq = r.Seq
			return nil
		}
	}
	res.Cursor.Seq = end
	return nil
}

// direct reads through the history's index (a filter the pages cannot
// answer without it), under the admission limit.
func (c *Cache) direct(ctx context.Context, f *record.Filter, res *Result, bound int64, limit int) error {
	if err := c.admit(ctx); err != nil {
		return err
	}
	snap := res.Cursor.Snapshot
	p := &record.RecordListParams{Filter: *f, After: res.Cursor.Seq, Limit: limit - len(res.Records)}
	if snap > 0 {
		p.Mode, p.Snapshot = record.ModeSnapshot, snap
	} else {
		p.UpTo = bound
	}
	recs, err := c.src.RecordList(ctx, p)
	c.release()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.stats.Direct++
	c.mu.Unlock()
	res.Records = append(res.Records, recs...)
	res.JSON = append(res.JSON, make([][]byte, len(recs))...)
	if len(recs) == p.Limit {
		res.Cursor.Seq = recs[len(recs)-1].Seq
	} else {
		res.Cursor.Seq = bound
	}
	return nil
}
