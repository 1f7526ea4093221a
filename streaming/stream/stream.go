package stream

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// Nack backoff: after a nack the records go out again after a delay that
// doubles with each consecutive nack of the same records.
const (
	minNackDelay = 100 * time.Millisecond
	maxNackDelay = 5 * time.Second
)

// Actor is a stream: an ephemeral subscription (one connection's, it
// stops when that connection leaves) or a durable stream (it outlives its
// connections: any number may attach, and its batches go to them in turn).
// It is a child of the server actor and holds the round trip: the batch
// formed and not yet acknowledged (pending), the delivery of it waiting
// for its ack (inFlight), bound to one connection actor, which the stream
// watches: the moment that actor stops, the round trip ends and the batch
// goes to the next connection, now or when one attaches. Nothing is ever
// queued for a connection that is not there (the failure of the FireFly
// seed: shared/seeds/003_f4905808e4fe0f24.txt).
//
// Every field is the actor's own, changed only in Receive. The stream
// reads the history through a history.Feed (catch-up pages it reads in
// Receive, live batches the store sends to its mailbox) and never holds
// more than about a batch besides the pending one: when its buffer is full
// it closes the feed and opens it again, from where the buffer ends, once
// there is room.
//
// The round trip of a durable stream starts in deliver and ends in
// completed, endRoundTrip or a nack: the one place a lock shared by
// several processes serving one durable stream would gate.
type Actor struct {
	// behavior is the stream's state (states.go): running, holding,
	// draining or closed.
	behavior actor.Behavior

	d    *Deps
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
	stats        *atomic.Pointer[Stats] // published for the server's readers

	self *actor.PID
	sys  *actor.ActorSystem

	atts []*attachment
	rr   int // round-robin position among atts

	acked     record.Cursor
	delivered record.Cursor // the cursor after the newest batch sent
	batchNo   int64         // the last batch number used
	records   int64         // records acknowledged
	pending   *pendingBatch
	inFlight  *roundTrip
	// orphan is the delivery of the pending batch whose connection went
	// without a reply (nil once the batch goes out again or is done): an
	// ack of it that arrives late still counts, as long as the batch has
	// not gone out again.
	orphan  *roundTrip
	retryAt time.Time // no delivery before then (nack backoff)
	nacks   int
	// bcast are the connections a broadcast batch was handed to that have
	// not queued it yet: the next one waits for them.
	bcast map[string]bool

	feed       *history.Feed
	feedGen    int
	pullQueued bool
	read       readState
	buf        []chunk
	bufLen     int
	bufSince   time.Time
	bufEnd     record.Cursor // the position after the last record received

	due      time.Time // when the timer fires (zero: not armed)
	timer    *time.Timer
	timerGen int

	// lease is this process's hold on the stream's round-trip lease
	// (shared streams only: Config.LeaseHolder set); renewal renews it
	// while held (renewDue: once the store under way has answered).
	lease    leaseState
	renewal  *time.Timer
	leaseGen int
	renewDue bool
	// work runs the lease SQL and the acknowledgement stores.
	work *dbWorker

	// unstored is the newest acknowledgement not known to be stored: its
	// store is under way (storeBusy), or failed (the database away) and
	// is tried again with backoff (storeTries, the retry timer of
	// generation storeGen), and the records of later acks join it. A
	// shared stream sends nothing more meanwhile and keeps its lease: its
	// in-memory cursor is the truth, never the older one the database
	// still holds.
	unstored   *streamstore.StreamAckParams
	storeBusy  bool
	storeTries int
	storeGen   int
	// storedAt is the newest cursor known to be in the database; sentHigh
	// the newest seq sent to any connection. A connection that got records
	// after stored would see them again if the lease were lost (another
	// process goes on from the database's cursor): it gets lease_lost and
	// is closed. Batches of records up to sentHigh that go out again are
	// marked redelivered.
	storedAt record.Cursor
	sentHigh int64
}

// Stats is what a stream publishes of itself after each message: read by
// the server's HTTP API and metrics, written only by the actor.
type Stats struct {
	Acked       record.Cursor
	Connections int
	InFlight    int64 // the number of the batch in flight (0: none)
	Running     bool  // a connection is attached
}

// attachment is one connection's subscription to a stream, under the name
// the client gave it.
type attachment struct {
	conn    *actor.PID
	id      uint64
	q       wire.Queue // the subscription's way into the connection's send queue
	name    string
	closing bool // the connection is ending: nothing more goes to it
	// last is the newest seq sent on this connection: seqs only increase
	// along a connection.
	last int64
}

// roundTrip is a batch delivery waiting for its ack, bound to one
// connection.
type roundTrip struct {
	conn   *actor.PID
	id     uint64
	name   string
	number int64
	timer  *time.Timer // ack timeout, when configured
}

// Messages a stream actor sends itself.
type (
	pullMsg    struct{ gen int }
	reopenMsg  struct{}
	dueMsg     struct{ gen int }
	ackTimeout struct{ number int64 }
	resumeMsg  struct{}
	// renewLease: time to renew the round-trip lease (of generation gen).
	renewLease struct{ gen int }
	// storeAgain: time to store the unstored acknowledgement again.
	storeAgain struct{ gen int }
)

func (st *Actor) log() *zap.Logger {
	return st.d.Log.With(zap.String("stream", st.name), zap.Bool("durable", st.durable))
}

// closeStream ends a deleted durable stream: its connections are told.
func (st *Actor) closeStream(c actor.Context, msg string) {
	for _, a := range st.atts {
		c.Unwatch(a.conn)
		wire.Tell(st.sys, a.conn, &wire.DropSub{Stream: st.self, Name: a.name, Code: protocol.CodeStreamDeleted, Msg: msg})
	}
	st.atts = nil
	st.close(c)
}

// stopping lets go of what the stream holds as it stops.
func (st *Actor) stopping(c actor.Context) {
	for _, a := range st.atts {
		c.Unwatch(a.conn) // their Terminated would find no one
	}
	st.stopFeed()
	if st.timer != nil {
		st.timer.Stop()
	}
	if st.inFlight != nil && st.inFlight.timer != nil {
		st.inFlight.timer.Stop()
	}
	if st.unstored != nil {
		st.log().Error("the acknowledged cursor of the durable stream could not be stored before it stopped; "+
			"a restart delivers the records after the stored one again", zap.String("cursor", st.unstored.Cursor))
	}
	st.stopStoreRetry()
	st.releaseLease()
	st.stats.Store(&Stats{Acked: st.acked})
}

// attach adds a connection and tells it the subscription is set up.
func (st *Actor) attach(c actor.Context, m *wire.Attach) {
	c.Watch(m.Conn)
	st.atts = append(st.atts, &attachment{conn: m.Conn, id: m.ID, q: m.Queue, name: m.Name})
	tip := st.d.Tips.Tip()
	wire.Tell(st.sys, m.Conn, &wire.Attached{Stream: st.self, Name: m.Name, Durable: st.durable, Owner: st.owner,
		Frame: wire.ControlFrame(&protocol.Frame{Type: protocol.TypeSubscribed, Stream: m.Name, Durable: st.durable, Mode: st.mode,
			Cursor: st.acked.String(), BatchSize: st.batchSize, BatchTimeout: protocol.Duration(st.batchTimeout),
			Filter: &st.wire, Tip: &tip})})
	if len(st.atts) == 1 {
		// The first connection: read from the position after the last
		// batch formed (the pending one's end, else the acknowledged
		// cursor); requestPull opens the feed.
		st.bufEnd = st.acked
		if st.pending != nil {
			st.bufEnd = st.pending.cursor
		}
		st.buf, st.bufLen = nil, 0
	}
}

// What remove did besides taking the connection off.
type removal int

const (
	removeKept     removal = iota
	removeOrphaned         // the round trip was bound to the connection: its replies are read before the next delivery
	removeEnded            // the last connection of an ephemeral stream: the stream stops
)

// remove takes a connection off the stream. The round trip bound to it,
// if any, ends at once. When no connection is left the stream stops
// reading; an ephemeral stream is then over.
func (st *Actor) remove(c actor.Context, conn *actor.PID) removal {
	res := removeKept
	for i, a := range st.atts {
		if !a.conn.Equal(conn) {
			continue
		}
		st.atts = append(st.atts[:i:i], st.atts[i+1:]...)
		break
	}
	delete(st.bcast, conn.Id)
	if rt := st.inFlight; rt != nil && rt.conn.Equal(conn) {
		// The connection may have acknowledged just before it went: its
		// replies are in the mailbox already, ahead of resume.
		st.orphan = rt
		st.endRoundTrip("connection closed")
		wire.Tell(st.sys, st.self, &resumeMsg{})
		res = removeOrphaned
	}
	if len(st.atts) > 0 {
		return res
	}
	st.stopFeed()
	st.buf, st.bufLen = nil, 0
	if !st.durable {
		st.close(c)
		return removeEnded
	}
	return res
}

// step moves a running stream on after a message: forms and delivers the
// next batch, gives the lease back when no batch is in flight, and
// settles.
func (st *Actor) step(c actor.Context) {
	st.form()
	for st.pending != nil && st.inFlight == nil && !st.storing() && !time.Now().Before(st.retryAt) {
		if !st.deliver(c) {
			break
		}
		st.form() // broadcast: the batch is out, form the next one
	}
	if st.lease == leaseHeld && st.inFlight == nil && st.unstored == nil {
		// The lease is held only while a batch is in flight (and while a
		// departed connection's last replies are read, or its ack is not
		// stored yet): another process's connection may take the stream
		// now.
		st.releaseLease()
	}
	st.settle()
}

// settle reads more, arms the timer and publishes the stream's state.
func (st *Actor) settle() {
	st.requestPull()
	st.arm()
	st.publish()
}

func (st *Actor) publish() {
	s := Stats{Acked: st.acked, Connections: len(st.atts), Running: len(st.atts) > 0}
	if st.inFlight != nil {
		s.InFlight = st.inFlight.number
	}
	if old := st.stats.Load(); old == nil || *old != s {
		st.stats.Store(&s)
	}
}

// arm sets the timer for the next batch timeout or nack backoff.
func (st *Actor) arm() {
	var due time.Time
	if st.pending == nil && st.bufLen > 0 && st.batchTimeout > 0 {
		due = st.bufSince.Add(st.batchTimeout)
	}
	if st.pending != nil && st.inFlight == nil && st.retryAt.After(due) {
		due = st.retryAt
	}
	if due.Equal(st.due) {
		return
	}
	if st.timer != nil {
		st.timer.Stop()
	}
	st.timerGen++
	st.due = due
	if due.IsZero() {
		return
	}
	sys, self, gen := st.sys, st.self, st.timerGen
	st.timer = time.AfterFunc(time.Until(due), func() { wire.Tell(sys, self, &dueMsg{gen: gen}) })
}

// form turns buffered records into the pending batch when the batch is
// full, its timeout passed, or there is no timeout.
func (st *Actor) form() {
	if st.pending != nil || st.bufLen == 0 {
		return
	}
	if st.bufLen < st.batchSize && st.batchTimeout > 0 && time.Since(st.bufSince) < st.batchTimeout {
		return
	}
	var recs []record.Record
	var json [][]byte // nil unless a chunk brought shared encodings
	var cur record.Cursor
	var snapshot int64
	if len(st.buf) == 1 && len(st.buf[0].records) <= st.batchSize {
		// One chunk that fits (a catch-up read of the room in the batch):
		// it is the batch, without a copy.
		c := st.buf[0]
		st.buf, st.bufLen = nil, 0
		st.bufSince = time.Now()
		st.pending = &pendingBatch{records: c.records, json: c.json, cursor: c.end, snapshot: c.snapshot}
		st.nacks = 0
		return
	}
	for len(recs) < st.batchSize && len(st.buf) > 0 {
		c := &st.buf[0]
		k := min(st.batchSize-len(recs), len(c.records))
		if c.json != nil && json == nil {
			json = make([][]byte, len(recs), st.batchSize)
		}
		if json != nil {
			if c.json != nil {
				json = append(json, c.json[:k]...)
			} else {
				json = append(json, make([][]byte, k)...)
			}
		}
		recs = append(recs, c.records[:k]...)
		cur = c.cursorAfter(k - 1)
		snapshot = max(snapshot, c.snapshot)
		if k == len(c.records) {
			st.buf[0] = chunk{}
			st.buf = st.buf[1:]
		} else {
			c.records = c.records[k:]
			if c.json != nil {
				c.json = c.json[k:]
			}
		}
	}
	st.bufLen -= len(recs)
	st.bufSince = time.Now()
	st.pending = &pendingBatch{records: recs, json: json, cursor: cur, snapshot: snapshot}
	st.nacks = 0
}
