package streaming

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// Nack backoff: after a nack the records go out again after a delay that
// doubles with each consecutive nack of the same records.
const (
	minNackDelay = 100 * time.Millisecond
	maxNackDelay = 5 * time.Second
	// replyQueue is how many acks and nacks may wait for a stream's
	// dispatcher.
	replyQueue = 16
)

// reply is an ack or a nack from a connection.
type reply struct {
	att   *attachment
	batch int64
	ack   bool
	// upTo, in an ack, acknowledges only the records up to that seq (0:
	// all).
	upTo   int64
	reason string
}

// roundTrip is a batch delivery waiting for its ack, bound to one
// attachment.
type roundTrip struct {
	att    *attachment
	number int64
	timer  *time.Timer // ack timeout, when configured
}

// dispatcher runs a stream while connections are attached: it reads the
// history through a subscription, forms batches and delivers them.
type dispatcher struct {
	st       *stream
	srv      *Server
	ctx      context.Context
	cancel   context.CancelFunc
	wake     chan struct{} // attachments changed, or drain
	replies  chan reply    // the stream's: replies outlive a dispatcher
	exited   chan struct{}
	draining atomic.Bool

	pump     *pump
	buf      []chunk
	bufLen   int
	bufSince time.Time
	pending  *pendingBatch
	inFlight *roundTrip
	// orphan is the delivery of the pending batch whose connection went
	// without a reply (nil once the batch goes out again or is done): an
	// ack of it that arrives late (posted as the connection closed, read
	// by this or the next dispatcher) still counts, as long as the batch
	// has not gone out again.
	orphan  *roundTrip
	acked   record.Cursor
	retryAt time.Time // no delivery before then (nack backoff)
	nacks   int
}

func newDispatcher(st *stream) *dispatcher {
	ctx, cancel := context.WithCancel(st.srv.ctx)
	return &dispatcher{st: st, srv: st.srv, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1),
		replies: st.replies, exited: make(chan struct{})}
}

// start runs the dispatcher; the caller holds st.mu. It returns false,
// starting nothing, once the server is shutting down.
func (d *dispatcher) start() bool {
	if !d.srv.addWork() {
		d.cancel()
		return false
	}
	d.acked = d.st.acked
	d.pending = d.st.pending
	d.orphan = d.st.orphan
	go d.run()
	return true
}

func (d *dispatcher) stop() { d.cancel() }

func (d *dispatcher) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) drain() {
	d.draining.Store(true)
	d.wakeUp()
}

func (d *dispatcher) log() *zap.Logger {
	return d.srv.log.With(zap.String("stream", d.st.name), zap.Bool("durable", d.st.durable))
}

func (d *dispatcher) run() {
	defer d.srv.wg.Done()
	defer func() {
		if d.pump != nil {
			d.pump.stop()
		}
		// An ack posted just before the dispatcher was stopped (the client
		// acked, then closed: the last connection left) still counts, or
		// the next connection would get those records again. One posted
		// after this waits in the stream's channel for the next
		// dispatcher, which takes it first (the orphan round trip).
		for done := false; !done; {
			select {
			case r := <-d.replies:
				d.handleReply(r)
			default:
				done = true
			}
		}
		d.finish()
		close(d.exited)
		d.st.dispatcherExited(d)
	}()
	d.startPump()
	// Replies posted while no dispatcher ran come first.
	for done := false; !done; {
		select {
		case r := <-d.replies:
			d.handleReply(r)
		default:
			done = true
		}
	}
	for {
		if d.draining.Load() && d.inFlight == nil {
			return
		}
		if d.ctx.Err() != nil {
			// Stopped: a connection that attached meanwhile is served by
			// the successor (dispatcherExited), which would send this one's
			// batch again.
			return
		}
		if d.pending == nil && !d.draining.Load() {
			d.form()
		}
		if d.pending != nil && d.inFlight == nil && !d.draining.Load() && !time.Now().Before(d.retryAt) {
			if d.deliver() {
				continue // broadcast: the batch is out, form the next one
			}
		}
		if !d.wait() {
			return
		}
	}
}

// startPump subscribes from the position after the last batch formed: the
// pending batch's end, else the acknowledged cursor.
func (d *dispatcher) startPump() {
	from := d.acked
	if d.pending != nil {
		from = d.pending.cursor
	}
	sub := d.srv.h.Subscribe(d.st.filter, record.From{Kind: record.FromCursor, Cursor: from})
	// Catch-up pages of about one batch keep a stream's memory small when
	// many streams catch up at once.
	sub.SetPageSize(d.st.batchSize)
	d.pump = startPump(d.ctx, &d.srv.wg, sub)
	d.buf, d.bufLen = nil, 0
}

// wait blocks until something happens; false when the dispatcher must stop.
func (d *dispatcher) wait() bool {
	var pumpCh <-chan chunk
	if d.bufLen < d.st.batchSize && d.pump != nil {
		pumpCh = d.pump.request()
	}
	var gone <-chan struct{}
	var ackTimeout <-chan time.Time
	if d.inFlight != nil {
		gone = d.inFlight.att.gone
		if d.inFlight.timer != nil {
			ackTimeout = d.inFlight.timer.C
		}
	}
	var timer <-chan time.Time
	var due time.Time
	if d.pending == nil && d.bufLen > 0 && d.st.batchTimeout > 0 {
		due = d.bufSince.Add(d.st.batchTimeout)
	}
	if d.pending != nil && d.inFlight == nil && d.retryAt.After(due) {
		due = d.retryAt
	}
	if !due.IsZero() {
		t := time.NewTimer(time.Until(due))
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-d.ctx.Done():
		return false
	case <-d.wake:
	case <-timer:
	case c := <-pumpCh:
		d.pump.taken()
		return d.received(c)
	case r := <-d.replies:
		d.handleReply(r)
	case <-gone:
		// The connection may have sent its ack just before it went: take
		// the replies already posted first.
		for d.inFlight != nil && d.inFlight.att.gone == gone {
			select {
			case r := <-d.replies:
				d.handleReply(r)
				continue
			default:
			}
			d.orphan = d.inFlight
			d.endRoundTrip("connection closed")
		}
	case <-ackTimeout:
		d.srv.m.ackTimeouts.Inc()
		a := d.inFlight.att
		_ = a.conn.q.tryPush(controlFrame(&protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeAckTimeout,
			Stream: a.name, Message: "the batch was not acknowledged in time; it goes out again"}), false)
		d.endRoundTrip("ack timeout")
	}
	return true
}

// received takes a chunk from the pump.
func (d *dispatcher) received(c chunk) bool {
	if c.err != nil {
		if d.ctx.Err() != nil || errors.Is(c.err, history.ErrStoreStopped) {
			return false
		}
		d.log().Error("reading the history failed; reading again", zap.Error(c.err), zap.Duration("after", d.srv.cfg.RetryDelay))
		d.pump.stop()
		d.pump = nil
		select {
		case <-time.After(d.srv.cfg.RetryDelay):
		case <-d.ctx.Done():
			return false
		}
		d.startPump()
		return true
	}
	if d.bufLen == 0 {
		d.bufSince = time.Now()
	}
	d.buf = append(d.buf, c)
	d.bufLen += len(c.records)
	return true
}

// form turns buffered records into the pending batch when the batch is
// full, its timeout passed, or there is no timeout.
func (d *dispatcher) form() {
	if d.bufLen == 0 {
		return
	}
	if d.bufLen < d.st.batchSize && d.st.batchTimeout > 0 && time.Since(d.bufSince) < d.st.batchTimeout {
		return
	}
	var recs []record.Record
	var cur record.Cursor
	var snapshot int64
	for len(recs) < d.st.batchSize && len(d.buf) > 0 {
		c := &d.buf[0]
		k := min(d.st.batchSize-len(recs), len(c.records))
		recs = append(recs, c.records[:k]...)
		cur = c.cursorAfter(k - 1)
		snapshot = max(snapshot, c.snapshot)
		if k == len(c.records) {
			d.buf = d.buf[1:]
		} else {
			c.records = c.records[k:]
		}
	}
	d.bufLen -= len(recs)
	d.bufSince = time.Now()
	d.pending = &pendingBatch{records: recs, cursor: cur, snapshot: snapshot}
	d.nacks = 0
}

// deliver sends the pending batch: in ack mode to the next attachment in
// turn, starting a round trip; in broadcast mode to every attachment. It
// reports whether a broadcast batch went out (there is no round trip to
// wait for then).
func (d *dispatcher) deliver() bool {
	p := d.pending
	tip := d.srv.tipJSON()
	head := d.srv.head()
	if d.st.mode == protocol.ModeBroadcast {
		return d.broadcast(p, tip, head)
	}
	// Prefer a connection with room in its queue; when none has room, wait
	// for the next one in turn (bounded: it is cut off if it does not read).
	first := d.st.next(d, nil)
	if first == nil {
		return false
	}
	number := d.nextNumber()
	for a := first; ; {
		frame := d.srv.enc.batchFrame(a.name, number, p.cursor, tip, p.sent > 0, p.records, head)
		if err := a.conn.q.tryPush(frame, true); err == nil {
			d.sent(a, number, p)
			return false
		}
		putFrameBuf(frame)
		if a = d.st.next(d, nil); a == nil || a == first {
			break
		}
	}
	a := d.st.next(d, nil)
	if a == nil {
		return false
	}
	if err := d.push(a, d.srv.enc.batchFrame(a.name, number, p.cursor, tip, p.sent > 0, p.records, head)); err == nil {
		d.sent(a, number, p)
	}
	return false
}

// push queues a frame for an attachment's connection, waiting for room;
// a connection that has no room in time is cut off as a slow consumer.
func (d *dispatcher) push(a *attachment, frame []byte) error {
	err := a.conn.q.push(d.ctx, frame, true, d.srv.cfg.WriteTimeout)
	if errors.Is(err, errQueueFull) {
		a.conn.slowConsumer()
	}
	if err != nil {
		putFrameBuf(frame)
	}
	return err
}

func (d *dispatcher) nextNumber() int64 {
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	d.st.batchNo++
	return d.st.batchNo
}

// sent records a delivery in ack mode.
func (d *dispatcher) sent(a *attachment, number int64, p *pendingBatch) {
	if p.sent > 0 {
		d.srv.m.redeliveries.Inc()
	}
	p.sent++
	d.srv.m.batchesSent.WithLabelValues(string(protocol.ModeAck)).Inc()
	d.srv.m.recordsSent.Add(float64(len(p.records)))
	rt := &roundTrip{att: a, number: number}
	d.orphan = nil
	if d.srv.cfg.AckTimeout > 0 {
		rt.timer = time.NewTimer(d.srv.cfg.AckTimeout)
	}
	d.inFlight = rt
	d.st.mu.Lock()
	d.st.inFlight, d.st.delivered = number, p.cursor
	d.st.mu.Unlock()
}

func (d *dispatcher) broadcast(p *pendingBatch, tip []byte, head int64) bool {
	atts := d.st.attachments()
	if len(atts) == 0 {
		return false
	}
	number := d.nextNumber()
	for _, a := range atts {
		if err := d.push(a, d.srv.enc.batchFrame(a.name, number, p.cursor, tip, false, p.records, head)); err != nil && d.ctx.Err() != nil {
			return false
		}
	}
	d.srv.m.batchesSent.WithLabelValues(string(protocol.ModeBroadcast)).Add(float64(len(atts)))
	d.srv.m.recordsSent.Add(float64(len(p.records) * len(atts)))
	d.st.mu.Lock()
	d.st.delivered = p.cursor
	d.st.mu.Unlock()
	d.completed(number, p)
	return true
}

// handleReply takes an ack or nack. Only the one for the round trip in
// flight, from its connection, counts; any other is ignored.
func (d *dispatcher) handleReply(r reply) {
	rt := d.inFlight
	if rt == nil && d.orphan != nil && d.orphan.att == r.att && d.orphan.number == r.batch && d.pending != nil {
		// The reply of a delivery whose connection went before it was
		// read: the batch has not gone out again, so it still counts.
		rt = d.orphan
		d.orphan = nil
		d.inFlight = rt
	}
	if rt == nil || rt.att != r.att || rt.number != r.batch {
		d.srv.m.staleAcks.Inc()
		d.log().Debug("ignoring an ack or nack of a batch not in flight", zap.Int64("batch", r.batch),
			zap.Uint64("connection", r.att.conn.id))
		return
	}
	if r.ack {
		d.srv.m.acks.Inc()
		d.clearRoundTrip()
		done, rest := d.pending.split(r.upTo)
		if done == nil { // an ack of none of its records
			d.log().Debug("a partial ack acknowledged no record; the batch goes out again", zap.Int64("batch", r.batch))
			return
		}
		d.completed(rt.number, done)
		if rest != nil {
			// The records after upTo go out again at once, in a new batch.
			d.pending = rest
			d.st.mu.Lock()
			d.st.pending = rest
			d.st.mu.Unlock()
		}
		return
	}
	d.srv.m.nacks.Inc()
	d.nacks++
	delay := min(minNackDelay<<min(d.nacks-1, 16), maxNackDelay)
	d.retryAt = time.Now().Add(delay)
	d.log().Info("batch refused by the client; it goes out again", zap.Int64("batch", r.batch),
		zap.String("reason", r.reason), zap.Duration("after", delay))
	d.clearRoundTrip()
}

// endRoundTrip ends the round trip in flight without an ack: its records
// go out again, to the next connection in turn.
func (d *dispatcher) endRoundTrip(why string) {
	d.log().Debug("round trip ended without an ack; the records go out again", zap.String("why", why),
		zap.Int64("batch", d.inFlight.number))
	d.clearRoundTrip()
}

func (d *dispatcher) clearRoundTrip() {
	if d.inFlight != nil && d.inFlight.timer != nil {
		d.inFlight.timer.Stop()
	}
	d.inFlight = nil
	d.st.mu.Lock()
	d.st.inFlight = 0
	d.st.mu.Unlock()
}

// completed moves the acknowledged position past a batch (and stores it
// for a durable stream).
func (d *dispatcher) completed(number int64, p *pendingBatch) {
	d.pending = nil
	d.orphan = nil
	d.acked = p.cursor
	d.retryAt = time.Time{}
	d.st.mu.Lock()
	d.st.acked, d.st.pending = p.cursor, nil
	d.st.records += int64(len(p.records))
	d.st.mu.Unlock()
	if !d.st.durable {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := d.srv.store.StreamAck(ctx, &streamstore.StreamAckParams{Name: d.st.name, Cursor: p.cursor.String(),
		Batch: number, Records: int64(len(p.records))})
	switch {
	case err == nil:
	case errors.Is(err, streamstore.ErrNotFound):
		d.log().Info("the durable stream was deleted")
		d.cancel()
	default:
		d.srv.m.storeFailures.Inc()
		d.log().Error("storing the acknowledged cursor failed; a restart would deliver these records again",
			zap.Error(err), zap.String("cursor", p.cursor.String()))
	}
}

// finish leaves the dispatcher's position in the stream for the next one.
func (d *dispatcher) finish() {
	if d.inFlight != nil {
		// Stopped with a round trip in flight (its connection left, or the
		// server stops): its ack may still arrive, for the next dispatcher.
		d.orphan = d.inFlight
		d.clearRoundTrip()
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	d.st.acked = d.acked
	d.st.pending = d.pending
	d.st.orphan = d.orphan
}
