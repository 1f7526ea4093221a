package sqlcontracts_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/contractstoretest"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history/storage"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformanceSQLite(t *testing.T) {
	contractstoretest.Run(t, func(t *testing.T) contractstore.Backend {
		return contractstoretest.OpenSQLite(t, t.TempDir())
	})
}

func TestOwnFileAndSchemaVersion(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := openAndInit(t, db, 1)
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, sqlcontracts.FileName)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.HeadGet(ctx); !errors.Is(err, contractstore.ErrClosed) {
		t.Fatalf("a read after Close: %v", err)
	}
}

// openAndInit opens the store on a new database db, which it owns, and
// checks its schema versions before and after inits concurrent Inits: none
// stored, then the latest.
func openAndInit(t *testing.T, db storage.DB, inits int) *sqlcontracts.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlcontracts.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if stored, latest, err := s.SchemaVersion(ctx); err != nil || stored != 0 || latest < 1 {
		t.Fatalf("before Init: %d %d %v", stored, latest, err)
	}
	errs := make(chan error, inits)
	for range inits {
		go func() { errs <- s.Init(ctx) }()
	}
	for range inits {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if stored, latest, err := s.SchemaVersion(ctx); err != nil || stored != latest {
		t.Fatalf("after Init: %d %d %v", stored, latest, err)
	}
	return s
}

// BenchmarkLists: pages of each contract filter over 20,000 contracts.
//
//	go test -run '^$' -bench BenchmarkLists ./contracts/contractstore/sqlcontracts/
func BenchmarkListsSQLite(b *testing.B) {
	store := contractstoretest.OpenSQLite(b, b.TempDir())
	defer store.Close()
	contractstoretest.BenchmarkLists(b, store, 20000, nil, store.(*sqlcontracts.Store).Counts.Forget)
}
