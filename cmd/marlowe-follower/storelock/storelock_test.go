package storelock_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/history"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// exerciseLock checks the lock's modes on one store: services share it, a
// reset is refused while any holds it and refuses services while it holds
// it, and a released lock is free again.
func exerciseLock(t *testing.T, st storelock.Store) {
	t.Helper()
	ctx := context.Background()
	service := func() (*storelock.Lock, error) { return storelock.Shared(ctx, st, storelock.Options{}) }
	reset := func() (*storelock.Lock, error) { return storelock.Exclusive(ctx, st) }
	take := func(what string, lock func() (*storelock.Lock, error)) *storelock.Lock {
		t.Helper()
		l, err := lock()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return l
	}
	refuse := func(what string, lock func() (*storelock.Lock, error), want error) {
		t.Helper()
		if _, err := lock(); !errors.Is(err, want) {
			t.Fatalf("%s: %v, want %v", what, err, want)
		}
	}
	release := func(what string, l *storelock.Lock) {
		t.Helper()
		if err := l.Release(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	a := take("a service", service)
	b := take("a second service", service)
	refuse("reset beside two services", reset, storelock.ErrInUse)
	release("releasing a service", a)
	release("a second Release", a)
	refuse("reset beside one service", reset, storelock.ErrInUse)
	release("releasing the other service", b)
	x := take("reset with no service", reset)
	refuse("a service during a reset", service, storelock.ErrResetRunning)
	refuse("two resets", reset, storelock.ErrInUse)
	release("releasing the reset", x)
	_ = take("a service after the reset", service).Release()
}

func TestDataDirLock(t *testing.T) {
	dir := t.TempDir() + "/data" // created by the lock
	exerciseLock(t, storelock.Store{DataDir: dir})
	if _, err := os.Stat(dir + "/" + storelock.FileName); err != nil {
		t.Fatal(err)
	}
	// Another directory is another store.
	a, err := storelock.Shared(context.Background(), storelock.Store{DataDir: dir}, storelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release() //nolint:errcheck // test
	x, err := storelock.Exclusive(context.Background(), storelock.Store{DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("another directory: %v", err)
	}
	_ = x.Release()
}

// testURL returns the test database's URL with search_path set to schema.
func testURL(t *testing.T, schema string) string {
	t.Helper()
	base := storagetest.DatabaseURL(t)
	return storagetest.SchemaURL(t, base, schema)
}

func TestPostgresLock(t *testing.T) {
	schema := "storelock_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := storelock.Store{DatabaseURL: testURL(t, schema)}
	exerciseLock(t, st)
	// Another schema is another store.
	a, err := storelock.Shared(context.Background(), st, storelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release() //nolint:errcheck // test
	x, err := storelock.Exclusive(context.Background(), storelock.Store{DatabaseURL: testURL(t, schema+"_other")})
	if err != nil {
		t.Fatalf("another schema: %v", err)
	}
	_ = x.Release()
}

// TestPostgresLockSurvivesLostSession ends the session holding a service's
// lock (as a server restart does): the lock's keeper connects again and
// takes it again, so that reset is refused again.
func TestPostgresLockSurvivesLostSession(t *testing.T) {
	ctx := context.Background()
	schema := "storelock_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := storelock.Store{DatabaseURL: testURL(t, schema)}
	l, err := storelock.Shared(ctx, st, storelock.Options{CheckPeriod: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release() //nolint:errcheck // test
	admin, err := pgx.Connect(ctx, os.Getenv("MARLOWE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	pid := lockSession(t, admin, schema)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	// Either the reset finds the lock taken again, or it came in between
	// and the keeper then waits for it; in both cases the keeper ends up
	// holding the lock once the reset lets go.
	for {
		x, err := storelock.Exclusive(ctx, st)
		if errors.Is(err, storelock.ErrInUse) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = x.Release()
	}
}

// lockSession returns the backend pid of the session holding schema's
// shared lock.
func lockSession(t *testing.T, admin *pgx.Conn, schema string) int {
	t.Helper()
	var pid int
	err := admin.QueryRow(context.Background(), `SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND a.application_name = 'marlowe-follower store lock'
		AND l.granted AND l.mode = 'ShareLock'
		AND ((l.classid::bigint << 32) | l.objid::bigint) = (hashtextextended($1, 0) & x'ffffffffffffffff'::bigint)`,
		"marlowe-follower/in-use/"+schema).Scan(&pid)
	if err != nil {
		t.Fatalf("finding the lock's session: %v", err)
	}
	return pid
}

// TestPostgresReleaseAfterLostSession: releasing a lock whose session was
// cut (a proxy, a server restart) is not an error: the service's shutdown
// must not fail for it.
func TestPostgresReleaseAfterLostSession(t *testing.T) {
	ctx := context.Background()
	schema := "storelock_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := storelock.Store{DatabaseURL: testURL(t, schema)}
	l, err := storelock.Shared(ctx, st, storelock.Options{CheckPeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, os.Getenv("MARLOWE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 5000)`, lockSession(t, admin, schema)); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	x, err := storelock.Exclusive(ctx, st)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	_ = x.Release()
}

// TestWriterFile: one writer per data directory. A second WriterFile on
// the directory fails with history.ErrAnotherWriter naming it while the
// first holds it, the in-use lock is another lock (a reset is still
// refused, services still share it), and a released writer lock is free.
func TestWriterFile(t *testing.T) {
	dir := t.TempDir() + "/data" // created by the lock
	a, err := storelock.WriterFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = storelock.WriterFile(dir)
	if !errors.Is(err, history.ErrAnotherWriter) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), storelock.WriterFileName) {
		t.Fatalf("a second writer: %v", err)
	}
	other, err := storelock.WriterFile(t.TempDir())
	if err != nil {
		t.Fatalf("another directory: %v", err)
	}
	_ = other.Release()
	exerciseLock(t, storelock.Store{DataDir: dir})
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	b, err := storelock.WriterFile(dir)
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	_ = b.Release()
}
