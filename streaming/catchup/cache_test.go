package catchup

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
)

// memLog is an append-only log with rollbacks, read as the backends read
// (record.RecordListParams): the reference the cache must agree with.
type memLog struct {
	mu      sync.Mutex
	recs    []record.Record // recs[i].Seq == i+1
	reads   atomic.Int64
	running atomic.Int64
	peak    atomic.Int64
	gate    chan struct{} // when set, each read waits for a token
}

func (l *memLog) Head() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.recs))
}

var contracts = []chain.TxOutRef{{Index: 0}, {Index: 1}, {Index: 2}}

// append adds n records of random kinds and contracts.
func (l *memLog) append(rng *rand.Rand, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds := []record.Kind{record.KindContractCreated, record.KindInputsApplied, record.KindPayoutWithdrawn}
	for range n {
		seq := int64(len(l.recs) + 1)
		c := contracts[rng.IntN(len(contracts))]
		l.recs = append(l.recs, record.Record{Seq: seq, Kind: kinds[rng.IntN(len(kinds))], Contract: &c,
			Block: chain.BlockHeader{Slot: uint64(seq)}, Payload: []byte(`{"n":` + strconv.FormatInt(seq, 10) + `}`)})
	}
}

// rollback undoes the newest k current records and appends the marker, in
// one step (as the backends' one transaction).
func (l *memLog) rollback(k int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	marker := int64(len(l.recs) + 1)
	for i := len(l.recs) - 1; i >= 0 && k > 0; i-- {
		r := &l.recs[i]
		if r.Kind == record.KindRolledBack {
			break
		}
		if r.RolledBackBy == nil {
			r.RolledBackBy = &marker
			k--
		}
	}
	l.recs = append(l.recs, record.Record{Seq: marker, Kind: record.KindRolledBack, Block: chain.BlockHeader{Slot: uint64(marker)}})
	return marker
}

func (l *memLog) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	if l.gate != nil {
		select {
		case <-l.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := l.running.Add(1)
	defer l.running.Add(-1)
	for {
		if old := l.peak.Load(); n <= old || l.peak.CompareAndSwap(old, n) {
			break
		}
	}
	l.reads.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []record.Record
	for i := p.After; i < int64(len(l.recs)) && len(out) < p.Limit; i++ {
		r := l.recs[i]
		if p.UpTo > 0 && r.Seq > p.UpTo {
			break
		}
		if p.Mode == record.ModeSnapshot {
			if r.Seq > p.Snapshot {
				break
			}
			if r.Kind == record.KindRolledBack || r.RolledBackBy != nil && *r.RolledBackBy <= p.Snapshot {
				continue
			}
		}
		if !p.Filter.Matches(&r, nil) {
			continue
		}
		if r.RolledBackBy != nil {
			v := *r.RolledBackBy
			r.RolledBackBy = &v
		}
		out = append(out, r)
	}
	return out, nil
}

// reference reads what a feed reading the log directly would deliver from
// cursor to the head, in pages of size.
func reference(t *testing.T, l *memLog, f record.Filter, from record.Cursor) []string {
	var out []string
	cur := from
	head := l.Head()
	for {
		p := &record.RecordListParams{Filter: f, After: cur.Seq, Limit: 7}
		bound := head
		if cur.Snapshot > 0 {
			p.Mode, p.Snapshot, bound = record.ModeSnapshot, cur.Snapshot, cur.Snapshot
		} else {
			p.UpTo = head
		}
		if cur.Seq >= bound {
			if cur.Snapshot == 0 {
				return out
			}
			cur = record.Cursor{Seq: cur.Snapshot}
			continue
		}
		recs, err := l.RecordList(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, show(&r))
		}
		if len(recs) == p.Limit {
			cur.Seq = recs[len(recs)-1].Seq
		} else {
			cur.Seq = bound
		}
	}
}

func show(r *record.Record) string {
	s := strconv.FormatInt(r.Seq, 10)
	if r.RolledBackBy != nil {
		s += "/" + strconv.FormatInt(*r.RolledBackBy, 10)
	}
	return s
}

// readAll reads through the cache from cursor until it is at the head.
func readAll(t testing.TB, c *Cache, f record.Filter, from record.Cursor, batch int) []string {
	var out []string
	cur := from
	for {
		res, err := c.Read(context.Background(), Query{Filter: f, From: cur, Max: batch})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Records) > batch {
			t.Fatalf("read %d records, asked for at most %d", len(res.Records), batch)
		}
		for i := range res.Records {
			r := &res.Records[i]
			out = append(out, show(r))
			if res.JSON[i] != nil && string(res.JSON[i]) != string(c.cfg.Encode(r)) {
				t.Fatalf("seq %d: JSON %s", r.Seq, res.JSON[i])
			}
		}
		cur = res.Cursor
		if res.AtHead {
			return out
		}
	}
}

func encode(r *record.Record) []byte { return fmt.Appendf(nil, `{"seq":%d}`, r.Seq) }

var filters = map[string]record.Filter{
	"all":      {},
	"kinds":    {Kinds: []record.Kind{record.KindPayoutWithdrawn, record.KindRolledBack}},
	"nomarker": {Kinds: []record.Kind{record.KindInputsApplied}},
	"contract": {Contracts: contracts[1:2]}, // through the index
}

// TestReadsAgreeWithTheLog: from the origin (a snapshot), from cursors in
// the log and in a snapshot, with every kind of filter, batches of several
// sizes, and a log with rollbacks: the cache gives what the log gives.
func TestReadsAgreeWithTheLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := &memLog{}
	for range 20 {
		l.append(rng, 1+rng.IntN(40))
		if rng.IntN(3) == 0 {
			l.rollback(1 + rng.IntN(15))
		}
	}
	head := l.Head()
	c := New(l, Config{PageRecords: 50, Encode: encode})
	for name, f := range filters {
		for _, from := range []record.Cursor{{Snapshot: head}, {Snapshot: head, Seq: 123}, {Snapshot: head / 2}, {}, {Seq: 77}, {Seq: head}} {
			for _, batch := range []int{1, 13, 200} {
				got, want := readAll(t, c, f, from, batch), reference(t, l, f, from)
				if !slices.Equal(got, want) {
					t.Fatalf("%s from %v batch %d:\n got %v\nwant %v", name, from, batch, got, want)
				}
			}
		}
	}
	if s := c.Stats(); s.Direct == 0 || s.Hits == 0 {
		t.Fatalf("stats %+v: want reads through the index and page hits", s)
	}
}

// TestOneReadPerPageUnderAStorm: many readers from the origin at once read
// each page from the history once, and no more reads run at once than the
// admission limit allows.
func TestOneReadPerPageUnderAStorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	l := &memLog{}
	l.append(rng, 2000)
	head := l.Head()
	want := reference(t, l, record.Filter{}, record.Cursor{Snapshot: head})
	l.reads.Store(0)
	c := New(l, Config{PageRecords: 100, MaxReads: 2, MaxBytes: 1 << 30})
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := range 200 {
		wg.Go(func() {
			got := readAll(t, c, record.Filter{}, record.Cursor{Snapshot: head}, 10+i%50)
			if !slices.Equal(got, want) {
				errs <- fmt.Sprintf("reader %d: %d records, want %d", i, len(got), len(want))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := l.reads.Load(); n != 20 {
		t.Errorf("%d reads of the history for 20 pages", n)
	}
	if p := l.peak.Load(); p > 2 {
		t.Errorf("%d reads at once, the limit is 2", p)
	}
}

// TestEvictionKeepsTheBound: a cache smaller than the log holds no more
// than its bound, evicts, and still reads right.
func TestEvictionKeepsTheBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := &memLog{}
	l.append(rng, 3000)
	c := New(l, Config{PageRecords: 100, MaxBytes: 5 * 100 * (recordOverhead + 40), Encode: encode})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			from := record.Cursor{Seq: int64(i * 150)}
			if got, want := readAll(t, c, record.Filter{}, from, 64), reference(t, l, record.Filter{}, from); !slices.Equal(got, want) {
				t.Errorf("reader %d: %d records, want %d", i, len(got), len(want))
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.Evictions == 0 || s.Bytes > c.cfg.MaxBytes || s.Pages > 5 {
		t.Fatalf("stats %+v with a bound of %d bytes", s, c.cfg.MaxBytes)
	}
}

// TestRollbackNeverServesAnUndoneRecord: pages read before a rollback are
// not served to a snapshot that includes the marker (they would hand out
// records it undid, or miss the records after it), and a page holding the
// marker drops the pages read before it.
func TestRollbackNeverServesAnUndoneRecord(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	l := &memLog{}
	l.append(rng, 250)
	c := New(l, Config{PageRecords: 100, Encode: encode})
	before := l.Head()
	readAll(t, c, record.Filter{}, record.Cursor{Snapshot: before}, 200) // every page cached
	marker := l.rollback(80)                                             // undoes 171-250
	l.append(rng, 30)
	head := l.Head()
	// The page holding the marker is read again (it was cut at the old
	// head); it drops the pages read before the marker. (A log read served
	// from a page read before the marker would show its records as a read
	// at that moment did, then the marker: what a log read may always see.)
	if got, want := readAll(t, c, record.Filter{}, record.Cursor{Seq: 250}, 200), reference(t, l, record.Filter{}, record.Cursor{Seq: 250}); !slices.Equal(got, want) {
		t.Fatalf("from 250:\n got %v\nwant %v", got, want)
	}
	if s := c.Stats(); s.Invalidations != 2 || s.Pages != 1 {
		t.Fatalf("stats %+v: the marker's page should have dropped the 2 pages read before it", s)
	}
	for _, from := range []record.Cursor{{Seq: 150}, {Snapshot: head}, {Snapshot: marker}} {
		got, want := readAll(t, c, record.Filter{}, from, 200), reference(t, l, record.Filter{}, from)
		if !slices.Equal(got, want) {
			t.Fatalf("from %v:\n got %v\nwant %v", from, got, want)
		}
	}
	// A snapshot from before the marker still gets the records it undid
	// (they were current then), and the marker after them.
	from := record.Cursor{Snapshot: before}
	if got, want := readAll(t, c, record.Filter{}, from, 200), reference(t, l, record.Filter{}, from); !slices.Equal(got, want) {
		t.Fatalf("from %v:\n got %v\nwant %v", from, got, want)
	}
}

// TestIdlePagesAreGivenBack: once nobody reads them, the pages go, and
// the memory with them (Config.GiveBack, once the last page went).
func TestIdlePagesAreGivenBack(t *testing.T) {
	// In a bubble with its own clock, which moves only when every
	// goroutine in it waits: no page goes idle while the reads are still
	// going, however slow the machine (with the real clock, a loaded
	// machine let the first pages expire before the last was read).
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		l := &memLog{}
		l.append(rng, 500)
		var givenBack atomic.Int64
		c := New(l, Config{PageRecords: 100, Idle: 20 * time.Millisecond, GiveBack: func() { givenBack.Add(1) }})
		readAll(t, c, record.Filter{}, record.Cursor{Snapshot: l.Head()}, 100)
		if s := c.Stats(); s.Pages != 5 {
			t.Fatalf("stats %+v after reading 5 pages", s)
		}
		waitfor.Until(t, 10*time.Second, "the idle pages to go and their memory to be given back", func() bool {
			return c.Stats().Pages == 0 && givenBack.Load() == 1
		})
		if s := c.Stats(); s.Expired != 5 || s.Bytes != 0 || s.GivenBack != 1 {
			t.Fatalf("stats %+v", s)
		}
		// A second storm is given back too, once.
		readAll(t, c, record.Filter{}, record.Cursor{Snapshot: l.Head()}, 100)
		waitfor.Until(t, 10*time.Second, "the second storm's pages to be given back", func() bool {
			return c.Stats().Pages == 0 && givenBack.Load() == 2
		})
		c.Close()
	})
}

// TestPagesHoldEachPayloadOnce: a record's payload points into its JSON
// when the encoding holds it verbatim (as the server's does), the page
// counts it once, and readers get the payload's bytes unchanged.
func TestPagesHoldEachPayloadOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := &memLog{}
	l.append(rng, 250)
	marker := l.rollback(3) // a record with rolledBackBy after its payload
	withPayload := func(r *record.Record) []byte {
		b := fmt.Appendf(nil, `{"seq":%d,"payload":%s`, r.Seq, r.Payload)
		if r.RolledBackBy != nil {
			b = fmt.Appendf(b, `,"rolledBackBy":%d`, *r.RolledBackBy)
		}
		return append(b, '}')
	}
	c := New(l, Config{PageRecords: 100, Encode: withPayload})
	from := record.Cursor{Seq: 0}
	aliased := 0
	for {
		res, err := c.Read(context.Background(), Query{From: from, Max: 64})
		if err != nil {
			t.Fatal(err)
		}
		for i := range res.Records {
			r, js := &res.Records[i], res.JSON[i]
			want := l.recs[r.Seq-1].Payload
			if string(r.Payload) != string(want) {
				t.Fatalf("seq %d: payload %s, want %s", r.Seq, r.Payload, want)
			}
			if len(r.Payload) == 0 {
				continue
			}
			start := &js[0]
			end := &js[len(js)-1]
			if p := &r.Payload[0]; uintptr(unsafe.Pointer(p)) >= uintptr(unsafe.Pointer(start)) && uintptr(unsafe.Pointer(p)) <= uintptr(unsafe.Pointer(end)) {
				aliased++
			}
			if cap(r.Payload) != len(r.Payload) {
				t.Fatalf("seq %d: the payload's capacity reaches into the JSON after it", r.Seq)
			}
		}
		from = res.Cursor
		if res.AtHead {
			break
		}
	}
	if aliased != int(marker-1) {
		t.Fatalf("%d payloads point into their JSON, want %d (every record but the marker)", aliased, marker-1)
	}
	var want int64
	for i := range l.recs {
		want += int64(len(withPayload(&l.recs[i]))) + recordOverhead
	}
	if s := c.Stats(); s.Bytes != want {
		t.Fatalf("the pages count %d bytes, want %d (each payload once, in its JSON)", s.Bytes, want)
	}
}

// TestCloseEndsLoadsUnderWay: a page load that waits on the history (held
// here by the gate) belongs to no caller, so a caller's context does not
// end it; Close does, and its readers get the error at once. Reads after
// Close fail with ErrClosed, and no page is left.
func TestCloseEndsLoadsUnderWay(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := &memLog{gate: make(chan struct{})}
	l.append(rng, 300)
	c := New(l, Config{PageRecords: 100, MaxBytes: 1 << 30})
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Read(context.Background(), Query{From: record.Cursor{Snapshot: l.Head()}, Max: 10})
			done <- err
		}()
	}
	waitfor.Until(t, time.Minute, "a page load waiting on the history", func() bool { return c.Stats().Loads == 1 })
	c.Close()
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a read whose page load the cache's Close ended returned no error")
			}
		case <-time.After(time.Minute):
			t.Fatal("Close did not end the page load under way")
		}
	}
	if _, err := c.Read(context.Background(), Query{From: record.Cursor{Snapshot: l.Head()}, Max: 10}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a read after Close: %v, want ErrClosed", err)
	}
	if st := c.Stats(); st.Pages != 0 || st.Bytes != 0 {
		t.Fatalf("after Close: %d pages, %d bytes", st.Pages, st.Bytes)
	}
}

// counted is a Source that counts the records it returns, of reads
// without a filter (the pages').
type counted struct {
	*memLog
	pageRecords atomic.Int64
}

func (c *counted) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	recs, err := c.memLog.RecordList(ctx, p)
	if Shared(&p.Filter) && len(p.Filter.Kinds) == 0 {
		c.pageRecords.Add(int64(len(recs)))
	}
	return recs, err
}

// TestTipPageFollowsTheHead: readers following the head while records
// and rollbacks are appended get what the log gives, from the log and
// from snapshots; the page at the head is read again only for what the
// head added, unless that brings in a marker (then it is read whole).
func TestTipPageFollowsTheHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := &memLog{}
	l.append(rng, 30)
	src := &counted{memLog: l}
	c := New(src, Config{PageRecords: 1000, Encode: encode})
	readAll(t, c, record.Filter{}, record.Cursor{}, 200)
	extensions := 0
	for step := range 40 {
		cursor := l.Head()
		n := 1 + rng.IntN(5)
		rolledBack := step%7 == 6
		if rolledBack {
			l.rollback(1 + rng.IntN(3))
		}
		l.append(rng, n)
		read := src.pageRecords.Load()
		for name, f := range filters {
			for _, from := range []record.Cursor{{Seq: cursor}, {Snapshot: l.Head()}} {
				if got, want := readAll(t, c, f, from, 200), reference(t, l, f, from); !slices.Equal(got, want) {
					t.Fatalf("step %d, %s from %v:\n got %v\nwant %v", step, name, from, got, want)
				}
			}
		}
		want := int64(n) // the new records alone
		if rolledBack {
			want = int64(n+1) + l.Head() // the new ones bring in a marker: then the whole page
		} else {
			extensions++
		}
		if got := src.pageRecords.Load() - read; got != want {
			t.Fatalf("step %d: the page read %d records, want %d", step, got, want)
		}
		if s := c.Stats(); s.Extensions != int64(extensions) {
			t.Fatalf("step %d: %d extensions, want %d (stats %+v)", step, s.Extensions, extensions, s)
		}
	}
}

// TestHeadPageShared: reads of every record from the page at the head
// share the page's records (two readers get the same ones), capped so that
// an append copies; reads from a page behind the head, or with a filter
// of kinds, get copies.
func TestHeadPageShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	l := &memLog{}
	l.append(rng, 150)
	c := New(l, Config{PageRecords: 100, Encode: encode})
	read := func(f record.Filter, seq int64) Result {
		t.Helper()
		res, err := c.Read(context.Background(), Query{Filter: f, From: record.Cursor{Seq: seq}, Max: 20})
		if err != nil || len(res.Records) == 0 {
			t.Fatalf("read after %d: %d records, %v", seq, len(res.Records), err)
		}
		return res
	}
	a, b := read(record.Filter{}, 120), read(record.Filter{}, 120)
	if &a.Records[0] != &b.Records[0] || cap(a.Records) != len(a.Records) || a.Records[0].Seq != 121 || a.Cursor.Seq != 140 {
		t.Fatalf("at the head: shared %v, len %d cap %d, first %d, cursor %d; want the page's own, capped, 121..140",
			&a.Records[0] == &b.Records[0], len(a.Records), cap(a.Records), a.Records[0].Seq, a.Cursor.Seq)
	}
	if got, want := readAll(t, c, record.Filter{}, record.Cursor{Seq: 120}, 20), reference(t, l, record.Filter{}, record.Cursor{Seq: 120}); !slices.Equal(got, want) {
		t.Fatalf("at the head:\n got %v\nwant %v", got, want)
	}
	if a, b := read(record.Filter{}, 20), read(record.Filter{}, 20); &a.Records[0] == &b.Records[0] {
		t.Fatal("a page behind the head shared")
	}
	kinds := record.Filter{Kinds: []record.Kind{record.KindContractCreated, record.KindInputsApplied, record.KindPayoutWithdrawn}}
	if a, b := read(kinds, 120), read(kinds, 120); &a.Records[0] == &b.Records[0] {
		t.Fatal("a filter of kinds shared")
	}
}
