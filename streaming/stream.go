package streaming

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
	// replyQueue is how many acks and nacks of one subscription a
	// connection may have handed to its stream and not seen taken.
	replyQueue = 16
)

// streamActor is a stream: an ephemeral subscription (one connection's, it
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
type streamActor struct {
	// behavior is the stream's state (streamstates.go): running,
	// holding, draining or closed.
	behavior actor.Behavior

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
	stats        *atomic.Pointer[streamStats] // published for the server's readers

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

// streamStats is what a stream publishes of itself after each message:
// read by the server's HTTP API and metrics, written only by the actor.
type streamStats struct {
	acked       record.Cursor
	connections int
	inFlight    int64
	running     bool
}

// attachment is one connection's subscription to a stream, under the name
// the client gave it.
type attachment struct {
	conn    *actor.PID
	id      uint64
	q       wire.Queue // the connection's: read only for whether it has room
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

func (st *streamActor) log() *zap.Logger {
	return st.srv.log.With(zap.String("stream", st.name), zap.Bool("durable", st.durable))
}

// closeStream ends a deleted durable stream: its connections are told.
func (st *streamActor) closeStream(c actor.Context, msg string) {
	for _, a := range st.atts {
		c.Unwatch(a.conn)
		wire.Tell(st.sys, a.conn, &wire.DropSub{Stream: st.self, Name: a.name, Code: protocol.CodeStreamDeleted, Msg: msg})
	}
	st.atts = nil
	st.close(c)
}

// stopping lets go of what the stream holds as it stops.
func (st *streamActor) stopping(c actor.Context) {
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
	st.stats.Store(&streamStats{acked: st.acked})
}

// attach adds a connection and tells it the subscription is set up.
func (st *streamActor) attach(c actor.Context, m *wire.Attach) {
	c.Watch(m.Conn)
	st.atts = append(st.atts, &attachment{conn: m.Conn, id: m.ID, q: m.Queue, name: m.Name})
	tip := st.srv.tip()
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
func (st *streamActor) remove(c actor.Context, conn *actor.PID) removal {
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
func (st *streamActor) step(c actor.Context) {
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
func (st *streamActor) settle() {
	st.requestPull()
	st.arm()
	st.publish()
}

func (st *streamActor) publish() {
	s := streamStats{acked: st.acked, connections: len(st.atts), running: len(st.atts) > 0}
	if st.inFlight != nil {
		s.inFlight = st.inFlight.number
	}
	if old := st.stats.Load(); old == nil || *old != s {
		st.stats.Store(&s)
	}
}

// arm sets the timer for the next batch timeout or nack backoff.
func (st *streamActor) arm() {
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
func (st *streamActor) form() {
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

// deliver hands the pending batch to connections: in ack mode to the next
// one in turn (one with room in its queue first), starting a round trip;
// in broadcast mode to every one. It reports whether a batch went out.
func (st *streamActor) deliver(c actor.Context) bool {
	p := st.pending
	tip := st.srv.tipJSON()
	head := st.srv.head()
	if st.mode == protocol.ModeBroadcast {
		return st.broadcast(c, p, tip, head)
	}
	a := st.next()
	if a == nil {
		return false
	}
	if st.shared() && st.lease != leaseHeld {
		st.takeLease() // the answer steps the stream on
		return false
	}
	for a != nil && p.sent == 0 && p.records[0].Seq <= a.last {
		// The stream went back behind what this connection has (a lease
		// lost: another process goes on from the database's cursor): the
		// connection must not see those seqs again.
		st.loseConnection(a)
		a = st.next()
	}
	if a == nil {
		return false
	}
	st.batchNo++
	number := st.batchNo
	redelivered := p.sent > 0 || p.records[0].Seq <= st.sentHigh
	parts := wire.BatchFrameParts(a.name, number, p.cursor, tip, redelivered, st.recordsJSON(p, head))
	parts.Records, parts.Snapshot, parts.Cursor = p.records, p.snapshot, p.cursor
	wire.Tell(st.sys, a.conn, &wire.Deliver{Stream: st.self, Name: a.name, Number: number, Parts: parts})
	if redelivered {
		st.srv.m.redeliveries.Inc()
	}
	st.sent(a, p)
	st.srv.m.batchesSent.WithLabelValues(string(protocol.ModeAck)).Inc()
	st.srv.m.recordsSent.Add(float64(len(p.records)))
	rt := &roundTrip{conn: a.conn, id: a.id, name: a.name, number: number}
	st.orphan = nil
	if d := st.srv.cfg.AckTimeout; d > 0 {
		sys, self := st.sys, st.self
		rt.timer = time.AfterFunc(d, func() { wire.Tell(sys, self, &ackTimeout{number: number}) })
	}
	st.inFlight = rt
	st.delivered = p.cursor
	return true
}

// recordsJSON returns the JSON of the pending batch's records, shared by the
// frames that carry it (made once per batch, kept while it is pending).
func (st *streamActor) recordsJSON(p *pendingBatch, head int64) [][]byte {
	if p.wire == nil {
		p.wire = st.srv.enc.SharedRecords(p.records, p.json, head)
	}
	return p.wire
}

// next returns the attachment whose turn it is: the first in turn with
// room in its queue, else the next in turn (its connection waits for room
// or cuts the client off); never one whose connection is ending.
func (st *streamActor) next() *attachment {
	n := len(st.atts)
	var first *attachment
	firstAt := 0
	for i := range n {
		k := (st.rr + i) % n
		a := st.atts[k]
		if a.closing {
			continue
		}
		if first == nil {
			first, firstAt = a, k
		}
		if a.q.HasRoom() {
			st.rr = (k + 1) % n
			return a
		}
	}
	if first != nil {
		st.rr = (firstAt + 1) % n
	}
	return first
}

func (st *streamActor) broadcast(c actor.Context, p *pendingBatch, tip []byte, head int64) bool {
	if len(st.bcast) > 0 {
		return false // a connection has not queued the last one yet
	}
	var to []*attachment
	for _, a := range st.atts {
		if !a.closing {
			to = append(to, a)
		}
	}
	if len(to) == 0 {
		return false
	}
	st.batchNo++
	number := st.batchNo
	st.bcast = make(map[string]bool, len(to))
	shared := st.recordsJSON(p, head) // one encoding for every connection's frame
	for _, a := range to {
		st.bcast[a.conn.Id] = true
		a.last = max(a.last, p.records[len(p.records)-1].Seq)
		parts := wire.BatchFrameParts(a.name, number, p.cursor, tip, false, shared)
		parts.Records, parts.Snapshot, parts.Cursor = p.records, p.snapshot, p.cursor
		wire.Tell(st.sys, a.conn, &wire.Deliver{Stream: st.self, Name: a.name, Number: number, Notify: true, Parts: parts})
	}
	st.srv.m.batchesSent.WithLabelValues(string(protocol.ModeBroadcast)).Add(float64(len(to)))
	st.srv.m.recordsSent.Add(float64(len(p.records) * len(to)))
	st.delivered = p.cursor
	st.completed(number, p)
	return true
}

// handleReply takes an ack or nack. Only the one for the round trip in
// flight, from its connection, counts; any other is ignored.
func (st *streamActor) handleReply(r *wire.Reply) {
	rt := st.inFlight
	if rt == nil && st.orphan != nil && st.orphan.conn.Equal(r.Conn) && st.orphan.number == r.Batch && st.pending != nil {
		// The reply of a delivery whose connection went before it was
		// read: the batch has not gone out again, so it still counts.
		rt = st.orphan
		st.orphan = nil
		st.inFlight = rt
	}
	if rt == nil || !rt.conn.Equal(r.Conn) || rt.number != r.Batch {
		st.srv.m.staleAcks.Inc()
		st.log().Debug("ignoring an ack or nack of a batch not in flight", zap.Int64("batch", r.Batch), zap.String("connection", r.Conn.Id))
		return
	}
	if r.Ack {
		st.srv.m.acks.Inc()
		st.clearRoundTrip()
		done, rest := st.pending.split(r.UpTo)
		if done == nil { // an ack of none of its records
			st.log().Debug("a partial ack acknowledged no record; the batch goes out again", zap.Int64("batch", r.Batch))
			return
		}
		st.completed(rt.number, done)
		if rest != nil {
			// The records after upTo go out again at once, in a new batch.
			st.pending = rest
		}
		return
	}
	st.srv.m.nacks.Inc()
	st.nacks++
	delay := min(minNackDelay<<min(st.nacks-1, 16), maxNackDelay)
	st.retryAt = time.Now().Add(delay)
	st.log().Info("batch refused by the client; it goes out again", zap.Int64("batch", r.Batch),
		zap.String("reason", r.Reason), zap.Duration("after", delay))
	st.clearRoundTrip()
}

// endRoundTrip ends the round trip in flight without an ack: its records
// go out again, to the next connection in turn.
func (st *streamActor) endRoundTrip(why string) {
	st.log().Debug("round trip ended without an ack; the records go out again", zap.String("why", why),
		zap.Int64("batch", st.inFlight.number))
	st.clearRoundTrip()
}

func (st *streamActor) clearRoundTrip() {
	if st.inFlight != nil && st.inFlight.timer != nil {
		st.inFlight.timer.Stop()
	}
	st.inFlight = nil
}

// sent records a delivery of the pending batch to a connection.
func (st *streamActor) sent(a *attachment, p *pendingBatch) {
	p.sent++
	seq := p.records[len(p.records)-1].Seq
	a.last = max(a.last, seq)
	st.sentHigh = max(st.sentHigh, seq)
}
