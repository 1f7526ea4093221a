package storelock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
)

// TestWriterLock: one writer at a time per schema. A second waits (its
// Waiting hook runs) and gets the lock the moment the first lets it go;
// services' in-use locks do not conflict with it, and reset stays refused
// while a writer or a waiting standby holds the in-use lock. Another schema
// has a writer lock of its own. Ending the holder's session (as a cut
// connection does) closes Lost with ErrWriterLockLost and frees the lock,
// unless Retaken lets it take the lock again.
func TestWriterLock(t *testing.T) {
	ctx := context.Background()
	schema := "writerlock_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	url := testURL(t, schema)
	st := storelock.Store{DatabaseURL: url}
	inUse, err := storelock.Shared(ctx, st, storelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inUse.Release() //nolint:errcheck // test
	look, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer look.Close(ctx) //nolint:errcheck // test
	held := func(want bool) {
		t.Helper()
		if got, err := storelock.WriterHeld(ctx, look); err != nil || got != want {
			t.Fatalf("WriterHeld: %v, %v; want %v", got, err, want)
		}
	}
	held(false) // the in-use lock is not the writer lock
	a, err := storelock.Writer(ctx, url, storelock.WriterOptions{Waiting: func() { t.Error("the first writer waited") }})
	if err != nil {
		t.Fatal(err)
	}
	held(true)
	if _, err := storelock.Exclusive(ctx, st); !errors.Is(err, storelock.ErrInUse) {
		t.Fatalf("reset beside a writer: %v", err)
	}
	other, err := storelock.Writer(ctx, testURL(t, schema+"_other"), storelock.WriterOptions{})
	if err != nil {
		t.Fatalf("another schema's writer: %v", err)
	}
	_ = other.Release()

	waiting := make(chan struct{})
	got := make(chan *storelock.WriterLock, 1)
	go func() {
		b, err := storelock.Writer(ctx, url, storelock.WriterOptions{Ping: 20 * time.Millisecond, Waiting: func() { close(waiting) }})
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	select {
	case <-waiting:
	case <-time.After(time.Minute):
		t.Fatal("the second writer neither waits nor holds the lock")
	}
	select {
	case <-got:
		t.Fatal("the second writer took the held lock")
	default:
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	var b *storelock.WriterLock
	select {
	case b = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the second writer did not take the released lock")
	}
	if b == nil {
		t.FailNow()
	}
	admin, err := pgx.Connect(ctx, os.Getenv("MARLOWE_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var app string
	if err := admin.QueryRow(ctx, `SELECT application_name FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ExclusiveLock' AND l.pid = $1`, int(b.SessionPID())).Scan(&app); err != nil ||
		app != storelock.WriterApplicationName {
		t.Fatalf("the holder's session %d: %q %v", b.SessionPID(), app, err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int(b.SessionPID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Lost():
	case <-time.After(time.Minute):
		t.Fatal("the lost session went unnoticed")
	}
	if !errors.Is(b.Err(), storelock.ErrWriterLockLost) {
		t.Fatalf("Err: %v", b.Err())
	}
	_ = b.Release()
	held(false)
	o, err := storelock.Writer(ctx, testURL(t, schema+"_other"), storelock.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held(false) // another schema's writer lock is not this store's
	_ = o.Release()

	// With Retaken, a failed session's lock is taken again on a new one
	// while Retaken agrees, and lost once it refuses.
	var asked atomic.Int32
	e, err := storelock.Writer(ctx, url, storelock.WriterOptions{Ping: 20 * time.Millisecond, Retry: 20 * time.Millisecond,
		Retaken: func(context.Context) error {
			if asked.Add(1) == 1 {
				return nil
			}
			return fmt.Errorf("epoch 2, stored 3: %w", storelock.ErrFenced)
		}})
	if err != nil {
		t.Fatal(err)
	}
	first := e.SessionPID()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int(first)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); e.SessionPID() == first || !e.Held(); {
		if time.Now().After(deadline) {
			t.Fatal("the lock was not taken again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-e.Lost():
		t.Fatalf("lost although Retaken agreed: %v", e.Err())
	default:
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, int(e.SessionPID())); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Lost():
	case <-time.After(time.Minute):
		t.Fatal("Retaken refused, yet the lock is not lost")
	}
	if !errors.Is(e.Err(), storelock.ErrWriterLockLost) || !strings.Contains(e.Err().Error(), "another process wrote meanwhile") || e.Held() {
		t.Fatalf("Err: %v, held %v", e.Err(), e.Held())
	}
	_ = e.Release()

	c, err := storelock.Writer(ctx, url, storelock.WriterOptions{Waiting: func() { t.Error("the lost lock is still held") }})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Release()
	// A waiting writer gives up when its context ends.
	d, err := storelock.Writer(ctx, url, storelock.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release() //nolint:errcheck // test
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := storelock.Writer(short, url, storelock.WriterOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a waiting writer whose context ended: %v", err)
	}
}
