package storage

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/record"
)

// The writer's fencing epoch on PostgreSQL: the one row of writer_epoch
// (the history line's migration 0002). A process that takes the writer
// lease (Lease.Acquire, lease.go) increments it in the same transaction;
// from then on every write transaction of the stores on this pool checks
// the lease (LeaseHeld) and the stored epoch (CheckEpoch, CheckEpochSQL)
// and fails with record.ErrFenced when another process has taken a newer
// one. A process that never took the lease (a reader, a tool, a test of a
// store alone) is not fenced.

const (
	takeEpochSQL = `UPDATE writer_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch`
	// checkEpochSQL reads the stored epoch, its row locked FOR SHARE, and
	// with it who holds the lease (the row a takeover writes in the same
	// transaction as the epoch): the answer that says this process is
	// fenced names the process that took over, with no second read that a
	// deadline could cut short.
	checkEpochSQL = `SELECT e.epoch, coalesce(l.holder, ''), coalesce(l.epoch, 0)
		FROM writer_epoch e LEFT JOIN writer_lease l ON l.id = 1 WHERE e.id = 1 FOR SHARE OF e`
	// takenBySQL reads who holds the lease, to name the process that
	// took over when the answer that found it out did not (readTaker).
	takenBySQL = `SELECT holder, epoch FROM writer_lease WHERE id = 1`
)

// takeEpoch increments the stored writer epoch in tx (the lease's
// takeover, on the session of server pid pid) and returns the new value.
// The increment waits for write transactions of the previous holder in
// flight (they hold the row FOR SHARE), so everything it committed is
// visible after it and nothing it commits later lands. A previous holder
// that stopped in the middle of one (a process paused with its transaction
// open) would block the increment for as long as it is paused: after
// EpochGrace the sessions that block it are ended (pg_terminate_backend;
// their transactions roll back), and ended, when set, is told each one's
// server pid. Only a previous holder's writes lock the row once its lease
// has expired.
func (p *Postgres) takeEpoch(ctx context.Context, tx pgx.Tx, pid uint32, ended func(pid int)) (int64, error) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(EpochGrace)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := p.Pool.Query(ctx, `SELECT b FROM unnest(pg_blocking_pids($1)) AS b WHERE pg_terminate_backend(b)`, int(pid))
			if err != nil {
				continue
			}
			pids, _ := pgx.CollectRows(rows, pgx.RowTo[int])
			for _, b := range pids {
				if ended != nil {
					ended(b)
				}
			}
		}
	}()
	var epoch int64
	err := tx.QueryRow(ctx, takeEpochSQL).Scan(&epoch)
	close(done)
	wg.Wait()
	if err != nil {
		return 0, fmt.Errorf("taking the writer epoch: %w", err)
	}
	return epoch, nil
}

// EpochGrace is how long TakeEpoch waits for the previous holder's write
// transactions before it ends the sessions that block it.
const EpochGrace = 500 * time.Millisecond

// Epoch is the writer epoch this process took with its lease (0: none,
// not fenced).
func (p *Postgres) Epoch() int64 { return p.epoch.Load() }

// CheckEpoch refuses a write transaction of a process that took the
// writer lease but may not write now: ErrLeaseLapsed while its lease is
// not renewed (LeaseHeld), record.ErrFenced once the stored epoch is no
// longer its own. It locks the epoch row FOR SHARE until tx ends. It does
// nothing on a process that never took the lease.
func (p *Postgres) CheckEpoch(ctx context.Context, tx pgx.Tx) error {
	return p.checkEpoch(ctx, func(ctx context.Context, q string) rowScanner { return tx.QueryRow(ctx, q) })
}

// CheckEpochSQL is CheckEpoch in a database/sql transaction on the pool.
func (p *Postgres) CheckEpochSQL(ctx context.Context, tx *sql.Tx) error {
	return p.checkEpoch(ctx, func(ctx context.Context, q string) rowScanner { return tx.QueryRowContext(ctx, q) })
}

// rowScanner is a row of pgx or of database/sql.
type rowScanner interface{ Scan(dest ...any) error }

// queryRowFunc runs one statement on a connection or transaction of
// either driver.
type queryRowFunc func(ctx context.Context, sql string) rowScanner

// checkEpoch is CheckEpoch over either driver's transaction, whose
// statements queryRow runs.
func (p *Postgres) checkEpoch(ctx context.Context, queryRow queryRowFunc) error {
	mine := p.epoch.Load()
	if mine == 0 {
		return nil
	}
	if err := p.LeaseHeld(); err != nil {
		return err
	}
	var stored, epoch int64
	var by string
	if err := queryRow(ctx, checkEpochSQL).Scan(&stored, &by, &epoch); err != nil {
		return fmt.Errorf("checking the writer epoch: %w", err)
	}
	if stored == mine {
		return nil
	}
	var takenErr error
	if by == "" || epoch < stored {
		// The lease row joined is of the statement's snapshot: when the
		// check waited for the epoch row while the takeover held it (this
		// process writing as another took over), the epoch is the one the
		// takeover committed and the lease row the one before it (this
		// process's own). A new statement sees the takeover's.
		by, epoch, takenErr = p.readTaker(ctx, stored, queryRow)
	}
	return fenced(mine, stored, by, epoch, takenErr)
}

// readTaker reads who took the writer lease, for the refusal of a process
// that found out it lost it: the holder the lease row names, at an epoch
// of at least want. It tries takerReadAttempts times: first with first
// (the connection or transaction that found it out, when not nil), then on
// the pool's connections (a read cut short by its deadline closes the
// connection it ran on, and an error aborts a transaction). Each read has
// takerReadTimeout of its own, whatever is left of ctx's: its caller may
// have spent its deadline finding out, and this is the process's last
// line, saying why it stops. err is the last read's error when none
// named the taker.
func (p *Postgres) readTaker(ctx context.Context, want int64, first queryRowFunc) (by string, epoch int64, err error) {
	ctx = context.WithoutCancel(ctx)
	for i := range takerReadAttempts {
		if i > 0 {
			time.Sleep(time.Duration(i) * takerReadPause)
		}
		rctx, cancel := context.WithTimeout(ctx, takerReadTimeout)
		if takerReadHook != nil {
			err = takerReadHook()
		}
		if err == nil {
			var row rowScanner
			if i == 0 && first != nil {
				row = first(rctx, takenBySQL)
			} else {
				row = p.Pool.QueryRow(rctx, takenBySQL)
			}
			err = row.Scan(&by, &epoch)
		}
		cancel()
		if err == nil && by != "" && epoch >= want {
			return by, epoch, nil
		}
		if err == nil {
			err = fmt.Errorf("the lease row names %q at epoch %d, not the holder of epoch %d or later", by, epoch, want)
		}
	}
	return "", 0, fmt.Errorf("%d reads of the writer lease: %w", takerReadAttempts, err)
}

// How readTaker reads who took the lease: takerReadAttempts reads of
// takerReadTimeout each at most, the i-th after a pause of i times
// takerReadPause.
const (
	takerReadAttempts = 3
	takerReadTimeout  = 3 * time.Second
	takerReadPause    = 100 * time.Millisecond
)

// takerReadHook, when set (tests), runs before each read of readTaker; an
// error it returns is that read's.
var takerReadHook func() error

// LeaseHeld is nil while this process may write: it holds a valid writer
// lease (Lease.Valid), or never took one. Write transactions check it
// first (CheckEpoch) and again just before they commit, so that a holder
// whose lease lapsed while a transaction ran does not commit it.
func (p *Postgres) LeaseHeld() error {
	l := p.lease.Load()
	if l == nil {
		return nil
	}
	return l.check()
}

// fenced is the refusal of a write whose epoch, mine, is no longer the
// stored one: it names the process the lease row says took over (by, at
// epoch), in the words of a renewal that finds the lease taken (lostTo),
// so that whichever of the two a holder meets first, its last line says
// the same. takenErr is why the row could not be read (readTaker): the
// refusal then says so.
func fenced(mine, stored int64, by string, epoch int64, takenErr error) error {
	if takenErr != nil {
		return fmt.Errorf("%w (writer epoch %d, the stored one is %d; who took it could not be read: %v)", record.ErrFenced, mine, stored, takenErr)
	}
	return fmt.Errorf("%w: %s took the writer lease (epoch %d; this process's was %d)", record.ErrFenced, by, epoch, mine)
}

// lostTo is the error of a renewal that finds the lease taken (the
// holder of mine is no longer the row's): ErrLeaseLost, naming the
// process that took it (by, at epoch) or saying why the row could not be
// read (takenErr, from readTaker).
func lostTo(mine int64, by string, epoch int64, takenErr error) error {
	if takenErr != nil {
		return fmt.Errorf("%w: another process took the writer lease (this process's epoch was %d; who took it could not be read: %v)",
			ErrLeaseLost, mine, takenErr)
	}
	return fmt.Errorf("%w: %s took the writer lease (epoch %d; this process's was %d)", ErrLeaseLost, by, epoch, mine)
}
