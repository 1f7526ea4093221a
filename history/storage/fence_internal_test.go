package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// The tests of this file check what a process that lost the writer lease
// says about who took it, when the read of the lease row that names the
// taker is slow or fails (takerReadHook): a flake of TestHungWriterPartitioned
// at load 30, whose hung writer's last line did not name the standby.

// fenceSchema makes a schema holding the writer's epoch and lease tables,
// as the history line's migrations make them (read from their files: this
// package cannot import pgstore), and returns an admin connection on it and
// the schema's name.
func fenceSchema(t *testing.T) (*pgx.Conn, string, string) {
	t.Helper()
	base := storagetest.PostgresURL(t)
	schema := storagetest.CreateSchema(t, base, "fence")
	url := storagetest.SchemaURL(t, base, schema)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	for _, f := range []string{"0002_writer_epoch.sql", "0003_writer_lease.sql", "0004_writer_lease_session.sql"} {
		b, err := os.ReadFile(filepath.Join("..", "pgstore", "migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.Exec(ctx, string(b)); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return admin, base, schema
}

// leaseHolder opens a pool on schema and takes the writer lease on it as
// holder, with ttl (an hour when 0: no renewal runs during the test).
func leaseHolder(t *testing.T, base, schema, holder string, ttl time.Duration) (*Postgres, *Lease) {
	t.Helper()
	ctx := context.Background()
	p, err := OpenPostgres(ctx, base, PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if ttl == 0 {
		ttl = time.Hour
	}
	l, err := p.NewLease(LeaseOptions{TTL: ttl, Holder: holder, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release() })
	return p, l
}

// takeOver does, on admin, what another process's takeover does to the
// rows (tryAcquire: the epoch incremented, the lease row naming it, in one
// transaction), without the rest of a lease, so that the holder's lease
// connection and its renewals are left alone. The transaction stays open,
// the epoch row locked, until commit is called.
func takeOver(t *testing.T, admin *pgx.Conn, by string) (epoch int64, commit func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, takeEpochSQL).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE writer_lease SET holder = $1, epoch = $2, renewed_at = clock_timestamp(),
		expires_at = clock_timestamp() + interval '1 hour' WHERE id = 1`, by, epoch); err != nil {
		t.Fatal(err)
	}
	return epoch, func() {
		t.Helper()
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// hookFailure is the error of a read failTakerReads fails.
const hookFailure = "test hook: context deadline exceeded"

// failTakerReads makes the first n reads of who took the lease fail (all
// of them when n < 0), as a read cut short by its deadline does; it
// returns the count of reads tried.
func failTakerReads(t *testing.T, n int) *atomic.Int32 {
	t.Helper()
	var calls atomic.Int32
	takerReadHook = func() error {
		if c := calls.Add(1); n < 0 || int(c) <= n {
			return fmt.Errorf("%s (read %d)", hookFailure, c)
		}
		return nil
	}
	t.Cleanup(func() { takerReadHook = nil })
	return &calls
}

// checkBoth runs CheckEpoch in a pgx transaction on p's pool and
// CheckEpochSQL in a database/sql one, and returns their errors.
func checkBoth(t *testing.T, p *Postgres) (pgxErr, sqlErr error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pgxErr = p.CheckEpoch(ctx, tx)
	_ = tx.Rollback(ctx)
	stx, err := p.SQL.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	sqlErr = p.CheckEpochSQL(ctx, stx)
	if rerr := stx.Rollback(); rerr != nil && !errors.Is(rerr, sql.ErrTxDone) {
		t.Fatal(rerr)
	}
	return pgxErr, sqlErr
}

// namesTaker fails the test unless err is the refusal of a fenced write
// naming by, who took the lease at epoch, from mine.
func namesTaker(t *testing.T, what string, err error, by string, epoch, mine int64) {
	t.Helper()
	want := fmt.Sprintf("%s: %s took the writer lease (epoch %d; this process's was %d)", record.ErrFenced, by, epoch, mine)
	if !errors.Is(err, record.ErrFenced) || err.Error() != want {
		t.Errorf("%s: %v\nwant %s", what, err, want)
	}
}

// TestFencedNamesTheTakerWhenItsReadFails: a write of a process whose
// lease another took is refused naming the taker, although the first read
// of the lease row would fail (a read that timed out, on a loaded machine):
// the check reads the epoch and the holder in one statement, so the answer
// that says this process is fenced says by whom.
func TestFencedNamesTheTakerWhenItsReadFails(t *testing.T) {
	admin, base, schema := fenceSchema(t)
	a, la := leaseHolder(t, base, schema, "a", 0)
	if h, s := checkBoth(t, a); h != nil || s != nil {
		t.Fatalf("the holder's checks: %v, %v", h, s)
	}
	epoch, commit := takeOver(t, admin, "b")
	commit()
	calls := failTakerReads(t, 1)
	h, s := checkBoth(t, a)
	namesTaker(t, "the fenced pgx check", h, "b", epoch, la.Epoch())
	namesTaker(t, "the fenced database/sql check", s, "b", epoch, la.Epoch())
	if n := calls.Load(); n != 0 {
		t.Errorf("the taker was read %d times after the checks, want 0: their answer names it", n)
	}
}

// TestFencedDuringTheTakeover: the check of a write that waits for the
// epoch row while the takeover's transaction holds it (the old holder
// writing at the moment the standby takes over) reads the epoch the
// takeover committed, and a lease row of before it (its statement's
// snapshot): it reads the row again, past a read that fails, and names the
// taker, not itself.
func TestFencedDuringTheTakeover(t *testing.T) {
	for _, driver := range []string{"pgx", "database/sql"} {
		t.Run(strings.ReplaceAll(driver, "/", "_"), func(t *testing.T) {
			admin, base, schema := fenceSchema(t)
			a, la := leaseHolder(t, base, schema, "a", 0)
			epoch, commit := takeOver(t, admin, "b")
			calls := failTakerReads(t, 1)
			err := checkBlockedByTakeover(t, a, driver, commit)
			namesTaker(t, "the check across the takeover", err, "b", epoch, la.Epoch())
			if n := calls.Load(); n != 2 {
				t.Errorf("the taker was read %d times, want 2 (one failed, one named it)", n)
			}
		})
	}
}

// TestFencedWhenTheTakerCannotBeRead: when no read of the lease row
// answers, the refusal still says this process lost the lease, its epoch
// and the stored one, and why it cannot name the taker.
func TestFencedWhenTheTakerCannotBeRead(t *testing.T) {
	admin, base, schema := fenceSchema(t)
	a, la := leaseHolder(t, base, schema, "a", 0)
	epoch, commit := takeOver(t, admin, "b")
	calls := failTakerReads(t, -1)
	err := checkBlockedByTakeover(t, a, "pgx", commit)
	want := fmt.Sprintf("%s (writer epoch %d, the stored one is %d; who took it could not be read: ", record.ErrFenced, la.Epoch(), epoch)
	if !errors.Is(err, record.ErrFenced) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), hookFailure) {
		t.Errorf("the check: %v\nwant %s... wrapping the read's error", err, want)
	}
	if n := calls.Load(); n != takerReadAttempts {
		t.Errorf("the taker was read %d times, want %d", n, takerReadAttempts)
	}
}

// checkBlockedByTakeover runs p's epoch check (driver's: "pgx" or
// "database/sql") while the takeover's transaction on admin holds the
// epoch row, commits the takeover once the check waits for the row, and
// returns the check's error.
func checkBlockedByTakeover(t *testing.T, p *Postgres, driver string, commit func()) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pid int32
	done := make(chan error, 1)
	switch driver {
	case "pgx":
		conn, err := p.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		go func() { done <- p.CheckEpoch(ctx, tx) }()
	default:
		conn, err := p.SQL.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		go func() { done <- p.CheckEpochSQL(ctx, tx) }()
	}
	waitfor.Until(t, 30*time.Second, "the check waiting for the epoch row", func() bool {
		var waiting bool
		if err := p.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`, pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting
	})
	commit()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("the check did not end after the takeover committed")
		return nil
	}
}

// TestLostLeaseNamesTheTakerWhenItsReadFails: the renewal that finds the
// lease taken names the taker in the lease's error (the line a holder
// exits with), although the first read of who took it fails.
func TestLostLeaseNamesTheTakerWhenItsReadFails(t *testing.T) {
	admin, base, schema := fenceSchema(t)
	calls := failTakerReads(t, 1)
	_, la := leaseHolder(t, base, schema, "a", 900*time.Millisecond)
	epoch, commit := takeOver(t, admin, "b")
	commit()
	lost(t, la)
	want := fmt.Sprintf("%s: b took the writer lease (epoch %d; this process's was %d)", record.ErrFenced, epoch, la.Epoch())
	if err := la.Err(); !errors.Is(err, ErrLeaseLost) || err.Error() != want {
		t.Errorf("the lost lease's error: %v\nwant %s", err, want)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the taker was read %d times, want 2 (one failed, one named it)", n)
	}
}

// TestLostLeaseWhenTheTakerCannotBeRead: when no read of who took the
// lease answers, the lost lease's error says so, and why.
func TestLostLeaseWhenTheTakerCannotBeRead(t *testing.T) {
	admin, base, schema := fenceSchema(t)
	calls := failTakerReads(t, -1)
	_, la := leaseHolder(t, base, schema, "a", 900*time.Millisecond)
	_, commit := takeOver(t, admin, "b")
	commit()
	lost(t, la)
	want := fmt.Sprintf("%s: another process took the writer lease (this process's epoch was %d; who took it could not be read: ", record.ErrFenced, la.Epoch())
	if err := la.Err(); !errors.Is(err, ErrLeaseLost) || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), hookFailure) {
		t.Errorf("the lost lease's error: %v\nwant %s... wrapping the read's error", err, want)
	}
	if n := calls.Load(); n != takerReadAttempts {
		t.Errorf("the taker was read %d times, want %d", n, takerReadAttempts)
	}
}

// lost waits for l's renewals to find the lease taken.
func lost(t *testing.T, l *Lease) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the holder's renewals did not find the lease taken within a minute")
	}
}
