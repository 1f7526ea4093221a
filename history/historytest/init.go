package historytest

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// testInit checks schema setup: migrations are idempotent, a reopened
// database keeps its data, another network and a newer schema are refused.
func (s *suite) testInit(t *testing.T) {
	runParts(t, []part{
		{"fresh", s.testInitFresh},
		{"idempotent", s.testInitIdempotent},
		{"reopen", s.testInitReopen},
		{"wrong network", s.testInitWrongNetwork},
		{"schema too new", s.testInitSchemaTooNew},
	})
}

// testInitFresh: Init on an empty database makes the schema and an empty log.
func (s *suite) testInitFresh(t *testing.T) {
	b := s.open(t)
	t.Cleanup(func() { _ = b.Close() })
	m := migrator(t, b)
	stored, latest, err := m.SchemaVersion(t.Context())
	if err != nil || stored != 0 || latest < 1 {
		t.Fatalf("schema version of an empty database: %d, %d, %v; want 0, >= 1, nil", stored, latest, err)
	}
	from, to, err := m.Migrate(t.Context())
	if err != nil || from != 0 || to != latest {
		t.Fatalf("migrate: %d -> %d, %v; want 0 -> %d", from, to, err, latest)
	}
	if from, to, err = m.Migrate(t.Context()); err != nil || from != latest || to != latest {
		t.Fatalf("migrate again: %d -> %d, %v; want %d -> %d", from, to, err, latest, latest)
	}
	if err := b.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
		t.Fatalf("init after migrate: %v", err)
	}
	cp, err := b.CheckpointGet(t.Context())
	if err != nil {
		t.Fatalf("checkpoint of an empty store: %v", err)
	}
	if !reflect.DeepEqual(cp, &history.Checkpoint{}) {
		t.Fatalf("checkpoint of an empty store: %+v", cp)
	}
	if head, err := b.Head(t.Context()); err != nil || head != 0 {
		t.Fatalf("head of an empty store: %d, %v", head, err)
	}
}

// testInitIdempotent: Init again changes nothing.
func (s *suite) testInitIdempotent(t *testing.T) {
	b := s.backend(t)
	for i := range 3 {
		if err := b.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
			t.Fatalf("init #%d: %v", i+2, err)
		}
	}
	stored, latest, err := migrator(t, b).SchemaVersion(t.Context())
	if err != nil || stored != latest {
		t.Fatalf("schema version %d of %d, %v", stored, latest, err)
	}
}

// testInitReopen: a backend opened again on the same database reads what was
// committed.
func (s *suite) testInitReopen(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 1, 0)
	w.play(20, 0, -3, 5, 0)
	b2 := reopen(t, b)
	if err := b2.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
		t.Fatalf("init of the reopened database: %v", err)
	}
	checkRecords(t, "log after reopening", readAll(t, b2, record.RecordListParams{}, 1000), w.log)
	checkCheckpoint(t, b2, w.checkpoint())
	// The first handle still works beside the second.
	w.extend(3)
	checkRecords(t, "log through the second handle", readAll(t, b2, record.RecordListParams{}, 1000), w.log)
}

// testInitWrongNetwork: a database filled from another network is refused.
func (s *suite) testInitWrongNetwork(t *testing.T) {
	b := s.backend(t)
	b2 := reopen(t, b)
	err := b2.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic + 1})
	wantErr(t, "init with another network", err, record.ErrWrongNetwork)
	if err := b2.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}); err != nil {
		t.Fatalf("init with the right network after a refusal: %v", err)
	}
}

// testInitSchemaTooNew: a schema newer than the binary is refused.
func (s *suite) testInitSchemaTooNew(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 2, 0)
	w.extend(5)
	_, latest, err := migrator(t, b).SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, ok := b.(Reopener)
	if !ok {
		t.Fatalf("%T does not implement historytest.Reopener", b)
	}
	if err := r.SchemaVersionSet(t.Context(), latest+1); err != nil {
		t.Fatalf("simulating a newer schema: %v", err)
	}
	b2 := reopen(t, b)
	stored, _, err := migrator(t, b2).SchemaVersion(t.Context())
	if err != nil || stored != latest+1 {
		t.Fatalf("schema version after the newer binary: %d, %v; want %d", stored, err, latest+1)
	}
	wantErr(t, "init of a newer schema", b2.Init(t.Context(), &history.InitParams{NetworkMagic: TestMagic}),
		record.ErrSchemaTooNew)
	_, _, err = migrator(t, b2).Migrate(t.Context())
	wantErr(t, "migrate of a newer schema", err, record.ErrSchemaTooNew)
	// The refusal changed nothing.
	checkRecords(t, "log after the refusal", readAll(t, b2, record.RecordListParams{}, 1000), w.log)
}

// migrator returns the backend's schema management or fails.
func migrator(t *testing.T, b history.Backend) Migrator {
	t.Helper()
	m, ok := b.(Migrator)
	if !ok {
		t.Fatalf("%T does not implement historytest.Migrator", b)
	}
	return m
}

// reopen returns a second handle on b's database, closed when t ends.
func reopen(t *testing.T, b history.Backend) history.Backend {
	t.Helper()
	r, ok := b.(Reopener)
	if !ok {
		t.Fatalf("%T does not implement historytest.Reopener", b)
	}
	b2 := r.Reopen(t)
	t.Cleanup(func() { _ = b2.Close() })
	return b2
}

// checkCheckpoint fails unless the backend's checkpoint equals want.
func checkCheckpoint(t testing.TB, b history.Backend, want *history.Checkpoint) {
	t.Helper()
	got, err := b.CheckpointGet(t.Context())
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if got.Head != want.Head || got.Tip != want.Tip || got.Horizon != want.Horizon {
		t.Fatalf("checkpoint: head %d tip %+v horizon %+v, want %d %+v %+v",
			got.Head, got.Tip, got.Horizon, want.Head, want.Tip, want.Horizon)
	}
	if !reflect.DeepEqual(got.Breadcrumbs, want.Breadcrumbs) {
		t.Fatalf("checkpoint breadcrumbs:\n got %v\nwant %v", got.Breadcrumbs, want.Breadcrumbs)
	}
	if err := utxosEqual(got.UTxOs, want.UTxOs); err != nil {
		t.Fatalf("checkpoint UTxOs: %v", err)
	}
	if len(got.Recent) != len(want.Recent) {
		t.Fatalf("checkpoint: %d recent changes, want %d", len(got.Recent), len(want.Recent))
	}
	for i := range got.Recent {
		g, w := got.Recent[i], want.Recent[i]
		if err := utxosEqual(g.Added, w.Added); g.Block != w.Block || err != nil {
			t.Fatalf("checkpoint recent %d (block %+v, want %+v): added: %v", i, g.Block, w.Block, err)
		}
		if err := utxosEqual(g.Removed, w.Removed); err != nil {
			t.Fatalf("checkpoint recent %d: removed: %v", i, err)
		}
	}
}

// utxosEqual compares two lists of tracked outputs.
func utxosEqual(got, want []classify.TrackedUTxO) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	for i := range got {
		if !utxoEqual(got[i], want[i]) {
			return fmt.Errorf("output %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	return nil
}
