// Package catchup serves the catch-up reads of many subscriptions from one
// copy of the log: a bounded cache of pages, each a fixed, aligned range of
// seqs read once from the history, decoded once and encoded to JSON once,
// shared by every subscription passing through that stretch (as a broker
// serves many consumers from one copy). An admission limit bounds the
// database reads running at once, so a storm of subscriptions from the
// origin costs about one read of the log, not one per subscriber, and what
// a subscription holds is its batch (records and shared JSON), not a page.
//
// Filters that need the contract index (roles currency, tags, parties) or
// name contracts (sparse: the index finds their few records) read through
// the history as before, under the same admission limit; every other filter
// is applied to the shared pages in memory, with record.Filter.Matches, the
// in-memory twin of the backends' SQL.
//
// Correctness across rollbacks. The log is append-only: a record at a seq
// never changes except for rolledBackBy, set by the RolledBack marker that
// undid it, in the marker's transaction. A page remembers the head it was
// read under (readHead, loaded before the read): it reflects every marker at
// or below that head, perhaps more. A snapshot read (records current as of
// seq S: not undone by a marker at or below S) is served only from pages
// read under a head at or above S, so it never returns a record undone by
// a marker it must honour, and never misses one (the log has no gaps: a
// page holds every seq of its range). A log read returns rolled-back
// records and markers as appended; a page read before a later marker shows
// its records as a read at that moment would, and the marker itself comes
// after them in the log. A page that brings in a marker drops the pages
// read under an older head, so fresher pages replace them.
package catchup

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/marlowe-follower/follower/history/record"
)

// Source is where pages come from: the history handle.
type Source interface {
	RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error)
	Head() int64
}

// Config sizes a Cache. Zero fields take the defaults.
type Config struct {
	// PageRecords is the number of seqs in a page (DefaultPageRecords).
	PageRecords int
	// MaxBytes bounds the pages held (DefaultMaxBytes): the least
	// recently used go first. A batch a subscription holds keeps its own
	// records' memory alive, not its page's. Negative: no page is shared,
	// every read goes to the history on its own (to compare with).
	MaxBytes int64
	// MaxReads bounds the database reads running at once, for pages and
	// for filtered reads through the index (DefaultMaxReads); negative: no
	// bound.
	MaxReads int
	// Encode returns a record's JSON (each record is encoded once per
	// page); nil: records are served without JSON.
	Encode func(*record.Record) []byte
	// Idle is how long a page nobody reads is kept (DefaultIdle): once a
	// storm has passed, the cache gives its memory back.
	Idle time.Duration
	// GiveBack is called when the last page went for being idle (a storm
	// of catch-ups has passed): nil calls debug.FreeOSMemory, so that the
	// heap the storm took (the pages, the batches of its subscriptions)
	// goes back to the system at once. With no allocation after a storm
	// the runtime would neither collect nor return it for minutes.
	GiveBack func()
}

// Defaults of Config.
const (
	DefaultPageRecords = 1000
	DefaultMaxBytes    = 64 << 20
	DefaultMaxReads    = 4
	DefaultIdle        = 10 * time.Second
)

// ErrAhead is Read's error for a snapshot beyond the history's head (a
// reader process behind the writer whose cursor it was given): ask again
// shortly.
var ErrAhead = errors.New("catchup: snapshot beyond the history's head")

// ErrClosed is the error of a read after Close.
var ErrClosed = errors.New("catchup: the cache is closed")

// Cache is a shared page cache. Its methods are safe for concurrent use.
type Cache struct {
	src   Source
	cfg   Config
	reads chan struct{} // admission: one token per read running

	mu    sync.Mutex
	pages map[int64]*page // by page number
	lru   *list.List      // of *page, most recently used first
	bytes int64
	stats Stats
	sweep *time.Timer // drops idle pages; armed while pages are held

	// closed ends the page loads under way when the cache is closed
	// (Close): they belong to no caller, whose context would end them.
	closed context.Context
	close  context.CancelFunc
}

// Stats count what a cache did.
type Stats struct {
	Hits, Loads, Direct, Evictions, Invalidations, Expired int64
	// Extensions counts the loads that read only what the head added to a
	// page cut at an older head.
	Extensions int64
	// GivenBack counts the calls of Config.GiveBack.
	GivenBack int64
	Bytes     int64
	Pages     int
}

// page is one range of seqs, [lo, hi]: lo is aligned, hi is the range's
// end or, for the page holding the head when it was read, the head.
type page struct {
	n        int64 // page number: lo = n*size+1
	lo, hi   int64
	readHead int64
	recs     []record.Record
	json     [][]byte
	size     int64
	loaded   chan struct{} // closed once recs (or err) is set
	err      error
	elem     *list.Element // in lru once loaded without error
	used     time.Time     // last served (c.mu)
}

// New returns a cache reading from src.
func New(src Source, cfg Config) *Cache {
	if cfg.PageRecords <= 0 {
		cfg.PageRecords = DefaultPageRecords
	}
	cfg.PageRecords = min(cfg.PageRecords, record.MaxListLimit)
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxReads == 0 {
		cfg.MaxReads = DefaultMaxReads
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.GiveBack == nil {
		cfg.GiveBack = debug.FreeOSMemory
	}
	c := &Cache{src: src, cfg: cfg, pages: map[int64]*page{}, lru: list.New()}
	c.closed, c.close = context.WithCancel(context.Background())
	if cfg.MaxReads > 0 {
		c.reads = make(chan struct{}, cfg.MaxReads)
	}
	return c
}

// Close ends the page loads under way (their callers get the error) and
// drops the pages; reads after it fail with ErrClosed. The owner closes
// the cache when it stops, so that no read outlives it.
func (c *Cache) Close() {
	c.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sweep != nil {
		c.sweep.Stop()
		c.sweep = nil
	}
	for _, p := range c.pages {
		select {
		case <-p.loaded:
			c.drop(p)
		default: // its loader forgets it when it fails
		}
	}
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Bytes, s.Pages = c.bytes, c.lru.Len()
	return s
}

// admit waits for a read token.
func (c *Cache) admit(ctx context.Context) error {
	if c.reads == nil {
		return nil
	}
	select {
	case c.reads <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Cache) release() {
	if c.reads != nil {
		<-c.reads
	}
}

// Shared reports whether reads of the filter are served from shared
// pages (else they read through the history's index).
func Shared(f *record.Filter) bool {
	return len(f.Contracts) == 0 && len(f.RolesCurrency) == 0 && len(f.Tags) == 0 &&
		len(f.PartyAddress) == 0 && len(f.PartyRole) == 0
}

// pageFor returns a loaded page holding seq, read under a head of at least
// minHead, loading it (once, whoever asks meanwhile) when the cache has
// none. bound is the highest seq the caller reads: a page cut at an older
// head that does not reach seq is read again.
func (c *Cache) pageFor(ctx context.Context, seq, minHead int64) (*page, error) {
	n := (seq - 1) / int64(c.cfg.PageRecords)
	for {
		var base *page
		c.mu.Lock()
		p := c.pages[n]
		if p != nil {
			select {
			case <-p.loaded:
				if p.err == nil && p.hi >= seq && p.readHead >= minHead {
					c.lru.MoveToFront(p.elem)
					p.used = time.Now()
					c.stats.Hits++
					c.mu.Unlock()
					return p, nil
				}
				// Stale or failed: read it again, or only what the head
				// added to it when it was cut at an older head.
				if p.err == nil && p.hi < seq {
					base = p
				}
				p = nil
			default:
				c.mu.Unlock()
				select { // another caller reads it: wait, then look again
				case <-p.loaded:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				continue
			}
		}
		p = &page{n: n, lo: n*int64(c.cfg.PageRecords) + 1, loaded: make(chan struct{})}
		c.replace(n, p)
		c.stats.Loads++
		c.mu.Unlock()
		// The read is everyone's who waits for the page: one caller's
		// context does not end it, closing the cache does.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		unhook := context.AfterFunc(c.closed, cancel)
		c.load(lctx, p, base)
		unhook()
		cancel()
		if p.err != nil {
			return nil, p.err
		}
		if p.hi >= seq && p.readHead >= minHead {
			return p, nil
		}
		// The head moved back under us (a reader whose writer changed):
		// the caller sees it at its next read.
		return nil, ErrAhead
	}
}

// replace puts p in the map in place of page n (c.mu held).
func (c *Cache) replace(n int64, p *page) {
	if old := c.pages[n]; old != nil {
		c.drop(old)
	}
	c.pages[n] = p
}

// drop removes a page from the map and the LRU (c.mu held). Batches that
// hold its records keep them; the cache forgets them.
func (c *Cache) drop(p *page) {
	if c.pages[p.n] == p {
		delete(c.pages, p.n)
	}
	if p.elem != nil {
		c.lru.Remove(p.elem)
		p.elem = nil
		c.bytes -= p.size
	}
}

// load reads, decodes and encodes page p, then publishes it.
//
// At the head the page is read again as the head moves: from base, the
// page as cut at an older head, only the records after base's end are read
// and encoded, and base's are kept, unless those new records bring in a
// RolledBack marker (it may have undone some of base's records: the page
// is read whole).
func (c *Cache) load(ctx context.Context, p *page, base *page) {
	defer close(p.loaded)
	if err := c.admit(ctx); err != nil {
		p.err = err
		c.forget(p)
		return
	}
	head := c.src.Head()
	end := min(p.lo+int64(c.cfg.PageRecords)-1, head)
	from := p.lo
	if base != nil {
		from = base.hi + 1
	}
	recs, err := c.read(ctx, from, end)
	if err == nil && base != nil && slices.ContainsFunc(recs, func(r record.Record) bool { return r.Kind == record.KindRolledBack }) {
		base, from = nil, p.lo
		recs, err = c.read(ctx, from, end)
	}
	c.release()
	if err != nil {
		p.err = err
		c.forget(p)
		return
	}
	p.hi, p.readHead = end, head
	js := make([][]byte, len(recs))
	var marker int64
	for i := range recs {
		r := &recs[i]
		if c.cfg.Encode != nil {
			js[i] = c.cfg.Encode(r)
		}
		p.size += int64(len(js[i])) + recordOverhead
		if !aliasPayload(r, js[i]) {
			p.size += int64(len(r.Payload))
		}
		if r.Kind == record.KindRolledBack {
			marker = r.Seq
		}
	}
	p.recs, p.json = recs, js
	if base != nil {
		// Copies: base's readers go on reading its slices.
		p.recs = append(slices.Clip(base.recs), recs...)
		p.json = append(slices.Clip(base.json), js...)
		p.size += base.size
		c.stats.Extensions++
	}
	c.publish(p, marker)
}

// read reads the records [from, to] of the log (none when to < from),
// every one of them: a gap is an error.
func (c *Cache) read(ctx context.Context, from, to int64) ([]record.Record, error) {
	if to < from {
		return nil, nil
	}
	recs, err := c.src.RecordList(ctx, &record.RecordListParams{After: from - 1, UpTo: to, Limit: int(to - from + 1)})
	if err == nil && int64(len(recs)) != to-from+1 {
		err = errors.New("catchup: the history returned a page with a gap")
	}
	return recs, err
}

// aliasPayload points the record's payload at its bytes inside the
// record's JSON, when they are there (Config.Encode writes the payload
// verbatim), so that a page holds each payload once, not twice: the
// payload as read goes to the garbage collector. It reports whether it
// did.
func aliasPayload(r *record.Record, js []byte) bool {
	n := len(r.Payload)
	if n == 0 || len(js) < n {
		return false
	}
	// The payload is the JSON's last field but for rolledBackBy: look
	// there first.
	k := len(js) - 1 - n
	if k < 0 || !bytes.Equal(js[k:k+n], r.Payload) {
		if k = bytes.LastIndex(js, r.Payload); k < 0 {
			return false
		}
	}
	r.Payload = js[k : k+n : k+n]
	return true
}

// loadTimeout bounds one page's read.
const loadTimeout = time.Minute

// recordOverhead approximates a decoded record's memory besides its
// payload and JSON (the struct, the contract reference, slice headers).
const recordOverhead = 256

// forget removes a page that failed to load.
func (c *Cache) forget(p *page) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pages[p.n] == p {
		delete(c.pages, p.n)
	}
}

// publish adds a loaded page to the LRU, drops the pages a marker it holds
// may have changed (read under an older head), and evicts down to the bound.
func (c *Cache) publish(p *page, marker int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pages[p.n] != p {
		return // replaced meanwhile: serve it to its readers only
	}
	if marker > 0 {
		for e := c.lru.Front(); e != nil; {
			q := e.Value.(*page)
			e = e.Next()
			if q.readHead < marker {
				c.drop(q)
				c.stats.Invalidations++
			}
		}
	}
	p.elem = c.lru.PushFront(p)
	p.used = time.Now()
	c.bytes += p.size
	if c.sweep == nil {
		c.sweep = time.AfterFunc(c.cfg.Idle, c.expire)
	}
	for c.bytes > c.cfg.MaxBytes && c.lru.Len() > 1 {
		c.drop(c.lru.Back().Value.(*page))
		c.stats.Evictions++
	}
}

// expire drops the pages nobody has read for Config.Idle, least recently
// used first, and looks again later while pages are left.
func (c *Cache) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	cutoff := time.Now().Add(-c.cfg.Idle)
	expired := false
	for e := c.lru.Back(); e != nil; {
		p := e.Value.(*page)
		e = e.Prev()
		if p.used.After(cutoff) {
			break
		}
		c.drop(p)
		c.stats.Expired++
		expired = true
	}
	c.sweep = nil
	if c.lru.Len() > 0 {
		c.sweep = time.AfterFunc(c.cfg.Idle/2, c.expire)
		return
	}
	if expired {
		c.stats.GivenBack++
		go c.cfg.GiveBack()
	}
}
