// Package status puts together what /status and /readyz report of a
// running role (query.Status) from its parts: a writer's follower
// progress, history store, projection and writer lease; a reader's mirror,
// view of the projection and the writer lease as it last read it.
package status

import (
	"time"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
)

// Writer is what a writer reports from.
type Writer struct {
	Role, Version string
	Magic         uint32
	Progress      *chainsync.Progress
	Store         *history.StoreStats
	Projection    *contracts.Store
	Lease         *storage.Lease // nil on SQLite
}

// Of is the writer's state: the follower's progress (received point,
// connection, handshake, waiting, divergence), the history store's
// (committed point, commit failures), the projection's and the writer
// lease.
func (w Writer) Of() query.Status {
	p := w.Progress.Snapshot()
	st := w.Store
	out := query.Status{
		Network: network.Name(w.Magic), NetworkMagic: w.Magic, Version: w.Version, Connected: p.Connected,
		NodeTip: p.Tip, Follower: p.Point, SyncProgress: p.Fraction(), BlocksBehind: p.BlocksBehind(),
		HistorySeq: st.Head.Load(), ProjectionError: w.Projection.LastError(), CommitFailures: st.CommitFailures.Load(),
		Role: w.Role,
	}
	if w.Lease != nil {
		out.WriterLease = ownLease(w.Lease)
	}
	if h := st.Committed.Load(); h != nil {
		out.Committed = *h
	}
	if !p.Connected {
		out.NodeError = p.LastError
	}
	if h := p.Handshake; h != nil {
		out.Handshake = &query.HandshakeFailure{Reason: h.Reason, Message: h.Message}
	}
	if wt := p.Waiting; wt != nil {
		out.Waiting = &query.NodeWait{NodeTip: wt.NodeTip, Point: wt.Point, Since: wt.Since}
	}
	if d := p.Diverged; d != nil {
		out.Diverged = &query.Divergence{Reason: d.Reason, Action: d.Action, Since: d.At}
	}
	if msg := st.CommitError.Load(); msg != nil && st.Failing.Load() {
		out.CommitError, out.CommitFailingSince = *msg, time.Unix(0, st.FailingSince.Load())
	}
	return out
}

// Reader is what a reader reports from.
type Reader struct {
	Version string
	Magic   uint32
	Mirror  *history.Mirror
	Handle  *history.Handle
	View    *contracts.View
	Watch   *storage.LeaseWatch
	// StandbyOf is set on a standby writer's reader: the writer's role and
	// the lease it waits for.
	StandbyOf string
	Standby   *storage.Lease
}

// Of is the reader's state: the writer's progress as stored (committed
// point and node tip), this process's head, the replica's lag and the
// writer lease as last read; a standby's shows the writer's role and its
// own wait for the lease (readiness: writer_standby).
func (r Reader) Of() query.Status {
	ms := r.Mirror.Stats()
	out := query.Status{Network: network.Name(r.Magic), NetworkMagic: r.Magic, Version: r.Version, Role: config.RoleReader,
		HistorySeq: r.Handle.Head(), ProjectionError: r.View.LastError(), WriterLease: leaseRead(r.Watch.View(), time.Now())}
	rs := &query.ReaderStatus{Head: out.HistorySeq, Listening: ms.Listening.Load(), Notices: ms.Notices.Load(), Polls: ms.Polls.Load()}
	if p := ms.Writer.Load(); p != nil {
		out.NodeTip, out.Committed, out.Follower = p.Tip, p.Committed, p.Committed
		rs.WriterHead = p.Head
	}
	if e := ms.ReadError.Load(); e != nil {
		rs.ReadError, out.NodeError = *e, *e
	}
	out.Connected = rs.ReadError == ""
	if out.NodeTip.Point.Slot > 0 {
		out.SyncProgress = min(1, float64(out.Committed.Slot)/float64(out.NodeTip.Point.Slot))
	}
	if out.NodeTip.BlockNo > out.Committed.BlockNo {
		out.BlocksBehind = out.NodeTip.BlockNo - out.Committed.BlockNo
	}
	if r.Mirror.Replica() {
		rh := ms.ReadHead.Load()
		rs.Replica = &query.ReplicaStatus{Head: rh, LagSeqs: rs.WriterHead - rh, LagBytes: ms.LagBytes.Load()}
	}
	out.Reader = rs
	if r.Standby != nil {
		out.Role = r.StandbyOf
		out.WriterLease.Writer, out.WriterLease.Since = true, r.Standby.Since()
	}
	return out
}

// ownLease is a writer's own lease: the wait's start until it holds it.
func ownLease(l *storage.Lease) *query.WriterLease {
	out := &query.WriterLease{Writer: true, Since: l.Since()}
	if !l.Acquired() {
		return out
	}
	r, age := l.Row(), l.RenewalAge()
	out.Held, out.Lapsed, out.Known = l.Held(), l.Lapsed(), true
	out.Holder, out.Epoch, out.TTL, out.RenewedAt, out.Since = r.Holder, r.Epoch, r.TTL, r.RenewedAt, r.AcquiredAt
	out.RenewalAge, out.ExpiresIn = age, r.TTL-age
	out.SessionWatched = l.SessionLocked()
	return out
}

// leaseRead is the writer lease as a reader last read it (v; nil: not
// yet), at now.
func leaseRead(v *storage.LeaseView, now time.Time) *query.WriterLease {
	if v == nil {
		return &query.WriterLease{}
	}
	r := v.Row
	out := &query.WriterLease{Known: true, Holder: r.Holder, Epoch: r.Epoch, TTL: r.TTL, RenewedAt: r.RenewedAt,
		RenewalAge: v.RenewalAge(now), ExpiresIn: v.ExpiresIn(now), Since: r.AcquiredAt,
		SessionWatched: r.Watched(), SessionEnded: r.SessionEnded}
	if out.Expired() {
		out.Since = r.ExpiresAt
	}
	return out
}
