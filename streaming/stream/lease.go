package stream

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// A durable stream's database work: the round-trip lease of a shared
// stream and the store of its acknowledgements. The stream decides; its
// dbWorker runs the SQL and answers with the messages below, which the
// stream takes in its Receive as it took the calls' results before.

// leaseState is where a shared stream stands with its round-trip lease.
type leaseState int

const (
	leaseNone   leaseState = iota
	leaseTaking            // asked for: nothing goes out until the answer
	leaseHeld              // renewed every third of its life while held
)

// The dbWorker's answers.
type (
	// leaseTaken answers a request for the lease.
	leaseTaken struct {
		stored *streamstore.Stream
		err    error
	}
	// leaseRenewed answers a renewal of the lease of generation gen.
	leaseRenewed struct {
		gen    int
		stored *streamstore.Stream
		err    error
	}
	// ackStored answers the store (of generation gen) of an acknowledgement.
	ackStored struct {
		gen int
		ack *streamstore.StreamAckParams
		err error
	}
)

// completed moves the acknowledged position past a batch (and stores it
// for a durable stream).
func (st *Actor) completed(number int64, p *pendingBatch) {
	st.pending = nil
	st.orphan = nil
	st.acked = p.cursor
	st.retryAt = time.Time{}
	st.records += int64(len(p.records))
	if !st.durable {
		return
	}
	if st.shared() && st.lease != leaseHeld {
		// Never stored without the lease: another process may have the
		// stream now. The next lease puts the stream back where the
		// database has it (the connection that acknowledged is gone).
		st.d.Metrics.LeasesLost.Inc()
		st.log().Warn("acknowledgement of a batch whose round-trip lease is gone: not stored; the records go out again",
			zap.Int64("batch", number))
		return
	}
	ack := &streamstore.StreamAckParams{Name: st.name, Cursor: p.cursor.String(), Batch: number, Records: int64(len(p.records))}
	if st.unstored != nil {
		// The records of the acks not stored yet count with this one.
		ack.Records += st.unstored.Records
	}
	st.unstored, st.storeTries = ack, 0
	st.storeAck()
}

// storeAck hands the newest acknowledgement (st.unstored) to the worker;
// a shared stream's is stored under its lease, which the store ends.
// Nothing is delivered while the store is under way (storing), so no
// other acknowledgement comes before its answer (stored).
func (st *Actor) storeAck() {
	ack := *st.unstored // the worker's own copy
	st.stopStoreRetry()
	if st.shared() {
		ack.Holder = st.d.Config.LeaseHolder
	}
	st.storeBusy = true
	gen, store, again := st.storeGen, st.d.Store, st.storeTries > 0
	st.work.do(func(ctx context.Context) any {
		err := store.StreamAck(ctx, &ack)
		if err != nil && again && (errors.Is(err, streamstore.ErrLeased) || errors.Is(err, streamstore.ErrStale)) &&
			storedAlready(ctx, store, &ack) {
			err = nil // an earlier try was stored, its answer lost with the connection
		}
		return &ackStored{gen: gen, ack: &ack, err: err}
	})
}

// stored takes the answer of an acknowledgement's store. A store that
// failed (the database away) is tried again with backoff, keeping the
// lease: the stream's cursor is the one in memory, and no other process
// may take the stream while this one holds it.
func (st *Actor) stored(m *ackStored) {
	if m.gen != st.storeGen {
		return // given up meanwhile (the lease was lost)
	}
	st.storeBusy = false
	ack, err := m.ack, m.err
	switch {
	case err == nil:
		if st.storeTries > 0 {
			st.log().Info("the acknowledged cursor of the durable stream is stored", zap.String("cursor", ack.Cursor),
				zap.Int("tries", st.storeTries+1))
		}
		st.unstored, st.storeTries = nil, 0
		st.storedAt = st.acked // nothing was delivered, so nothing acknowledged, since the store began
		if ack.Holder != "" {
			st.dropLease() // the ack ended it
		}
	case errors.Is(err, streamstore.ErrLeased), errors.Is(err, streamstore.ErrStale) && ack.Holder != "":
		// The lease lapsed (this process stalled) and another process took
		// the stream (and acknowledged batches since): the cursor did not
		// move.
		st.leaseLost("acknowledgement refused: this process no longer holds the stream's lease")
	case errors.Is(err, streamstore.ErrNotFound):
		st.unstored = nil
		st.log().Info("the durable stream was deleted")
	case errors.Is(err, streamstore.ErrStale), errors.Is(err, streamstore.ErrClosed):
		// The database holds a newer acknowledgement, or the store was
		// closed (the process stops): trying again would not store it.
		st.unstored = nil
		st.d.Metrics.StoreFailures.Inc()
		st.log().Error("storing the acknowledged cursor failed", zap.Error(err), zap.String("cursor", ack.Cursor))
	default:
		st.d.Metrics.StoreFailures.Inc()
		delay := min(minStoreRetry<<min(st.storeTries, 16), st.d.Config.RetryDelay)
		if st.storeTries == 0 {
			st.log().Error("storing the acknowledged cursor failed; storing it again", zap.Error(err),
				zap.String("cursor", ack.Cursor), zap.Duration("after", delay))
		} else {
			st.log().Debug("storing the acknowledged cursor failed again", zap.Error(err), zap.Duration("after", delay))
		}
		st.storeTries++
		sys, self, gen := st.sys, st.self, st.storeGen
		time.AfterFunc(delay, func() { wire.Tell(sys, self, &storeAgain{gen: gen}) })
	}
	if st.renewDue {
		st.renewDue = false
		if st.lease == leaseHeld {
			st.renew()
		}
	}
}

// minStoreRetry is the first wait before a failed store of an
// acknowledgement is tried again; it doubles up to Config.RetryDelay.
const minStoreRetry = 50 * time.Millisecond

// stopStoreRetry gives up the store under way or waiting to be tried
// again: its answer, or its retry, is ignored.
func (st *Actor) stopStoreRetry() {
	st.storeGen++
	st.storeBusy = false
}

// storing reports whether the stream waits for its acknowledgement to be
// stored before it sends more: any durable stream while the store is under
// way, a shared stream until it is stored (its next round trip starts only
// once the last one is in the database).
func (st *Actor) storing() bool {
	return st.unstored != nil && (st.storeBusy || st.shared())
}

// storedAlready reports whether the database holds the acknowledgement.
func storedAlready(ctx context.Context, store streamstore.Store, ack *streamstore.StreamAckParams) bool {
	s, err := store.StreamGet(ctx, ack.Name)
	return err == nil && s.Batch == ack.Batch && s.Cursor == ack.Cursor
}

// leaseLost ends what this process did under a lease another process
// took: the round trip in flight ends, and every connection that got
// records after the stored cursor (the new holder sends them again) gets
// an error frame (lease_lost) and is closed, so that no connection sees a
// seq twice or goes back; those records come again on a new connection,
// marked redelivered. The next lease puts the stream where the database
// has it.
func (st *Actor) leaseLost(why string) {
	st.d.Metrics.LeasesLost.Inc()
	st.log().Warn(why+"; the connections that got records after the stored cursor are closed (lease_lost)",
		zap.String("stored", st.storedAt.String()))
	st.dropLease()
	st.unstored = nil
	st.stopStoreRetry()
	if st.inFlight != nil {
		st.clearRoundTrip()
	}
	st.orphan = nil
	for _, a := range st.atts {
		if a.last > st.storedAt.Seq {
			st.loseConnection(a)
		}
	}
}

// loseConnection tells a connection its stream's lease is lost: it gets
// the error frame and is closed; nothing more goes to it.
func (st *Actor) loseConnection(a *attachment) {
	if a.closing {
		return
	}
	a.closing = true
	wire.Tell(st.sys, a.conn, &wire.LeaseLost{Stream: st.self, Name: a.name})
}

// shared reports whether the stream's round trips are leased: a durable
// stream in ack mode on a database that several processes serve.
func (st *Actor) shared() bool {
	return st.durable && st.mode == protocol.ModeAck && st.d.Config.LeaseHolder != ""
}

func (st *Actor) leaseParams() *streamstore.StreamLeaseParams {
	return &streamstore.StreamLeaseParams{Name: st.name, Holder: st.d.Config.LeaseHolder, TTL: st.d.Config.LeaseTTL}
}

// takeLease asks the worker for the stream's round-trip lease before a
// batch goes out (once: nothing goes out until the answer, leaseGranted).
func (st *Actor) takeLease() {
	if st.lease != leaseNone {
		return
	}
	st.lease = leaseTaking
	p, store := st.leaseParams(), st.d.Store
	st.work.do(func(ctx context.Context) any {
		stored, err := store.StreamLease(ctx, p)
		return &leaseTaken{stored: stored, err: err}
	})
}

// leaseGranted takes the answer to takeLease. Granted, the store's cursor
// is the truth: when another process acknowledged batches meanwhile (or
// this process's last ack was refused), the stream goes back to that
// cursor, gives the lease up and reads from there. Refused, the batch
// waits LeaseRetry and asks again.
func (st *Actor) leaseGranted(m *leaseTaken) {
	if st.lease != leaseTaking {
		return
	}
	st.lease = leaseNone
	stored, err := m.stored, m.err
	switch {
	case err == nil:
	case errors.Is(err, streamstore.ErrLeased):
		st.d.Metrics.LeaseWaits.Inc()
		st.retryAt = time.Now().Add(st.leaseRetry())
		return
	case errors.Is(err, streamstore.ErrNotFound):
		// Deleted through another process: the server's view of it goes
		// when this process hears of the deletion; nothing goes out.
		st.log().Info("the durable stream was deleted by another process")
		st.retryAt = time.Now().Add(st.d.Config.RetryDelay)
		return
	default:
		st.d.Metrics.StoreFailures.Inc()
		st.log().Error("taking the durable stream's round-trip lease failed; asking again", zap.Error(err),
			zap.Duration("after", st.d.Config.RetryDelay))
		st.retryAt = time.Now().Add(st.d.Config.RetryDelay)
		return
	}
	st.lease = leaseHeld
	st.armRenewal()
	st.batchNo = max(st.batchNo, stored.Batch)
	if stored.Cursor == st.acked.String() {
		st.storedAt = st.acked
		return
	}
	cur, err := record.ParseCursor(stored.Cursor)
	if err != nil {
		st.d.Metrics.StoreFailures.Inc()
		st.log().Error("the stored cursor of the durable stream does not parse", zap.String("cursor", stored.Cursor), zap.Error(err))
		st.releaseLease()
		st.retryAt = time.Now().Add(st.d.Config.RetryDelay)
		return
	}
	st.log().Debug("another process moved the durable stream on; reading from its cursor",
		zap.String("from", st.acked.String()), zap.String("to", stored.Cursor))
	st.acked, st.delivered, st.records, st.storedAt = cur, cur, stored.Records, cur
	st.pending, st.orphan = nil, nil
	st.buf, st.bufLen = nil, 0
	st.stopFeed()
	st.bufEnd = cur
	st.releaseLease()
}

func (st *Actor) leaseRetry() time.Duration {
	if d := st.d.Config.LeaseRetry; d > 0 {
		return d
	}
	return DefaultLeaseRetry
}

// DefaultLeaseRetry is Config.LeaseRetry's default.
const DefaultLeaseRetry = 100 * time.Millisecond

// armRenewal renews the lease every third of its life while it is held.
func (st *Actor) armRenewal() {
	if st.renewal != nil {
		st.renewal.Stop()
	}
	st.leaseGen++
	sys, self, gen := st.sys, st.self, st.leaseGen
	st.renewal = time.AfterFunc(st.leaseParams().EffectiveTTL()/3, func() { wire.Tell(sys, self, &renewLease{gen: gen}) })
}

// renew hands the renewal of the lease held to the worker. While an
// acknowledgement's store is under way it waits for its answer (stored):
// that store may end the lease, which a renewal behind it would take
// again.
func (st *Actor) renew() {
	if st.storeBusy {
		st.renewDue = true
		return
	}
	gen, p, store := st.leaseGen, st.leaseParams(), st.d.Store
	st.work.do(func(ctx context.Context) any {
		stored, err := store.StreamLease(ctx, p)
		return &leaseRenewed{gen: gen, stored: stored, err: err}
	})
}

// renewed takes a renewal's answer. The holder's cursor is the truth: the
// stored one is the one it last stored, unless the lease lapsed meanwhile
// and another process took the stream and acknowledged batches. Lost so
// (or refused: another process holds it now), leaseLost ends what this
// process did under it.
func (st *Actor) renewed(m *leaseRenewed) {
	if m.gen != st.leaseGen || st.lease != leaseHeld {
		return // the lease ended meanwhile
	}
	switch err := m.err; {
	case err == nil && m.stored.Cursor != st.storedAt.String():
		st.leaseLost("the durable stream's round-trip lease lapsed and another process acknowledged batches meanwhile")
		st.giveBack()
	case err == nil:
		st.armRenewal()
	case errors.Is(err, streamstore.ErrLeased), errors.Is(err, streamstore.ErrNotFound):
		st.leaseLost("the durable stream's round-trip lease was lost: " + err.Error())
	default:
		// Renewed next time, or lapsed: then the ack is refused and the
		// lease is lost.
		st.d.Metrics.StoreFailures.Inc()
		st.log().Error("renewing the durable stream's round-trip lease failed", zap.Error(err))
		st.armRenewal()
	}
}

// dropLease forgets the lease without telling the store (the ack ended
// it, or it is lost).
func (st *Actor) dropLease() {
	st.lease = leaseNone
	st.renewDue = false
	st.leaseGen++
	if st.renewal != nil {
		st.renewal.Stop()
		st.renewal = nil
	}
}

// releaseLease gives the lease (held, or asked for) back to the store, so
// that another process's connection can take the stream at once.
func (st *Actor) releaseLease() {
	if st.lease == leaseNone {
		return
	}
	st.dropLease()
	st.giveBack()
}

// giveBack has the worker release the lease in the store.
func (st *Actor) giveBack() {
	p, store, log := st.leaseParams(), st.d.Store, st.log()
	st.work.do(func(ctx context.Context) any {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := store.StreamRelease(ctx, p); err != nil {
			// It lapses after its TTL.
			log.Warn("releasing the durable stream's round-trip lease failed; it lapses by itself", zap.Error(err))
		}
		return nil
	})
}
