package storage

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// The writer lease's session lock: the fast way to see that a holder is
// gone. The expiry alone makes a standby wait out the TTL after a holder
// died, as it must after one that hangs. So the holder also holds a
// session advisory lock (LeaseLockKey) on its lease connection, and names
// that session in the row (session_pid, for its epoch: session_epoch;
// migration 0004). A standby waits for that lock (pg_advisory_lock with a
// lock_timeout at the lease's expiry): the server grants it the moment the
// holder's session ends (its process killed, its connection lost), and a
// standby that holds the lock while the row names a session of the current
// epoch knows that session is gone, and takes the lease at once. A hung
// holder keeps its session, so for it the expiry still decides; taking the
// lease after the expiry ends the session that still holds the lock
// (claimSession), so that the lock follows the lease.
//
// Safety does not rest on this: the epoch fences every commit, so a holder
// that lost its session but lives commits nothing once a standby took the
// lease; it reconnects at once, finds the epoch taken and leaves (Lost).
// The lock is only trusted on a connection that is the server's own
// session: behind a pooling proxy (its backend key is not the server
// process's, see connect) a process neither takes nor watches it, and the
// expiry decides.

// LeaseLockKey is the key of the writer lease's session lock of the stores
// in schema (pg_locks: locktype advisory, classid its high 32 bits, objid
// its low 32 bits, objsubid 1).
func LeaseLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("marlowe-follower/writer-lease/" + schema))
	return int64(h.Sum64())
}

// How a lease was taken (Lease.Takeover).
const (
	TakeoverNew          = "never held"
	TakeoverReleased     = "let go"
	TakeoverExpired      = "expired"
	TakeoverSessionEnded = "the holder's session ended"
)

// lockSession tries the session lock on q (the lease's connection, or a
// transaction on it) without waiting.
func (l *Lease) lockSession(ctx context.Context, q Querier) error {
	ok, err := l.advisory(ctx, q, "pg_try_advisory_lock", "taking the writer lease's session lock")
	if err != nil {
		return err
	}
	l.locked.Store(ok)
	return nil
}

// unlockSession lets the session lock go (a standby that took it but
// found that it may not take the lease).
func (l *Lease) unlockSession(ctx context.Context, q Querier) error {
	if _, err := l.advisory(ctx, q, "pg_advisory_unlock", "letting the writer lease's session lock go"); err != nil {
		return err
	}
	l.locked.Store(false)
	return nil
}

// advisory calls fn, one of PostgreSQL's advisory lock functions, on the
// lease's key, and returns its answer; doing names the call in its error.
func (l *Lease) advisory(ctx context.Context, q Querier, fn, doing string) (bool, error) {
	var ok bool
	if err := q.QueryRow(ctx, `SELECT `+fn+`($1)`, l.key).Scan(&ok); err != nil {
		return false, fmt.Errorf("%s: %w", doing, err)
	}
	return ok, nil
}

// awaitSession waits on conn for the session lock, for at most d: it is
// granted once the session that holds it ends (or lets it go). Not
// granted in time is no error.
func (l *Lease) awaitSession(ctx context.Context, conn *pgx.Conn, d time.Duration) error {
	ms := min(max(d.Milliseconds(), 1), math.MaxInt32) // 0 would wait for ever
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// For this transaction only: the wait ends at lock_timeout, and no
		// statement_timeout of the role's cuts it shorter.
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', '0', true)`,
			strconv.FormatInt(ms, 10)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1)`, l.key)
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		l.locked.Store(true)
		return nil
	case errors.As(err, &pgErr) && pgErr.Code == "55P03": // lock_not_available: the holder's session lives on
		return nil
	}
	return fmt.Errorf("waiting for the writer lease's session lock: %w", err)
}

// claimSession gives a holder that took the lease without the session lock
// (after the expiry: a hung previous holder's session may still hold it)
// the lock: it ends the other sessions that hold it (pg_terminate_backend;
// the lease is this process's now, so they can only be the previous
// holder's or a standby's about to find that out), waits for it for at
// most EpochGrace and names its session in the row. Renewals try again
// when this fails.
func (l *Lease) claimSession(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil || !l.direct.Load() || l.locked.Load() {
		return err
	}
	hi, lo := int64(uint64(l.key)>>32), int64(uint64(l.key)&0xffffffff)
	// The function in the target list: it runs for the rows the WHERE
	// keeps, and only for them.
	rows, err := conn.Query(ctx, `SELECT pid, pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND pid <> pg_backend_pid()`, hi, lo)
	if err != nil {
		return fmt.Errorf("ending the sessions that hold the writer lease's session lock: %w", err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
		PID   int32
		Ended bool
	}])
	if err != nil {
		return fmt.Errorf("ending the sessions that hold the writer lease's session lock: %w", err)
	}
	for _, e := range ended {
		l.log.Warn("ended a session that held the writer lease's session lock (the previous holder's, hung, or a standby's)",
			zap.Int32("pid", e.PID), zap.Bool("ended", e.Ended))
	}
	if err := l.awaitSession(ctx, conn, EpochGrace); err != nil || !l.locked.Load() {
		return err
	}
	_, err = conn.Exec(ctx, `UPDATE writer_lease SET session_pid = pg_backend_pid(), session_epoch = epoch
		WHERE id = 1 AND holder = $1 AND epoch = $2`, l.opts.Holder, l.Epoch())
	if err != nil {
		return fmt.Errorf("naming the writer lease's session: %w", err)
	}
	return nil
}

// SessionLocked reports whether this process's lease connection holds the
// session lock: while it holds the lease, a standby takes over the moment
// that session ends.
func (l *Lease) SessionLocked() bool { return l.locked.Load() }

// Takeover says how Acquire took the lease (TakeoverNew, TakeoverExpired,
// TakeoverSessionEnded; "" before).
func (l *Lease) Takeover() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.how
}
