package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/history/storage"
)

// The writer lease's session lock: a standby takes the lease as soon as
// the holder's session has ended, before the expiry; a holder whose
// session lives on (hung) is taken over only once the lease has expired.
// The TTLs here are an hour wherever only the session can explain a
// takeover.

// waitingForSessionLock reports whether a session waits for the writer
// lease's session lock of ts's schema: a standby blocked on the holder's
// session.
func waitingForSessionLock(t *testing.T, p *fencedProcess, ts *testStore) func() bool {
	key := uint64(storage.LeaseLockKey(ts.schema))
	return func() bool {
		var n int
		err := p.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1`, int64(key>>32), int64(key&0xffffffff)).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
}

// namesItsSession checks that the stored lease names l's session, of its
// epoch, and that l holds the session lock; it returns the session's pid.
func namesItsSession(t *testing.T, reader *fencedProcess, l *storage.Lease) int32 {
	t.Helper()
	row, err := storage.ReadLease(context.Background(), reader.pg.Pool)
	if err != nil || row.Holder != l.Holder() || row.Epoch != l.Epoch() || !row.Watched() || row.SessionEnded || !l.SessionLocked() {
		t.Fatalf("the stored lease %+v (%v); %s's session lock held %v", row, err, l.Holder(), l.SessionLocked())
	}
	return row.SessionPID
}

// endSession ends the server session of pid, as an administrator, a
// server's restart or a network reset do.
func endSession(t *testing.T, p *fencedProcess, pid int32) {
	t.Helper()
	var ok bool
	if err := p.pg.Pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("ending session %d: %v %v", pid, ok, err)
	}
}

// acquireAsync starts taking the lease on p's pool as a standby.
func acquireAsync(t *testing.T, p *fencedProcess, opts storage.LeaseOptions) <-chan *storage.Lease {
	t.Helper()
	took := make(chan *storage.Lease, 1)
	go func() {
		l, err := acquireLease(context.Background(), p.pg, opts)
		if err != nil {
			t.Errorf("the standby: %v", err)
		} else {
			t.Cleanup(func() { _ = l.Release() })
		}
		took <- l
	}()
	return took
}

func took(t *testing.T, standby <-chan *storage.Lease, what string) *storage.Lease {
	t.Helper()
	select {
	case l := <-standby:
		if l == nil {
			t.FailNow()
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("the standby did not take the lease: %s", what)
		return nil
	}
}

// TestWriterLeaseHolderGone: the holder's process dies (here every
// connection it has is cut and it can connect no more, as when it is
// killed: the server ends its sessions). A reader sees at once that nobody
// writes, although the lease runs for an hour; a standby that comes takes
// it at once, with the next epoch, and names its own session.
func TestWriterLeaseHolderGone(t *testing.T) {
	_, a, proxy, b, reader := openTakeover(t)
	ctx := context.Background()
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: time.Hour, Holder: "a"})
	if la.Takeover() != storage.TakeoverNew {
		t.Fatalf("the first lease was taken as %q", la.Takeover())
	}
	namesItsSession(t, reader, la)
	if err := a.commitTip(1); err != nil {
		t.Fatal(err)
	}

	_ = proxy.Close()
	waitFor(t, 30*time.Second, "the reader seeing the holder's session ended", func() bool {
		row, err := storage.ReadLease(ctx, reader.pg.Pool)
		return err == nil && row.SessionEnded
	})
	row, _ := storage.ReadLease(ctx, reader.pg.Pool)
	if v := (storage.LeaseView{Row: row, ReadAt: time.Now()}); row.Expired() || !v.NoWriter(time.Now()) {
		t.Fatalf("the lease of a holder that is gone: %+v, expired %v, no writer %v", row, row.Expired(), v.NoWriter(time.Now()))
	}

	lb := took(t, acquireAsync(t, b, storage.LeaseOptions{TTL: time.Hour, Holder: "b"}), "the holder is gone")
	if lb.Takeover() != storage.TakeoverSessionEnded || lb.Epoch() != la.Epoch()+1 || !lb.Row().AcquiredAt.Before(la.Row().ExpiresAt) {
		t.Fatalf("the standby took epoch %d (%q) at %s; the lease of epoch %d ran until %s",
			lb.Epoch(), lb.Takeover(), lb.Row().AcquiredAt, la.Epoch(), la.Row().ExpiresAt)
	}
	namesItsSession(t, reader, lb)
	if err := a.commitTip(2); err == nil {
		t.Fatal("the holder that is gone committed")
	}
	if err := b.commitTip(2); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
}

// TestWriterLeaseSessionDropped: the holder's lease connection ends while
// the process lives, and a standby waits for the holder's session. The
// standby is woken at once and takes the lease with the next epoch,
// although it runs for an hour; the old holder sees its connection end,
// reconnects, finds the lease taken (Lost, naming the new holder) and
// commits nothing from then on.
func TestWriterLeaseSessionDropped(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, b, reader := openProcess(t, ts), openProcess(t, ts), openProcess(t, ts)
	ctx := context.Background()
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: time.Hour, Holder: "a"})
	pid := namesItsSession(t, reader, la)
	if err := a.commitTip(1); err != nil {
		t.Fatal(err)
	}
	standby := acquireAsync(t, b, storage.LeaseOptions{TTL: time.Hour, Holder: "b"})
	waitFor(t, 30*time.Second, "the standby waiting for the holder's session", waitingForSessionLock(t, reader, ts))

	endSession(t, reader, pid)
	lb := took(t, standby, "the holder's session ended")
	if lb.Takeover() != storage.TakeoverSessionEnded || lb.Epoch() != la.Epoch()+1 || !lb.Row().AcquiredAt.Before(la.Row().ExpiresAt) {
		t.Fatalf("the standby took epoch %d (%q) at %s; the lease of epoch %d ran until %s",
			lb.Epoch(), lb.Takeover(), lb.Row().AcquiredAt, la.Epoch(), la.Row().ExpiresAt)
	}
	namesItsSession(t, reader, lb)
	handedOver(t, la, a, b, reader, 3)
}

// TestWriterLeaseSessionRenewed: the holder's lease connection ends while
// the process lives and nobody waits: it reconnects at once, takes the
// session lock again and names its new session; it keeps the lease and
// commits.
func TestWriterLeaseSessionRenewed(t *testing.T) {
	ts := openTest(t)
	t.Cleanup(func() { _ = ts.Close() })
	a, reader := openProcess(t, ts), openProcess(t, ts)
	ctx := context.Background()
	la := a.acquire(t, ctx, storage.LeaseOptions{TTL: time.Hour, Holder: "a"})
	pid := namesItsSession(t, reader, la)
	renewals := la.Renewals()
	endSession(t, reader, pid)
	waitFor(t, 30*time.Second, "the holder's new session named", func() bool {
		row, err := storage.ReadLease(ctx, reader.pg.Pool)
		return err == nil && row.Watched() && row.SessionPID != pid && !row.SessionEnded
	})
	namesItsSession(t, reader, la)
	if la.Err() != nil || !la.Valid() || la.Renewals() != renewals+1 {
		t.Fatalf("the holder after its session ended: lost %v, valid %v, %d renewals (%d before)", la.Err(), la.Valid(), la.Renewals(), renewals)
	}
	if err := a.commitTip(1); err != nil {
		t.Fatalf("the holder's commit in its new session: %v", err)
	}
}
