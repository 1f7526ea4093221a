package storage

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// LeaseView is the writer lease as a process read it from the database,
// and when (by its own clock): between reads it tells how the lease stands
// now, extrapolating from the read.
type LeaseView struct {
	Row    LeaseRow
	ReadAt time.Time
}

// ExpiresIn is how long the lease runs on at now (negative: expired that
// long ago; a lease never held has expired).
func (v LeaseView) ExpiresIn(now time.Time) time.Duration {
	if v.Row.ExpiresAt.IsZero() {
		return 0
	}
	return v.Row.Remaining() - now.Sub(v.ReadAt)
}

// Expired reports whether the lease has expired at now: nobody writes.
func (v LeaseView) Expired(now time.Time) bool { return v.ExpiresIn(now) <= 0 }

// NoWriter reports whether nobody writes at now: the lease has expired, or
// the holder's named session had ended when it was read (the holder died;
// a standby takes over at once).
func (v LeaseView) NoWriter(now time.Time) bool { return v.Row.SessionEnded || v.Expired(now) }

// RenewalAge is how old the holder's last renewal is at now (0: never).
func (v LeaseView) RenewalAge(now time.Time) time.Duration {
	if v.Row.RenewedAt.IsZero() {
		return 0
	}
	return v.Row.RenewalAge() + now.Sub(v.ReadAt)
}

// LeaseWatch reads the writer lease again and again: a reader's (and a
// standby's) look at whether anybody writes the log it serves. It reads
// every quarter of the lease's TTL (between 100 ms and 1 s); a failed read
// is counted and logged once until reads work again, and keeps the last
// view.
type LeaseWatch struct {
	q        Querier
	log      *zap.Logger
	view     atomic.Pointer[LeaseView]
	failures atomic.Uint64
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// WatchLease starts watching the writer lease on q (a pool). Close it
// before the pool closes.
func WatchLease(q Querier, log *zap.Logger) *LeaseWatch {
	if log == nil {
		log = zap.NewNop()
	}
	w := &LeaseWatch{q: q, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// View is the lease as last read (nil until a read succeeded).
func (w *LeaseWatch) View() *LeaseView { return w.view.Load() }

// Failures counts the reads that failed.
func (w *LeaseWatch) Failures() uint64 { return w.failures.Load() }

// every is how long the watch waits between reads of a lease of ttl.
func every(ttl time.Duration) time.Duration {
	return min(max(ttl/4, 100*time.Millisecond), time.Second)
}

func (w *LeaseWatch) run() {
	defer close(w.done)
	failing := false
	wasGone, lastEpoch := -1, int64(-1) // unknown
	for {
		wait := time.Second
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		row, err := ReadLease(ctx, w.q)
		cancel()
		if err != nil {
			w.failures.Add(1)
			if !failing {
				w.log.Warn("reading the writer lease failed; retrying", zap.Error(err), zap.Duration("every", wait))
			}
			failing = true
		} else {
			if failing {
				w.log.Info("reading the writer lease works again")
			}
			failing = false
			w.view.Store(&LeaseView{Row: row, ReadAt: time.Now()})
			wait = every(row.TTL)
			if gone := b2i(row.Expired() || row.SessionEnded); gone != wasGone || (gone == 0 && row.Epoch != lastEpoch) {
				wasGone, lastEpoch = gone, row.Epoch
				switch {
				case gone == 1 && !row.Expired():
					w.log.Warn("the writer lease's holder is gone (its database session ended): nobody writes the log this process serves",
						zap.String("lastHolder", row.Holder), zap.Int64("epoch", row.Epoch), zap.Int32("sessionPid", row.SessionPID))
				case gone == 1:
					w.log.Warn("the writer lease has expired: nobody writes the log this process serves",
						zap.String("lastHolder", row.Holder), zap.Int64("epoch", row.Epoch), zap.Time("expiredAt", row.ExpiresAt))
				default:
					w.log.Info("a writer holds the writer lease", zap.String("holder", row.Holder), zap.Int64("epoch", row.Epoch))
				}
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-w.stop:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Close stops the reads (later calls do nothing).
func (w *LeaseWatch) Close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
