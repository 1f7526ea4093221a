package cvsql

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// Counts of list matches (a list's Total when its params ask for Count):
// each count runs in the read transaction of its page, so it is exactly the
// page's state, and is kept for that state: a count is keyed by its
// statement and arguments and by the cursor's seq, which names one state of
// the projection (every commit moves it). Paging through a list repeats the
// count at every page until the projection commits again; the cache makes
// those repeats free.

// maxCounts bounds the counts kept for one seq.
const maxCounts = 4096

// Counts caches counts for the newest seq a count ran at; the zero value
// is empty and ready. Safe for concurrent use.
type Counts struct {
	mu     sync.Mutex
	seq    int64
	counts map[string]int64
	// Runs and Hits count the counts asked for and those the cache answered.
	runs, hits int64
}

// Stats returns how many counts were asked for and how many the cache
// answered.
func (c *Counts) Stats() (runs, hits int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs, c.hits
}

// Forget drops the kept counts (benchmarks measure the counting with it).
func (c *Counts) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
}

// total is count for a page's total when want is set, nil when not.
func (c *Counts) total(ctx context.Context, q Querier, seq int64, want bool, sql string, args []any) (*int64, error) {
	if !want {
		return nil, nil
	}
	n, err := c.count(ctx, q, seq, sql, args)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// count runs sql (a SELECT of one count) with args in q, whose snapshot is
// at seq, or answers it from the cache. A nil cache always runs it.
func (c *Counts) count(ctx context.Context, q Querier, seq int64, sql string, args []any) (int64, error) {
	key := countKey(sql, args)
	if c != nil {
		c.mu.Lock()
		c.runs++
		n, ok := c.counts[key]
		if ok && c.seq == seq {
			c.hits++
			c.mu.Unlock()
			return n, nil
		}
		c.mu.Unlock()
	}
	var n int64
	found, err := queryOne(ctx, q, sql, args, &n)
	if err == nil && !found {
		err = fmt.Errorf("a count returned no row")
	}
	if err != nil || c == nil {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq < c.seq {
		return n, nil // an older snapshot's: the cache keeps the newest
	}
	if seq > c.seq || c.counts == nil || len(c.counts) >= maxCounts {
		c.seq, c.counts = seq, map[string]int64{}
	}
	c.counts[key] = n
	return n, nil
}

// countKey is a count's statement and arguments as one string.
func countKey(sql string, args []any) string {
	var b strings.Builder
	b.WriteString(sql)
	for _, a := range args {
		b.WriteByte(0)
		switch v := a.(type) {
		case []byte:
			b.WriteByte('b')
			b.WriteString(hex.EncodeToString(v))
		case string:
			b.WriteByte('s')
			b.WriteString(strconv.Quote(v))
		case int64:
			b.WriteByte('i')
			b.WriteString(strconv.FormatInt(v, 10))
		default:
			fmt.Fprintf(&b, "%T:%v", v, v)
		}
	}
	return b.String()
}

// contractCount is the statement counting a filter's contracts: over its
// drives' index alone when it has tags or parties and no other condition
// (an index-only scan of the matches), through the index to the contracts
// when it has others, else over the contracts. DISTINCT when a contract can
// be reached through two of its values.
func contractCount(f *contractstore.ContractFilter) (string, []any) {
	drives, w := contractFilterSQL(f)
	if len(drives) == 0 {
		return `SELECT count(*) FROM cv_contracts c` + w.String(), w.args
	}
	alts := make([]string, len(drives))
	var args []any
	for i, d := range drives {
		alts[i] = "(" + d.cond + ")"
		args = append(args, d.args...)
	}
	what := "count(*)"
	if len(drives) > 1 {
		what = "count(DISTINCT d.created_seq)" // a contract's creation seq names it, and the indexes hold it
	}
	from := drives[0].from + " d"
	if len(w.conds) > 0 {
		from += " JOIN cv_contracts c ON c.contract_id = d.contract_id"
	}
	dw := where{conds: append([]string{"(" + strings.Join(alts, " OR ") + ")"}, w.conds...), args: append(args, w.args...)}
	return `SELECT ` + what + ` FROM ` + from + dw.String(), dw.args
}

// contractTotal is a contract page's total: from the cursor row's counters
// when the filter is at most a status, else counted when p asks for it
// (nil otherwise).
func contractTotal(ctx context.Context, q Querier, c *Counts, head contractstore.Head, p *contractstore.ContractListParams) (*int64, error) {
	f := &p.Filter
	if countersAnswer(f) {
		total := head.Contracts
		switch f.Status {
		case contractstore.StatusOpen:
			total = head.OpenContracts
		case contractstore.StatusClosed:
			total = head.Contracts - head.OpenContracts
		}
		return &total, nil
	}
	if !p.Count {
		return nil, nil
	}
	sql, args := contractCount(f)
	n, err := c.count(ctx, q, head.Seq, sql, args)
	return &n, err
}

// countersAnswer reports whether the cursor row's counters give a filter's
// total: no filter, or a status only.
func countersAnswer(f *contractstore.ContractFilter) bool {
	return len(f.Contracts) == 0 && len(f.RolesCurrency) == 0 && len(f.Tags) == 0 && len(f.PartyAddress) == 0 && len(f.PartyRole) == 0
}
