package chainsync

import (
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
)

// Progress is the follower's position and counters, safe to read from any
// goroutine (the status endpoint, metrics, progress logs).
type Progress struct {
	mu sync.Mutex
	s  ProgressSnapshot
}

// ProgressSnapshot is a copy of the progress at one moment.
type ProgressSnapshot struct {
	Connected bool
	LastError string
	Attempts  uint64
	// Handshake is the newest connection attempt's handshake failure, while
	// no attempt since got further or failed otherwise; nil else.
	Handshake *HandshakeFailure
	// HandshakeFailures counts failed handshakes by reason (HandshakeReasons).
	HandshakeFailures map[string]uint64
	// Waiting is set while the node's tip is behind the follower's point
	// and the follower waits for it; nil else.
	Waiting *NodeWait
	// Diverged is set once following stopped because the node's chain and
	// the stored history part: the operator's decision is needed.
	Diverged  *Divergence
	Point     chain.BlockHeader // the newest block delivered downstream
	Tip       chain.Tip         // the node's tip, from the newest message
	TipSeenAt time.Time

	Blocks         uint64 // blocks rolled forward
	Bytes          uint64 // raw bytes of those blocks
	Decoded        uint64 // blocks whose transactions were decoded
	MarloweTxs     uint64
	DecodeFailures uint64
	Rollbacks      uint64
	LastRollback   uint64 // depth of the newest rollback in blocks
}

// HandshakeFailure is a failed handshake as the progress keeps it.
type HandshakeFailure struct {
	Reason  string // one of HandshakeReasons
	Message string
	At      time.Time
}

// NodeWait is the follower waiting for a node whose tip is behind its point.
type NodeWait struct {
	NodeTip chain.Tip         // the node's tip at the newest poll
	Point   chain.BlockHeader // the follower's point
	Since   time.Time         // the first poll that found the node behind
	Polls   uint64
}

// BlocksBehind is how many blocks the node is behind the follower.
func (w *NodeWait) BlocksBehind() uint64 {
	if w.NodeTip.BlockNo >= w.Point.BlockNo {
		return 0
	}
	return w.Point.BlockNo - w.NodeTip.BlockNo
}

// Divergence is why following stopped for the operator.
type Divergence struct {
	Reason string
	Action string // what to run
	At     time.Time
}

// Snapshot returns the current progress.
func (p *Progress) Snapshot() ProgressSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.s
	s.HandshakeFailures = maps.Clone(p.s.HandshakeFailures)
	return s
}

// Fraction returns how far the follower is: our slot over the tip's slot,
// 0..1: 0 while the node's tip is not known, 1 at the tip (an empty
// chain's too).
func (s ProgressSnapshot) Fraction() float64 {
	if s.Tip.Point.Slot == 0 {
		if !s.TipSeenAt.IsZero() {
			return 1 // the node's chain is empty: all of it is followed
		}
		return 0 // the node's tip is not known yet
	}
	return min(float64(s.Point.Slot)/float64(s.Tip.Point.Slot), 1)
}

// BlocksBehind is how many blocks the follower is behind the node's tip.
func (s ProgressSnapshot) BlocksBehind() uint64 {
	if s.Tip.BlockNo <= s.Point.BlockNo {
		return 0
	}
	return s.Tip.BlockNo - s.Point.BlockNo
}

func (p *Progress) setConnected(up bool, lastErr string) {
	p.mu.Lock()
	p.s.Connected = up
	if lastErr != "" {
		p.s.LastError = lastErr
	}
	if up {
		p.s.Handshake = nil
		p.s.Waiting = nil
	}
	p.mu.Unlock()
}

func (p *Progress) setWaiting(e *NodeBehindError) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.Connected = false
	p.s.Handshake = nil
	p.s.LastError = e.Error()
	p.s.Tip, p.s.TipSeenAt = e.NodeTip, time.Now()
	w := &NodeWait{NodeTip: e.NodeTip, Point: e.Point, Since: time.Now(), Polls: 1}
	if old := p.s.Waiting; old != nil {
		w.Since, w.Polls = old.Since, old.Polls+1
	}
	p.s.Waiting = w
}

func (p *Progress) setDiverged(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.Connected = false
	p.s.Waiting = nil
	p.s.LastError = err.Error()
	p.s.Diverged = &Divergence{Reason: err.Error(), Action: ResetAction, At: time.Now()}
}

// failed records a failed or lost connection.
func (p *Progress) failed(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s.Connected = false
	p.s.LastError = err.Error()
	p.s.Handshake = nil
	var he *HandshakeError
	if errors.As(err, &he) {
		p.s.Handshake = &HandshakeFailure{Reason: he.Reason, Message: he.Error(), At: time.Now()}
		if p.s.HandshakeFailures == nil {
			p.s.HandshakeFailures = map[string]uint64{}
		}
		p.s.HandshakeFailures[he.Reason]++
	}
}

func (p *Progress) attempt() {
	p.mu.Lock()
	p.s.Attempts++
	p.mu.Unlock()
}

func (p *Progress) setTip(t chain.Tip) {
	p.mu.Lock()
	p.s.Tip, p.s.TipSeenAt = t, time.Now()
	p.mu.Unlock()
}

func (p *Progress) setPoint(h chain.BlockHeader) {
	p.mu.Lock()
	p.s.Point = h
	p.mu.Unlock()
}

type classifyStatsDelta struct{ failures uint64 }

func (p *Progress) count(d classifyStatsDelta) {
	p.mu.Lock()
	p.s.DecodeFailures += d.failures
	p.mu.Unlock()
}

func (p *Progress) forward(ev *classify.RollForward, size int) {
	p.mu.Lock()
	p.s.Point = ev.Header
	p.s.Blocks++
	p.s.Bytes += uint64(size)
	if ev.Decoded {
		p.s.Decoded++
	}
	p.s.MarloweTxs += uint64(len(ev.Txs))
	p.s.DecodeFailures += uint64(len(ev.Failures))
	p.mu.Unlock()
}

func (p *Progress) rolledBack(to chain.Point, depth uint64) {
	p.mu.Lock()
	p.s.Point = chain.BlockHeader{Slot: to.Slot, Hash: to.Hash, BlockNo: p.s.Point.BlockNo - min(depth, p.s.Point.BlockNo)}
	p.s.Rollbacks++
	p.s.LastRollback = depth
	p.mu.Unlock()
}
