package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
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
//   - Acquire takes it once it has expired (at once on a new schema),
//     incrementing the writer epoch (writer_epoch, the fence every write
//     transaction checks: CheckEpoch) in the same transaction. While
//     another process holds it, it waits: a standby.
//   - The holder renews it every TTL/3, each renewal one UPDATE on a
//     connection of the lease's own, and keeps it only while the row still
//     carries its epoch: a renewal that finds another epoch loses the lease
//     for good (Lost).
//   - The holder stops committing on its own once it has not renewed
//     within TTL minus a quarter of it, measured on its own monotonic clock
//     from the start of the last renewal that succeeded: before the
//     database's expiry, so before any standby can take over. It commits
//     again if a later renewal succeeds (nobody took the lease meanwhile).
//   - A holder that stops lets the lease go (Release: expired at once, and
//     a notice that wakes a standby).
//
// A paused holder (SIGSTOP, a long pause, a partition that keeps its TCP
// sessions) therefore loses the lease after the TTL, and when it wakes its
// commits are refused: locally (the lease lapsed), then by the epoch. One
// of its transactions left open in the database holds the epoch row: the
// takeover ends that session after EpochGrace (takeEpoch).

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

// LeaseRow is the writer lease as stored, with the database's clock when
// it was read.
type LeaseRow struct {
	Holder string
	Epoch  int64
	TTL    time.Duration
	// AcquiredAt, RenewedAt and ExpiresAt are database times (zero: never
	// held).
	AcquiredAt, RenewedAt, ExpiresAt time.Time
	// Now is the database's clock at the read.
	Now time.Time
}

// Expired reports whether the lease had expired (or was never held) when
// it was read.
func (r LeaseRow) Expired() bool { return r.ExpiresAt.IsZero() || !r.ExpiresAt.After(r.Now) }

// Remaining is how long the lease still ran when it was read (negative:
// expired since).
func (r LeaseRow) Remaining() time.Duration {
	if r.ExpiresAt.IsZero() {
		return 0
	}
	return r.ExpiresAt.Sub(r.Now)
}

// RenewalAge is how old the last renewal was when the row was read.
func (r LeaseRow) RenewalAge() time.Duration {
	if r.RenewedAt.IsZero() {
		return 0
	}
	return r.Now.Sub(r.RenewedAt)
}

const leaseColumns = `holder, epoch, ttl_ms, acquired_at, renewed_at, expires_at, clock_timestamp()`

func scanLease(row pgx.Row) (LeaseRow, error) {
	var out LeaseRow
	var ttl int64
	var acquired, renewed, expires *time.Time
	if err := row.Scan(&out.Holder, &out.Epoch, &ttl, &acquired, &renewed, &expires, &out.Now); err != nil {
		return LeaseRow{}, err
	}
	out.TTL = time.Duration(ttl) * time.Millisecond
	for _, p := range []struct {
		from *time.Time
		to   *time.Time
	}{{acquired, &out.AcquiredAt}, {renewed, &out.RenewedAt}, {expires, &out.ExpiresAt}} {
		if p.from != nil {
			*p.to = *p.from
		}
	}
	return out, nil
}

// Querier runs one query (a pool, a connection or a transaction).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadLease reads the writer lease as stored, with the database's clock
// (readers judge by it whether anybody writes).
func ReadLease(ctx context.Context, q Querier) (LeaseRow, error) {
	row, err := scanLease(q.QueryRow(ctx, `SELECT `+leaseColumns+` FROM writer_lease WHERE id = 1`))
	if err != nil {
		return LeaseRow{}, fmt.Errorf("reading the writer lease: %w", err)
	}
	return row, nil
}

// leaseChannelPrefix begins the name of the channel a holder that lets
// the lease go notifies, named after the schema (ChannelName).
const leaseChannelPrefix = "marlowe_lease_"

// ChannelName returns a notification channel of the stores in schema: the
// prefix and the schema's name, or, when that passes PostgreSQL's 63-byte
// identifiers, the prefix and a hash of the name.
func ChannelName(prefix, schema string) string {
	name := prefix + schema
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(schema))
		name = prefix + hex.EncodeToString(sum[:12])
	}
	return name
}

// ProcessName names this process in the lease row and in its sessions'
// application_name: its host name, its process id and a random part (a
// restarted container keeps its host name and often its pid). It is the
// same for the process's whole life.
func ProcessName() string {
	processNameOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown-host"
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		processName = host + "/" + strconv.Itoa(os.Getpid()) + "/" + hex.EncodeToString(b[:])
	})
	return processName
}

var (
	processNameOnce sync.Once
	processName     string
)

// Lease is this process's writer lease (NewLease, Acquire).
type Lease struct {
	p      *Postgres
	opts   LeaseOptions
	log    *zap.Logger
	ttl    time.Duration
	cfg    *pgx.ConnConfig
	schema string // resolved at the first connection

	mu   sync.Mutex // conn, state
	conn *pgx.Conn
	row  LeaseRow // as acquired, then as last renewed

	// base is the monotonic origin of validUntil (nanoseconds after it):
	// writes are refused from then on.
	base       time.Time
	validUntil atomic.Int64
	renewedAt  atomic.Int64 // when the last renewal that succeeded began (nanoseconds after base)
	acquired   atomic.Bool
	lapsed     atomic.Bool
	released   atomic.Bool

	renewals, failures atomic.Uint64

	lost    chan struct{}
	lostErr error // set before lost closes
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
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
	return &Lease{p: p, opts: opts, log: opts.Logger, ttl: opts.TTL, cfg: cfg, base: time.Now(),
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Acquire takes the lease, waiting for as long as another process holds it
// (a standby: woken by the lease's expiry, or at once by a holder that
// lets it go) or until ctx ends. Once held, the process's writer epoch is
// the lease's (Epoch), every write transaction on the pool checks it
// (CheckEpoch), and the lease is renewed every TTL/3 until Release or
// until it is lost (Lost). Call it once.
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
		wait := min(l.ttl/3, time.Second)
		if err != nil {
			l.closeConn()
			l.log.Warn("taking the writer lease failed; retrying", zap.Error(err), zap.Duration("after", wait))
		} else {
			if !waiting && l.opts.Waiting != nil {
				l.opts.Waiting(row)
			}
			waiting = true
			// Until the stored expiry (a little after), never longer than
			// the TTL; a holder that lets the lease go wakes this sooner.
			wait = min(max(row.Remaining()+10*time.Millisecond, 10*time.Millisecond), l.ttl)
		}
		if err := l.sleep(ctx, wait, err == nil); err != nil {
			l.closeConn()
			return fmt.Errorf("writer lease: %w", err)
		}
	}
}

// connect returns the lease's connection, opening it when there is none
// (or it broke).
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
	if l.schema == "" {
		if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&l.schema); err != nil {
			_ = conn.Close(context.Background())
			return nil, err
		}
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

// tryAcquire takes the lease if it has expired: in one transaction it
// locks the lease row, increments the writer epoch (takeEpoch: waiting for
// the previous holder's write transactions in flight) and writes itself
// into the row. took is false, with the stored lease, while another holds
// it.
func (l *Lease) tryAcquire(ctx context.Context) (LeaseRow, bool, error) {
	conn, err := l.connect(ctx)
	if err != nil {
		return LeaseRow{}, false, err
	}
	var row LeaseRow
	var start time.Time
	took := false
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if row, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseColumns+` FROM writer_lease WHERE id = 1 FOR UPDATE`)); err != nil {
			return err
		}
		if !row.Expired() {
			return nil
		}
		epoch, err := l.p.takeEpoch(ctx, tx, conn.PgConn().PID(), l.opts.Ended)
		if err != nil {
			return err
		}
		start = time.Now()
		row, err = scanLease(tx.QueryRow(ctx, `UPDATE writer_lease SET holder = $1, epoch = $2, ttl_ms = $3::bigint,
			acquired_at = clock_timestamp(), renewed_at = clock_timestamp(),
			expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
			WHERE id = 1 RETURNING `+leaseColumns, l.opts.Holder, epoch, l.ttl.Milliseconds()))
		took = err == nil
		return err
	})
	if err != nil {
		return LeaseRow{}, false, fmt.Errorf("taking the writer lease: %w", err)
	}
	if took {
		l.row = row
		l.renewedAt.Store(int64(start.Sub(l.base)))
		l.validUntil.Store(int64(start.Sub(l.base) + l.ttl - leaseMargin(l.ttl)))
	}
	return row, took, nil
}

// keep renews the lease every TTL/3 (after a failure every TTL/10) until
// Release, or until a renewal finds that another process took it.
func (l *Lease) keep() {
	defer close(l.done)
	failing := false
	t := time.NewTimer(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		err := l.renew()
		switch {
		case err == nil:
			if failing || l.lapsed.Load() {
				l.log.Info("the writer lease is renewed again", zap.Bool("hadLapsed", l.lapsed.Load()))
			}
			failing = false
			l.lapsed.Store(false)
			t.Reset(l.ttl / 3)
			continue
		case errors.Is(err, ErrLeaseLost):
			l.validUntil.Store(0)
			l.lostErr = err
			close(l.lost)
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
		t.Reset(l.ttl / 10)
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
	row, err := scanLease(conn.QueryRow(ctx, `UPDATE writer_lease SET renewed_at = clock_timestamp(),
		expires_at = clock_timestamp() + ttl_ms * interval '1 millisecond'
		WHERE id = 1 AND holder = $1 AND epoch = $2 RETURNING `+leaseColumns, l.opts.Holder, l.Epoch()))
	if errors.Is(err, pgx.ErrNoRows) {
		now, rerr := ReadLease(ctx, conn)
		if rerr != nil {
			return fmt.Errorf("%w: another process took the writer lease (reading it: %v)", ErrLeaseLost, rerr)
		}
		return fmt.Errorf("%w: %s took the writer lease (epoch %d; this process's was %d)", ErrLeaseLost, now.Holder, now.Epoch, l.Epoch())
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
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is why the lease was lost (nil while it is not).
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

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
