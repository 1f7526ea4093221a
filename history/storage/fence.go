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
	takeEpochSQL  = `UPDATE writer_epoch SET epoch = epoch + 1 WHERE id = 1 RETURNING epoch`
	checkEpochSQL = `SELECT epoch FROM writer_epoch WHERE id = 1 FOR SHARE`
	// Read only on a refusal, to name the process that took over.
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
	return p.checkEpoch(func(q string) rowScanner { return tx.QueryRow(ctx, q) })
}

// CheckEpochSQL is CheckEpoch in a database/sql transaction on the pool.
func (p *Postgres) CheckEpochSQL(ctx context.Context, tx *sql.Tx) error {
	return p.checkEpoch(func(q string) rowScanner { return tx.QueryRowContext(ctx, q) })
}

// rowScanner is a row of pgx or of database/sql.
type rowScanner interface{ Scan(dest ...any) error }

// checkEpoch is CheckEpoch over either driver's transaction, whose
// statements queryRow runs.
func (p *Postgres) checkEpoch(queryRow func(sql string) rowScanner) error {
	mine := p.epoch.Load()
	if mine == 0 {
		return nil
	}
	if err := p.LeaseHeld(); err != nil {
		return err
	}
	var stored int64
	if err := queryRow(checkEpochSQL).Scan(&stored); err != nil {
		return fmt.Errorf("checking the writer epoch: %w", err)
	}
	if stored == mine {
		return nil
	}
	var by string
	var epoch int64
	takenErr := queryRow(takenBySQL).Scan(&by, &epoch)
	return fenced(mine, stored, by, epoch, takenErr)
}

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
// epoch), in the words of a renewal that finds the lease taken
// (Lease.renew), so that whichever of the two a holder meets first, its
// last line says the same. takenErr is the error reading the row, if any.
func fenced(mine, stored int64, by string, epoch int64, takenErr error) error {
	if takenErr != nil || by == "" {
		return fmt.Errorf("%w (writer epoch %d, the stored one is %d)", record.ErrFenced, mine, stored)
	}
	return fmt.Errorf("%w: %s took the writer lease (epoch %d; this process's was %d)", record.ErrFenced, by, epoch, mine)
}
