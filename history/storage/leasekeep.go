package storage

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// The holder's side of the writer lease: renewing it, watching its
// connection between renewals, and learning that it was lost.

// keep renews the lease every TTL/3 (after a failure every TTL/10, and at
// once when the lease's connection ends) until Release, or until a renewal
// finds that another process took it. A lease taken without the session
// lock first claims it.
func (l *Lease) keep() {
	defer close(l.done)
	if !l.locked.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
		if err := l.claimSession(ctx); err != nil {
			l.log.Warn("taking the writer lease's session lock failed; renewals try again", zap.Error(err))
		}
		cancel()
	}
	failing := false
	wait := l.ttl / 3
	for {
		if !l.await(wait) {
			return
		}
		err := l.renew()
		switch {
		case err == nil:
			if failing || l.lapsed.Load() {
				l.log.Info("the writer lease is renewed again", zap.Bool("hadLapsed", l.lapsed.Load()))
			}
			failing = false
			l.lapsed.Store(false)
			wait = l.ttl / 3
			continue
		case errors.Is(err, ErrLeaseLost):
			l.validUntil.Store(0)
			l.lose(err)
			return
		}
		if !failing {
			l.log.Warn("renewing the writer lease failed; retrying", zap.Error(err), zap.Duration("every", l.ttl/10))
		}
		failing = true
		if !l.Valid() && !l.lapsed.Swap(true) {
			l.log.Error("the writer lease lapsed: this process commits nothing until it renews the lease, "+
				"and leaves if another process took it meanwhile", zap.Duration("sinceRenewal", l.RenewalAge()), zap.Duration("ttl", l.ttl))
		}
		wait = l.ttl / 10
	}
}

// await waits for d, or less: until the lease's connection ends (a renewal
// then follows at once, in a new session: the lease goes on there, or
// learns at once that a standby took it when that session ended). It
// reports false on Release.
func (l *Lease) await(d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	for conn != nil && ctx.Err() == nil {
		// Reading the connection sees its end at once; a notice (none
		// is expected) is read and waited past.
		if _, err := conn.WaitForNotification(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("the writer lease's connection ended; renewing the lease in a new one", zap.Error(err))
			l.closeConn()
			return true
		}
	}
	<-ctx.Done()
	select {
	case <-l.stop:
		return false
	default:
		return true
	}
}

// renew extends the lease by the TTL from the database's clock, if the row
// still carries this process's epoch; else the lease is lost (ErrLeaseLost,
// saying who holds it).
func (l *Lease) renew() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
	defer cancel()
	start := time.Now()
	err := l.renewOnce(ctx)
	took := time.Since(start)
	if err == nil {
		l.renewals.Add(1)
		l.renewedAt.Store(int64(start.Sub(l.base)))
		l.validUntil.Store(int64(start.Sub(l.base) + l.ttl - leaseMargin(l.ttl)))
	} else {
		l.failures.Add(1)
	}
	if l.opts.Renewed != nil {
		l.opts.Renewed(took, err)
	}
	return err
}

func (l *Lease) renewOnce(ctx context.Context) error {
	conn, err := l.connect(ctx)
	if err != nil {
		return err
	}
	if l.direct.Load() && !l.locked.Load() {
		// A new session, or the lock was not to be had: it is named
		// once held. Until then the row keeps naming the session it
		// names (an ended one: a standby that got the lock takes over).
		if err := l.lockSession(ctx, conn); err != nil {
			l.closeConn()
			return err
		}
		if !l.locked.Load() {
			// This process's previous session may still be ending (the
			// server reports a session ended before its process has gone
			// and let its locks go): wait a moment for the lock, behind
			// any standby that waits for it (that one gets it first).
			if err := l.awaitSession(ctx, conn, sessionEndingWait(l.ttl)); err != nil {
				l.closeConn()
				return err
			}
		}
	}
	row, err := scanLease(conn.QueryRow(ctx, `UPDATE writer_lease SET renewed_at = clock_timestamp(),
		expires_at = clock_timestamp() + ttl_ms * interval '1 millisecond',
		session_pid = CASE WHEN $3 THEN pg_backend_pid() ELSE session_pid END,
		session_epoch = CASE WHEN $3 THEN epoch ELSE session_epoch END
		WHERE id = 1 AND holder = $1 AND epoch = $2 RETURNING `+leaseColumns, l.opts.Holder, l.Epoch(), l.locked.Load()))
	if errors.Is(err, pgx.ErrNoRows) {
		// Lost for good: who took it is read with bounds of its own, not
		// with what is left of this renewal's third of the TTL.
		by, epoch, rerr := l.p.readTaker(ctx, l.Epoch()+1, func(ctx context.Context, q string) rowScanner { return conn.QueryRow(ctx, q) })
		return lostTo(l.Epoch(), by, epoch, rerr)
	}
	if err != nil {
		l.closeConn() // a renewal cut short leaves the session in doubt
		return err
	}
	l.mu.Lock()
	l.row = row
	l.mu.Unlock()
	return nil
}

// sessionEndingWait is how long a renewal in a new session waits for the
// session lock it did not get at once: a sixth of the TTL, at most half a
// second (well within the renewal's third of the TTL).
func sessionEndingWait(ttl time.Duration) time.Duration { return min(ttl/6, 500*time.Millisecond) }
