package service

import (
	"time"

	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/query"
)

// queryStatus is the service's state as /status and /readyz see it: the
// follower's progress (received point, connection, handshake, waiting,
// divergence), the history store's (committed point, commit failures) and
// the projection's.
func (s *Service) queryStatus(network string, magic uint32, version string, proj *contracts.Store) query.Status {
	p := s.progress.Snapshot()
	st := s.store.Stats()
	out := query.Status{
		Network: network, NetworkMagic: magic, Version: version, Connected: p.Connected,
		NodeTip: p.Tip, Follower: p.Point, SyncProgress: p.Fraction(), BlocksBehind: p.BlocksBehind(),
		HistorySeq: st.Head.Load(), ProjectionError: proj.LastError(), CommitFailures: st.CommitFailures.Load(),
		Role: s.cfg.Role,
	}
	if s.writer != nil {
		out.WriterLease = s.writer.status()
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
	if w := p.Waiting; w != nil {
		out.Waiting = &query.NodeWait{NodeTip: w.NodeTip, Point: w.Point, Since: w.Since}
	}
	if d := p.Diverged; d != nil {
		out.Diverged = &query.Divergence{Reason: d.Reason, Action: d.Action, Since: d.At}
	}
	if st.Failing.Load() {
		if msg := st.CommitError.Load(); msg != nil {
			out.CommitError = *msg
			out.CommitFailingSince = time.Unix(0, st.FailingSince.Load())
		}
	}
	return out
}

// leaseStatus is the writer lease as a reader last read it (v; nil: not
// yet), at now.
func leaseStatus(v *storage.LeaseView, now time.Time) *query.WriterLease {
	if v == nil {
		return &query.WriterLease{}
	}
	r := v.Row
	out := &query.WriterLease{Known: true, Holder: r.Holder, Epoch: r.Epoch, TTL: r.TTL, RenewedAt: r.RenewedAt,
		RenewalAge: v.RenewalAge(now), ExpiresIn: v.ExpiresIn(now), Since: r.AcquiredAt}
	if out.Expired() {
		out.Since = r.ExpiresAt
	}
	return out
}
