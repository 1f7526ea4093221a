package streaming

import (
	"sync"
	"time"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// stream is a subscription's server-side state. An ephemeral stream belongs
// to one connection and ends with it. A durable stream outlives its
// connections: any number may attach to it, and its batches go to them in
// turn, one round trip at a time.
//
// The connections attached to a stream are its attachments. While a stream
// has any, one dispatcher goroutine runs it; when the last one leaves the
// dispatcher stops and leaves the stream's position (its acknowledged
// cursor and the batch in flight, if any) in the stream, for the next
// dispatcher. A round trip is bound to one attachment: the moment that
// attachment goes, the round trip ends and its records are delivered again
// to the next attachment, now or when one arrives. Nothing is ever queued
// for a connection that is not there (the failure of the FireFly seed:
// shared/seeds/003_f4905808e4fe0f24.txt).
type stream struct {
	srv  *Server
	name string
	// owner is the name of the credential a durable stream belongs to
	// ("" when it was created on an open server).
	owner        string
	durable      bool
	mode         protocol.Mode
	filter       record.Filter
	wire         protocol.Filter
	batchSize    int
	batchTimeout time.Duration
	// replies carries acks and nacks from connections to whichever
	// dispatcher runs the stream, now or next: one posted as a dispatcher
	// stops is not lost with it.
	replies chan reply

	mu       sync.Mutex
	atts     []*attachment
	rr       int // round-robin position among atts
	disp     *dispatcher
	closed   bool // deleted, or an ephemeral stream whose connection left
	acked    record.Cursor
	batchNo  int64 // the last batch number used
	records  int64 // records acknowledged
	pending  *pendingBatch
	orphan   *roundTrip // a stopped dispatcher's (dispatcher.orphan)
	inFlight int64      // the batch number of the round trip in flight, 0 when none
	// delivered is the cursor after the newest batch sent.
	delivered record.Cursor
}

// attachment is one connection's subscription to a stream, under the name
// the client gave it.
type attachment struct {
	conn     *conn
	name     string
	st       *stream
	gone     chan struct{}
	goneOnce sync.Once
}

func (a *attachment) leave() { a.goneOnce.Do(func() { close(a.gone) }) }

// post hands an ack or nack to the stream's dispatcher (or, when none
// runs, to the next one), waiting at most timeout for room; false when
// there was none (the reply is dropped and counted as stale).
func (st *stream) post(r reply, timeout time.Duration) bool {
	select {
	case st.replies <- r:
		return true
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case st.replies <- r:
		return true
	case <-t.C:
		return false
	}
}

// attach adds a connection to the stream and makes sure a dispatcher runs.
// It returns "" or the error code of why it could not: the durable stream
// was deleted, or the server is shutting down.
func (st *stream) attach(a *attachment) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return protocol.CodeStreamDeleted
	}
	if st.disp == nil {
		d := newDispatcher(st)
		if !d.start() {
			return protocol.CodeShuttingDown
		}
		st.disp = d
	} else {
		st.disp.wakeUp()
	}
	st.atts = append(st.atts, a)
	return ""
}

// detach removes a connection. The round trip bound to it, if any, ends at
// once. When no connection is left the dispatcher stops; an ephemeral
// stream is then over.
func (st *stream) detach(a *attachment) {
	a.leave()
	st.mu.Lock()
	for i, x := range st.atts {
		if x == a {
			st.atts = append(st.atts[:i:i], st.atts[i+1:]...)
			break
		}
	}
	over := false
	if len(st.atts) == 0 {
		over = !st.durable && !st.closed
		if !st.durable {
			st.closed = true
		}
		if st.disp != nil {
			st.disp.stop()
		}
	}
	st.mu.Unlock()
	if over {
		st.srv.forgetEphemeral(st)
	}
}

// next returns the attachment whose turn it is, skipping those that are
// gone, or nil when there is none. skip, when set, is passed over unless
// it is the only one. A stopped dispatcher d gets none: the connections
// that attach after it stopped (detach stops it under st.mu) belong to its
// successor, which would deliver its batch again.
func (st *stream) next(d *dispatcher, skip *attachment) *attachment {
	st.mu.Lock()
	defer st.mu.Unlock()
	if d.ctx.Err() != nil {
		return nil
	}
	n := len(st.atts)
	for i := range n {
		a := st.atts[(st.rr+i)%n]
		if a == skip && n > 1 {
			continue
		}
		select {
		case <-a.gone:
			continue
		default:
		}
		if a.conn.closing.Load() && n > 1 {
			continue // it is going: nothing more is sent to it
		}
		st.rr = (st.rr + i + 1) % n
		return a
	}
	return nil
}

// attachments returns the current attachments.
func (st *stream) attachments() []*attachment {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]*attachment(nil), st.atts...)
}

// running reports whether a dispatcher runs the stream.
func (st *stream) running() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.disp != nil
}

// positions returns the acknowledged cursor and the cursor after the
// newest batch sent.
func (st *stream) positions() (acked, delivered record.Cursor) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.acked, st.delivered
}

// dispatcherExited takes a stopped dispatcher's state back and starts a
// successor when connections attached meanwhile.
func (st *stream) dispatcherExited(d *dispatcher) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.disp != d {
		return
	}
	st.disp = nil
	st.inFlight = 0
	if st.closed || len(st.atts) == 0 || st.srv.isClosing() {
		return
	}
	if d := newDispatcher(st); d.start() {
		st.disp = d
	}
}

// close ends the stream for good (a deleted durable stream): every
// attachment is dropped and the dispatcher stops. It returns the
// attachments it dropped.
func (st *stream) close() []*attachment {
	st.mu.Lock()
	atts := st.atts
	st.atts = nil
	st.closed = true
	d := st.disp
	st.mu.Unlock()
	for _, a := range atts {
		a.leave()
	}
	if d != nil {
		d.stop()
		<-d.exited
	}
	return atts
}

// drain asks the dispatcher to finish its round trip in flight and stop.
func (st *stream) drain() *dispatcher {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.disp != nil {
		st.disp.drain()
	}
	return st.disp
}
