package history

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
)

// Handle is the read side of the history store: feeds, subscriptions and
// reads for the rest of the program. Reads go to the backend concurrently;
// only going live talks to the store actor, whichever incarnation runs.
type Handle struct {
	store   *Store
	system  *actor.ActorSystem // where subscriptions' actors run
	backend Backend
	// PageSize is how many records a catch-up read asks for.
	PageSize int
}

// NewHandle returns the handle of a store. pid, when set, is its spawned
// actor (the store also registers each incarnation itself once started).
func NewHandle(store *Store, system *actor.ActorSystem, pid *actor.PID) *Handle {
	if pid != nil {
		store.run.spawned(system, pid)
	}
	return &Handle{store: store, system: system, backend: store.backend, PageSize: 1000}
}

// Head returns the newest committed seq this process delivers from: the
// writer's head in the writer's process, a reader's own head in a reader
// (history.Mirror), which follows the writer's by a moment.
func (h *Handle) Head() int64 { return h.store.stats.Head.Load() }

// CommittedHead returns the newest seq known to be committed: Head in the
// writer's process; in a reader, the writer's head as last noticed, when
// that is further. A cursor up to it is valid here: a subscription from a
// cursor this reader has not reached yet (a client that moved from a
// reader further ahead) waits until it has.
func (h *Handle) CommittedHead() int64 {
	head := h.Head()
	if k := h.store.known; k != nil {
		head = max(head, k())
	}
	return head
}

// aheadWait is how long a feed whose cursor is beyond this process's head
// (a reader behind the writer) waits before looking again.
const aheadWait = 20 * time.Millisecond

// ahead reports whether a cursor is beyond this process's head.
func (h *Handle) ahead(c record.Cursor) bool { return max(c.Seq, c.Snapshot) > h.Head() }

// Stats returns the store's counters.
func (h *Handle) Stats() *StoreStats { return h.store.stats }

// ErrStoreStopped is returned by a feed or a subscription once the store
// has stopped for good (not while a supervisor restarts it).
var ErrStoreStopped = errors.New("history store stopped")
