package storage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
)

// The writer lease on PostgreSQL: the one row of writer_lease (the history
// line's migration 0003) names the process that writes (holder), the
// writer epoch it took and when its lease expires, by the database's
// clock. One process at a time holds it:
//
//   - Acquire takes it once it has expired (at once on a new schema), or
//     as soon as the holder's database session has ended (its session
//     lock, leasesession.go), incrementing the writer epoch (writer_epoch,
//     the fence every write transaction checks: CheckEpoch) in the same
//     transaction. While another process holds it, it waits: a standby.
//   - The holder renews it every TTL/3, each renewal one UPDATE on a
//     connection of the lease's own, and keeps it only while the row still
//     carries its epoch: a renewal that finds another epoch loses the lease
//     for good (Lost).
//   - The holder stops committing on its own once it has not renewed
//     within TTL minus a quarter of it, measured on its own monotonic clock
//     from the start of the last renewal that succeeded: before the
//     database's expiry, so before any standby can take over. It commits
//     again if a later renewal succeeds (nobody took the lease meanwhile).
//   - A holder that stops lets the lease go (Release: expired at once, a
//     notice, and its session's end, which wake a standby).
//
// A holder that dies (its process killed, its connection lost) is
// replaced at once: its session ends, and with it its session lock. A
// paused holder (SIGSTOP, a long pause, a partition that keeps its TCP
// sessions) keeps its session, loses the lease after the TTL, and when it
// wakes its commits are refused: locally (the lease lapsed), then by the
// epoch. One of its transactions left open in the database holds the epoch
// row: the takeover ends that session after EpochGrace (takeEpoch).

// DefaultLeaseTTL is the writer lease's default time to live.
const DefaultLeaseTTL = 10 * time.Second

// MinLeaseTTL is the shortest TTL a lease accepts (renewals every third of
// it must fit in it with room).
const MinLeaseTTL = 300 * time.Millisecond

var (
	// ErrLeaseLapsed refuses a write of a holder that has not renewed its
	// lease within TTL minus the margin: retryable, it commits again once
	// a renewal succeeds (unless another process took the lease: then the
	// lease is lost and writes fail with record.ErrFenced).
	ErrLeaseLapsed = errors.New("the writer lease lapsed (not renewed in time): this process commits nothing until it renews it")
	// ErrLeaseLost: another process took the lease (a newer epoch); it
	// wraps record.ErrFenced.
	ErrLeaseLost = fmt.Errorf("%w", record.ErrFenced)
	// errLeaseReleased refuses a write after Release.
	errLeaseReleased = errors.New("this process let the writer lease go: it writes no more")
)

// LeaseOptions tune NewLease.
type LeaseOptions struct {
	// TTL is how long a renewal keeps the lease (DefaultLeaseTTL when 0;
	// at least MinLeaseTTL).
	TTL time.Duration
	// Holder names this process in the row (ProcessName); required.
	Holder string
	// Logger receives the lease's notices (nil: none).
	Logger *zap.Logger
	// Waiting, when set, is called once, with the lease as stored, when
	// another process holds it and this one starts waiting (a standby).
	Waiting func(LeaseRow)
	// Ended, when set, is told the server pid of each session of a
	// previous holder that the takeover ended (its open transaction held
	// the epoch row).
	Ended func(pid int)
	// Renewed, when set, is told how long each renewal took and how it
	// ended (nil: renewed; metrics).
	Renewed func(took time.Duration, err error)
}

// Lease is this process's writer lease (NewLease, Acquire).
type Lease struct {
	p      *Postgres
	opts   LeaseOptions
	log    *zap.Logger
	ttl    time.Duration
	cfg    *pgx.ConnConfig
	schema string // resolved at the first connection
	key    int64  // LeaseLockKey(schema)

	mu   sync.Mutex // conn, state
	conn *pgx.Conn
	row  LeaseRow // as acquired, then as last renewed
	how  string   // how it was taken (Takeover)

	// direct: conn is the server's own session (no pooling proxy between),
	// so its session lock means something; locked: conn holds it.
	direct, locked atomic.Bool
	proxied        sync.Once // logs that the session lock is off

	// base is the monotonic origin of validUntil (nanoseconds after it):
	// writes are refused from then on.
	base       time.Time
	validUntil atomic.Int64
	renewedAt  atomic.Int64 // when the last renewal that succeeded began (nanoseconds after base)
	acquired   atomic.Bool
	lapsed     atomic.Bool
	released   atomic.Bool

	renewals, failures atomic.Uint64

	// lost ends, its cause the error, when a renewal finds that another
	// process took the lease.
	lost context.Context
	lose context.CancelCauseFunc
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// leaseMargin is how long before the TTL the holder stops committing.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 4 }

// NewLease prepares this process's writer lease of the schema p's
// sessions use; Acquire takes it.
func (p *Postgres) NewLease(opts LeaseOptions) (*Lease, error) {
	if opts.TTL == 0 {
		opts.TTL = DefaultLeaseTTL
	}
	if opts.TTL < MinLeaseTTL {
		return nil, fmt.Errorf("writer lease: TTL %s is shorter than %s", opts.TTL, MinLeaseTTL)
	}
	if opts.Holder == "" {
		return nil, errors.New("writer lease: no holder name")
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	cfg := p.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "marlowe-follower writer lease"
	l := &Lease{p: p, opts: opts, log: opts.Logger, ttl: opts.TTL, cfg: cfg, base: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	l.lost, l.lose = context.WithCancelCause(context.Background())
	return l, nil
}

// Acquire takes the lease, waiting for as long as another process holds it
// (a standby: woken by the lease's expiry, or at once by the end of the
// holder's session or by a holder that lets it go) or until ctx ends.
// Once held, the process's writer epoch is the lease's (Epoch), every
// write transaction on the pool checks it (CheckEpoch), and the lease is
// renewed every TTL/3 until Release or until it is lost (Lost). Call it
// once.
func (l *Lease) Acquire(ctx context.Context) error {
	waiting := false
	for {
		row, took, err := l.tryAcquire(ctx)
		if took {
			l.p.epoch.Store(row.Epoch)
			l.p.lease.Store(l)
			l.acquired.Store(true)
			go l.keep()
			return nil
		}
		if ctx.Err() != nil {
			l.closeConn()
			return fmt.Errorf("writer lease: %w", ctx.Err())
		}
		if err != nil {
			l.closeConn()
			wait := min(l.ttl/3, time.Second)
			l.log.Warn("taking the writer lease failed; retrying", zap.Error(err), zap.Duration("after", wait))
			err = l.sleep(ctx, wait, false)
		} else {
			if !waiting && l.opts.Waiting != nil {
				l.opts.Waiting(row)
			}
			waiting = true
			err = l.awaitHolder(ctx, row)
		}
		if err != nil {
			l.closeConn()
			return fmt.Errorf("writer lease: %w", err)
		}
	}
}

// awaitHolder waits, as a standby, for a reason to try to take the lease
// row (as just read) shows held: until its expiry (a little after, never
// longer than the TTL), or sooner when the holder's session ends (the
// session lock granted, when the row names that session and this
// connection can see it) or when the holder lets the lease go (its notice;
// its session lock). A holder whose session is not named is read again
// every quarter of the TTL: it names it at its next renewal.
func (l *Lease) awaitHolder(ctx context.Context, row LeaseRow) error {
	wait := min(max(row.Remaining()+10*time.Millisecond, 10*time.Millisecond), l.ttl)
	if !row.Watched() || !l.direct.Load() {
		return l.sleep(ctx, min(wait, l.ttl/4), true)
	}
	conn, err := l.connect(ctx)
	if err == nil {
		if err = l.awaitSession(ctx, conn, wait); err == nil {
			return nil
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	l.closeConn()
	retry := min(l.ttl/3, time.Second)
	l.log.Warn("waiting for the writer lease's holder failed; retrying", zap.Error(err), zap.Duration("after", retry))
	return l.sleep(ctx, retry, false)
}

// connect returns the lease's connection, opening it when there is none
// (or it broke). A new one holds no session lock yet; it is direct when
// the server process the connection's startup named (its backend key) is
// the one that runs its statements: a pooling proxy gives its clients keys
// of its own, and hands their transactions to server sessions it shares.
func (l *Lease) connect(ctx context.Context) (*pgx.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil && !l.conn.IsClosed() {
		return l.conn, nil
	}
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		return nil, err
	}
	var schema string
	var pid uint32
	if err := conn.QueryRow(ctx, `SELECT current_schema(), pg_backend_pid()`).Scan(&schema, &pid); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	if l.schema == "" {
		l.schema, l.key = schema, LeaseLockKey(schema)
	}
	l.direct.Store(pid == conn.PgConn().PID())
	l.locked.Store(false)
	if !l.direct.Load() {
		l.proxied.Do(func() {
			l.log.Warn("the writer lease's connection goes through a proxy that pools sessions (its backend key is not the server "+
				"process's): its session cannot be watched, so a standby takes over from a holder that died only once the lease "+
				"has expired; connect writers to the server directly for takeovers within a second", zap.Uint32("serverPid", pid),
				zap.Uint32("backendKeyPid", conn.PgConn().PID()))
		})
	}
	l.conn = conn
	return conn, nil
}

// closeConn closes the lease's connection (a broken one, or at the end),
// not waiting long for a server that does not answer.
func (l *Lease) closeConn() {
	l.mu.Lock()
	conn := l.conn
	l.conn = nil
	l.locked.Store(false) // the session's end lets it go
	l.mu.Unlock()
	if conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = conn.Close(ctx)
		cancel()
	}
}

func (l *Lease) channel() string { return ChannelName(leaseChannelPrefix, l.schema) }

// sleep waits for d, or ctx's end, or (listen) a notice that the holder
// let the lease go.
func (l *Lease) sleep(ctx context.Context, d time.Duration, listen bool) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if listen {
		if conn, err := l.connect(wctx); err == nil {
			if _, err := conn.Exec(wctx, "LISTEN "+pgx.Identifier{l.channel()}.Sanitize()); err == nil {
				_, _ = conn.WaitForNotification(wctx)
				if conn.IsClosed() {
					l.closeConn()
				}
				return ctx.Err()
			}
			l.closeConn()
		}
	}
	<-wctx.Done()
	return ctx.Err()
}

// tryAcquire takes the lease if it has expired, or if the row names the
// holder's session and this connection holds the session lock (so that
// session has ended): in one transaction it locks the lease row,
// increments the writer epoch (takeEpoch: waiting for the previous
// holder's write transactions in flight) and writes itself into the row,
// naming its own session when it holds the lock. took is false, with the
// stored lease, while another holds it; a session lock it took then is let
// go, for the holder to take (a holder that names no session yet).
func (l *Lease) tryAcquire(ctx context.Context) (LeaseRow, bool, error) {
	conn, err := l.connect(ctx)
	if err != nil {
		return LeaseRow{}, false, err
	}
	var row LeaseRow
	var start time.Time
	how := ""
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if row, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM writer_lease WHERE id = 1 FOR UPDATE`)); err != nil {
			return err
		}
		direct := l.direct.Load()
		if direct && !l.locked.Load() && (row.Watched() || row.Expired()) {
			if err := l.lockSession(ctx, tx); err != nil {
				return err
			}
		}
		switch {
		case row.ExpiresAt.IsZero():
			how = TakeoverNew
		case row.Expired() && row.ExpiresAt.Before(row.RenewedAt.Add(row.TTL)):
			how = TakeoverReleased // Release expires it before its time
		case row.Expired():
			how = TakeoverExpired
		case row.Watched() && l.locked.Load():
			how = TakeoverSessionEnded
		default:
			if l.locked.Load() {
				return l.unlockSession(ctx, tx)
			}
			return nil
		}
		epoch, err := l.p.takeEpoch(ctx, tx, conn.PgConn().PID(), l.opts.Ended)
		if err != nil {
			return err
		}
		start = time.Now()
		row, err = scanLease(tx.QueryRow(ctx, `UPDATE writer_lease SET holder = $1, epoch = $2, ttl_ms = $3::bigint,
			acquired_at = clock_timestamp(), renewed_at = clock_timestamp(),
			expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond',
			session_pid = CASE WHEN $4 THEN pg_backend_pid() END, session_epoch = CASE WHEN $4 THEN $2::bigint END
			WHERE id = 1 RETURNING `+leaseColumns, l.opts.Holder, epoch, l.ttl.Milliseconds(), l.locked.Load()))
		return err
	})
	if err != nil {
		return LeaseRow{}, false, fmt.Errorf("taking the writer lease: %w", err)
	}
	took := how != ""
	if took {
		l.mu.Lock()
		l.row, l.how = row, how
		l.mu.Unlock()
		l.renewedAt.Store(int64(start.Sub(l.base)))
		l.validUntil.Store(int64(start.Sub(l.base) + l.ttl - leaseMargin(l.ttl)))
	}
	return row, took, nil
}

// Epoch is the writer epoch taken with the lease (0 before).
func (l *Lease) Epoch() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.row.Epoch
}

// Holder names this process in the row.
func (l *Lease) Holder() string { return l.opts.Holder }

// TTL is the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Row is the lease as this process last acquired or renewed it.
func (l *Lease) Row() LeaseRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.row
}

// Valid reports whether this process may commit: it renewed the lease
// within TTL minus the margin (on its own clock), and has neither lost
// nor released it.
func (l *Lease) Valid() bool { return int64(time.Since(l.base)) < l.validUntil.Load() }

// Held reports whether this process holds the lease and may commit:
// acquired and valid.
func (l *Lease) Held() bool { return l.acquired.Load() && l.Valid() }

// Acquired reports whether Acquire took the lease (it may have lapsed, been
// lost or let go since).
func (l *Lease) Acquired() bool { return l.acquired.Load() }

// Lapsed reports whether this process holds the lease but has not renewed
// it in time: it commits nothing until a renewal succeeds.
func (l *Lease) Lapsed() bool {
	return l.acquired.Load() && !l.Valid() && !l.released.Load() && l.Err() == nil
}

// Since is when the lease was prepared (NewLease): when a standby began to
// wait for it.
func (l *Lease) Since() time.Time { return l.base }

// RenewalAge is how long ago the last renewal that succeeded began (the
// acquisition counts as one).
func (l *Lease) RenewalAge() time.Duration {
	return time.Since(l.base) - time.Duration(l.renewedAt.Load())
}

// Renewals and RenewalFailures count the renewals that succeeded and
// failed.
func (l *Lease) Renewals() uint64        { return l.renewals.Load() }
func (l *Lease) RenewalFailures() uint64 { return l.failures.Load() }

// Lost is closed when a renewal found that another process took the
// lease; Err says who.
func (l *Lease) Lost() <-chan struct{} { return l.lost.Done() }

// Err is why the lease was lost (nil while it is not).
func (l *Lease) Err() error { return context.Cause(l.lost) }

// check refuses a write unless the lease is valid: record.ErrFenced once
// it is lost, ErrLeaseLapsed while it lapsed.
func (l *Lease) check() error {
	if err := l.Err(); err != nil {
		return err
	}
	if l.released.Load() {
		return errLeaseReleased
	}
	if !l.Valid() {
		return fmt.Errorf("%w (last renewed %s ago, TTL %s)", ErrLeaseLapsed, l.RenewalAge().Round(time.Millisecond), l.ttl)
	}
	return nil
}

// Release stops the renewals and lets the lease go: it expires at once
// and a standby waiting for it is notified. Call it after the last commit:
// from then on this process's writes are refused. Later calls do nothing.
func (l *Lease) Release() error {
	var err error
	l.once.Do(func() {
		l.released.Store(true)
		if !l.acquired.Load() {
			l.closeConn()
			return
		}
		close(l.stop)
		<-l.done
		l.validUntil.Store(0)
		defer l.closeConn()
		if l.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, cerr := l.connect(ctx)
		if cerr != nil {
			err = fmt.Errorf("letting the writer lease go: %w", cerr)
			return
		}
		cerr = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE writer_lease SET expires_at = clock_timestamp() WHERE id = 1 AND holder = $1 AND epoch = $2`,
				l.opts.Holder, l.Epoch())
			if err != nil || tag.RowsAffected() == 0 {
				return err
			}
			_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, l.channel(), l.opts.Holder)
			return err
		})
		if cerr != nil {
			err = fmt.Errorf("letting the writer lease go: %w", cerr)
		}
	})
	return err
}
