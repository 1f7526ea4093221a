package storage

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The writer lease's row (writer_lease, migrations 0003 and 0004) as
// stored and read, and the names the lease gives its process and its
// notices.

// LeaseRow is the writer lease as stored, with the database's clock when
// it was read.
type LeaseRow struct {
	Holder string
	Epoch  int64
	TTL    time.Duration
	// AcquiredAt, RenewedAt and ExpiresAt are database times (zero: never
	// held).
	AcquiredAt, RenewedAt, ExpiresAt time.Time
	// SessionPID is the server process of the session on which the holder
	// of SessionEpoch holds the lease's session lock (0: none named).
	SessionPID   int32
	SessionEpoch int64
	// SessionEnded (ReadLease only) is set when the holder's named session
	// no longer runs: the holder is gone, although the lease has not
	// expired yet.
	SessionEnded bool
	// Now is the database's clock at the read.
	Now time.Time
}

// Watched reports whether the row names the holder's session: a standby
// takes the lease as soon as that session ends.
func (r LeaseRow) Watched() bool { return r.SessionPID != 0 && r.SessionEpoch == r.Epoch }

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

const leaseColumns = `holder, epoch, ttl_ms, acquired_at, renewed_at, expires_at,
	coalesce(session_pid, 0), coalesce(session_epoch, 0), clock_timestamp()`

// sessionEndedColumn tells whether the holder's named session has ended:
// no server process of its pid runs (a pid taken again by another
// session reads as alive: the expiry decides then).
const sessionEndedColumn = `session_pid IS NOT NULL AND session_epoch = epoch
	AND NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = session_pid)`

// scanLease scans leaseColumns, then into more (further columns).
func scanLease(row pgx.Row, more ...any) (LeaseRow, error) {
	var out LeaseRow
	var ttl int64
	var acquired, renewed, expires *time.Time
	dest := append([]any{&out.Holder, &out.Epoch, &ttl, &acquired, &renewed, &expires, &out.SessionPID, &out.SessionEpoch, &out.Now}, more...)
	if err := row.Scan(dest...); err != nil {
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
// and whether the holder's named session has ended (readers judge by it
// whether anybody writes).
func ReadLease(ctx context.Context, q Querier) (LeaseRow, error) {
	var ended bool
	row, err := scanLease(q.QueryRow(ctx, `SELECT `+leaseColumns+`, `+sessionEndedColumn+` FROM writer_lease WHERE id = 1`), &ended)
	if err != nil {
		return LeaseRow{}, fmt.Errorf("reading the writer lease: %w", err)
	}
	row.SessionEnded = ended
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
