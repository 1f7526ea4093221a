package contracts

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// DefaultViewRefresh is how often a View reads the stored cursor.
const DefaultViewRefresh = 250 * time.Millisecond

// HeadReader is the history's head as a reader process has seen it
// (history.Handle).
type HeadReader interface{ Head() int64 }

// View is the contract projection as a reader process sees it: written
// by the writer process, read from the database. Its position is the
// projection's stored cursor, read every refresh and while a read waits
// for a seq; it never runs ahead of what the process's history has
// delivered (History), so that minSeq=N answers only once this process has
// seen seq N. The contract store's backend serves the reads themselves
// (it is a query.ContractReader).
type View struct {
	backend contractstore.Backend
	history HeadReader
	refresh time.Duration

	mu      sync.Mutex
	applied contractstore.Position
	changed chan struct{}
	lastErr atomic.Pointer[string]
	reads   atomic.Uint64

	stop chan struct{}
	done chan struct{}
}

// NewView reads the stored cursor and keeps reading it every refresh
// (DefaultViewRefresh when 0) until Close.
func NewView(ctx context.Context, backend contractstore.Backend, history HeadReader, refresh time.Duration) (*View, error) {
	if backend == nil || history == nil {
		return nil, errors.New("contracts: a view needs the contract store and the history's head")
	}
	if refresh <= 0 {
		refresh = DefaultViewRefresh
	}
	v := &View{backend: backend, history: history, refresh: refresh, changed: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := v.read(ctx); err != nil {
		return nil, err
	}
	go v.run()
	return v, nil
}

func (v *View) run() {
	defer close(v.done)
	t := time.NewTicker(v.refresh)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = v.read(ctx)
			cancel()
		}
	}
}

// read takes the stored cursor.
func (v *View) read(ctx context.Context) error {
	v.reads.Add(1)
	h, err := v.backend.HeadGet(ctx)
	if err != nil {
		msg := "reading the projection's cursor: " + err.Error()
		v.lastErr.Store(&msg)
		return err
	}
	v.lastErr.Store(nil)
	v.mu.Lock()
	if h.Seq != v.applied.Seq || h.Block != v.applied.Block {
		v.applied = h.Position
		close(v.changed)
		v.changed = make(chan struct{})
	}
	v.mu.Unlock()
	return nil
}

// Close stops the refreshing.
func (v *View) Close() {
	select {
	case <-v.stop:
	default:
		close(v.stop)
	}
	<-v.done
}

// Applied returns the stored cursor as last read.
func (v *View) Applied() contractstore.Position {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.applied
}

// LastError returns why the newest read of the cursor failed ("" when it
// succeeded).
func (v *View) LastError() string {
	if p := v.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

// Reads counts the reads of the stored cursor.
func (v *View) Reads() uint64 { return v.reads.Load() }

// viewWaitPoll is how often a waiting read reads the cursor.
const viewWaitPoll = 20 * time.Millisecond

// WaitFor waits until this process has seen seq (its history's head) and
// the stored projection has applied it, or ctx ends.
func (v *View) WaitFor(ctx context.Context, seq int64) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		v.mu.Lock()
		done, ch := v.applied.Seq >= seq, v.changed
		v.mu.Unlock()
		if done && v.history.Head() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			if !done {
				_ = v.read(ctx)
			}
			t.Reset(viewWaitPoll)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
