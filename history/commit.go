package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
)

// The store's commits: a batch written, retried as it was tried when it
// failed, recognised when an attempt landed although it reported an
// error, and the end of a writer that must not write again.

// commit writes the batch a failed commit left (retry), then the pending
// one. A batch whose commit fails is kept as it was tried, its records and
// its checkpoint, and retried so (its credits not returned, so the
// follower stops soon); steps that come meanwhile go to a new pending
// batch. So a retry of an attempt that committed although it reported an
// error is the same batch, which landed recognises. stopping is set for
// the last commit of a writer that stops.
func (s *writer) commit(stopping bool) {
	if s.retry != nil {
		if !s.attempt(s.retry, stopping) {
			return
		}
		s.retry = nil
		if s.pending.empty() {
			return
		}
	}
	b := s.pending
	b.params.Checkpoint.Breadcrumbs = s.crumbs.Headers()
	b.params.Checkpoint.Tip = s.tip
	s.pending = &batch{}
	if !s.attempt(b, stopping) {
		s.retry = b
	}
}

// attempt commits b and reports whether it did; on success it makes the
// batch's records the committed head, releases its steps, returns its
// credits and hands its records to the live subscribers.
func (s *writer) attempt(b *batch, stopping bool) bool {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err := s.backend.Commit(ctx, &b.params)
	cancel()
	if errors.Is(err, record.ErrSeqMismatch) && s.landed(&b.params) {
		// The previous attempt committed although it reported an error
		// (a connection lost while the commit's answer was on its way).
		s.log.Info("the batch's previous attempt was committed", zap.NamedError("attempt", err))
		err = nil
	}
	if errors.Is(err, record.ErrFenced) {
		// Another process took the writer lease: this one must not write
		// again, nor retry.
		s.die(fmt.Errorf("%w: %w", ErrFenced, err), stopping)
		return false
	}
	if errors.Is(err, record.ErrSeqMismatch) {
		s.die(fmt.Errorf("%w: the stored log moved on under this process (%w); run one marlowe-follower per store", ErrAnotherWriter, err), stopping)
		return false
	}
	if err != nil {
		s.stats.CommitFailures.Add(1)
		if !s.failing {
			s.log.Error("commit failed; retrying (following pauses meanwhile)", zap.Error(err),
				zap.Int("records", len(b.params.Records)), zap.Int("blocks", b.blocks))
			s.stats.FailingSince.Store(time.Now().UnixNano())
		}
		msg := err.Error()
		s.stats.CommitError.Store(&msg)
		s.failing = true
		s.stats.Failing.Store(true)
		if !stopping {
			s.armFlush(s.cfg.RetryDelay)
		}
		return false
	}
	if s.failing {
		s.log.Info("commit succeeded again", zap.Duration("failedFor", time.Since(time.Unix(0, s.stats.FailingSince.Load()))))
		s.failing = false
		s.stats.Failing.Store(false)
		s.stats.CommitError.Store(nil)
	}
	if crumbs := b.params.Checkpoint.Breadcrumbs; len(crumbs) > 0 {
		h := crumbs[0]
		s.stats.Committed.Store(&h)
	}
	elapsed := time.Since(start)
	if s.cfg.ObserveCommit != nil {
		s.cfg.ObserveCommit(elapsed)
	}
	s.stats.Commits.Add(1)
	s.stats.CommitNanos.Add(uint64(elapsed))
	s.stats.RecordsCommitted.Add(uint64(len(b.params.Records)))
	s.stats.BlocksCommitted.Add(uint64(b.blocks))
	if n := len(b.params.Records); n > 0 {
		s.head = b.params.Records[n-1].Seq
		s.stats.Head.Store(s.head)
	}
	for _, release := range b.releases {
		release()
	}
	if !stopping {
		b.credits.Return(s.system)
	}
	s.subs.fanOut(b.params.Records, s.indexOf)
	return true
}

// landed reports whether the backend holds the batch already: its newest
// record and checkpoint are stored.
func (s *writer) landed(p *CommitParams) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := s.backend.CheckpointGet(ctx)
	if err != nil || len(p.Records) == 0 || cp.Head != p.Records[len(p.Records)-1].Seq ||
		len(cp.Breadcrumbs) == 0 || len(p.Checkpoint.Breadcrumbs) == 0 || cp.Breadcrumbs[0] != p.Checkpoint.Breadcrumbs[0] {
		return false
	}
	r, err := s.backend.RecordGet(ctx, cp.Head)
	last := p.Records[len(p.Records)-1]
	return err == nil && r.Block == last.Block && r.Kind == last.Kind && r.TxID == last.TxID && r.TxIndex == last.TxIndex
}

// die stops committing for good, reports err on Fatal and fails the writer
// with it (unless it is stopping anyway): a supervisor stops the pipeline.
// The pending batch is never committed and its credits never returned, so
// the follower stops reading.
func (s *writer) die(err error, stopping bool) {
	s.dead.Store(true)
	s.stats.CommitFailures.Add(1)
	msg := err.Error()
	s.stats.CommitError.Store(&msg)
	s.stats.Failing.Store(true)
	if s.stats.FailingSince.Load() == 0 || !s.failing {
		s.stats.FailingSince.Store(time.Now().UnixNano())
	}
	s.log.Error("commit refused: stopping", zap.Error(err))
	select {
	case s.fatal <- err:
	default:
	}
	if !stopping {
		panic(err)
	}
}
