// Package historytest is the conformance suite of the history storage
// backends (history.Backend). Every backend runs it from a small _test.go:
//
//	func TestConformance(t *testing.T) { historytest.Run(t, openTestBackend) }
//
// where openTestBackend(testing.TB) returns the backend's store.
//
// Its main job is rollback correctness: a chain is applied, rolled back and
// continued on a fork, and the backend's reads are compared with a model of
// what was committed, with history.Filter.Matches as the filter oracle, and
// with a second backend that only ever saw the surviving blocks. Bench
// holds the benchmarks every backend reports.
package historytest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// TestMagic is the network magic the suite initializes backends with.
const TestMagic = 1097911063

// Reopener is implemented by the backends that Open returns when they can
// open a second handle on their database: the init subtests need it.
type Reopener interface {
	// Reopen returns a new, uninitialized handle on the same database.
	Reopen(t *testing.T) history.Backend
	// SchemaVersionSet records version as the schema version, as a newer
	// binary that migrated the database would have.
	SchemaVersionSet(ctx context.Context, version int) error
}

// Migrator is the schema management every backend offers beside
// history.Backend (for the migrate command).
type Migrator interface {
	// Migrate applies pending migrations and returns the versions before and after.
	Migrate(ctx context.Context) (from, to int, err error)
	// SchemaVersion returns the stored schema version and the newest known.
	SchemaVersion(ctx context.Context) (stored, latest int, err error)
}

// Run runs the conformance suite. open returns a backend on a new, empty
// database that nothing has initialized: the suite calls Init and closes
// the backend, and open registers with t.Cleanup whatever else must go (a
// schema, a directory). The backends should implement Migrator and
// Reopener: the init subtests fail without them.
func Run[B history.Backend](t *testing.T, open func(tb testing.TB) B) {
	s := &suite{open: opener(open)}
	t.Run("init", s.testInit)
	t.Run("records", s.testRecords)
	t.Run("contracts", s.testContracts)
	t.Run("filters", s.testFilters)
	t.Run("rollback", s.testRollback)
	t.Run("checkpoint", s.testCheckpoint)
	t.Run("paging", s.testPaging)
	t.Run("large", s.testLarge)
	t.Run("concurrency", s.testConcurrency)
}

type suite struct {
	open func(tb testing.TB) history.Backend
}

// opener is a backend's own opener, whatever the type of the store it
// returns, as the suite's and the benchmarks'.
func opener[B history.Backend](open func(tb testing.TB) B) func(tb testing.TB) history.Backend {
	return func(tb testing.TB) history.Backend { return open(tb) }
}

// backend opens and initializes a backend that is closed when t ends.
func (s *suite) backend(t *testing.T) history.Backend {
	t.Helper()
	b := s.open(t)
	t.Cleanup(func() { _ = b.Close() })
	if err := b.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
		t.Fatalf("init: %v", err)
	}
	return b
}

// readAll pages through a list with the given page size until a short page.
func readAll(t testing.TB, b history.Backend, p record.RecordListParams, page int) []record.Record {
	t.Helper()
	p.Limit = page
	var out []record.Record
	for {
		recs, err := b.RecordList(context.Background(), &p)
		if err != nil {
			t.Fatalf("record list %+v: %v", p, err)
		}
		out = append(out, recs...)
		if len(recs) < page {
			return out
		}
		p.After = recs[len(recs)-1].Seq
	}
}

// recordEqual compares two records field by field, payloads byte for byte.
func recordEqual(a, b *record.Record) bool {
	return sameImmutable(a, b) && ptrEqual(a.RolledBackBy, b.RolledBackBy)
}

// sameImmutable compares what never changes once a record is written.
func sameImmutable(a, b *record.Record) bool {
	return a.Seq == b.Seq && sameContent(a, b)
}

// sameContent compares what a record says, without its seq or rollback.
func sameContent(a, b *record.Record) bool {
	return a.Kind == b.Kind && a.Block == b.Block && a.TxID == b.TxID && a.TxIndex == b.TxIndex &&
		ptrEqual(a.Contract, b.Contract) && bytes.Equal(a.Payload, b.Payload)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// checkRecords fails unless got equals want record for record.
func checkRecords(t testing.TB, what string, got, want []record.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d%s", what, len(got), len(want), firstDiff(got, want))
	}
	for i := range got {
		if !recordEqual(&got[i], &want[i]) {
			t.Fatalf("%s: record %d:\n got %s\nwant %s", what, i, show(&got[i]), show(&want[i]))
		}
	}
}

// firstDiff describes where two record lists part.
func firstDiff(got, want []record.Record) string {
	for i := range min(len(got), len(want)) {
		if !recordEqual(&got[i], &want[i]) {
			return "; first difference at " + show(&got[i]) + " vs " + show(&want[i])
		}
	}
	return ""
}

// seqs returns the seqs of records.
func seqs(rs []record.Record) []int64 {
	out := make([]int64, len(rs))
	for i := range rs {
		out[i] = rs[i].Seq
	}
	return out
}

// wantErr fails unless err wraps target.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

// part is a named subtest of one of the suite's tests.
type part struct {
	name string
	run  func(*testing.T)
}

// runParts runs parts as subtests of t, in order.
func runParts(t *testing.T, parts []part) {
	for _, p := range parts {
		t.Run(p.name, p.run)
	}
}
