package stream

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// The round trip: delivering the pending batch to a connection (or, in
// broadcast mode, to all), and its ack, nack or end.

// deliver hands the pending batch to connections: in ack mode to the next
// one in turn (one with room in its queue first), starting a round trip;
// in broadcast mode to every one. It reports whether a batch went out.
// A batch frame goes into the connection's send queue through the
// subscription's outlet (wire.Queue.Offer) when it takes it at once, else
// to the connection actor (wire.Deliver), which queues it or lets it wait
// for room.
func (st *Actor) deliver(c actor.Context) bool {
	p := st.pending
	tip := st.d.Tips.JSON()
	head := st.d.History.Head()
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
	if !a.q.Offer(parts) {
		wire.Tell(st.sys, a.conn, &wire.Deliver{Stream: st.self, Name: a.name, Number: number, Parts: parts})
	}
	if redelivered {
		st.d.Metrics.Redeliveries.Inc()
	}
	st.sent(a, p)
	st.d.Metrics.BatchesSent.WithLabelValues(string(protocol.ModeAck)).Inc()
	st.d.Metrics.RecordsSent.Add(float64(len(p.records)))
	rt := &roundTrip{conn: a.conn, id: a.id, name: a.name, number: number}
	st.orphan = nil
	if d := st.d.Config.AckTimeout; d > 0 {
		sys, self := st.sys, st.self
		rt.timer = time.AfterFunc(d, func() { wire.Tell(sys, self, &ackTimeout{number: number}) })
	}
	st.inFlight = rt
	st.delivered = p.cursor
	return true
}

// recordsJSON returns the JSON of the pending batch's records, shared by the
// frames that carry it (made once per batch, kept while it is pending).
func (st *Actor) recordsJSON(p *pendingBatch, head int64) [][]byte {
	if p.wire == nil {
		p.wire = st.d.Records.SharedRecords(p.records, p.json, head)
	}
	return p.wire
}

// next returns the attachment whose turn it is: the first in turn with
// room in its queue, else the next in turn (its connection waits for room
// or cuts the client off); never one whose connection is ending.
func (st *Actor) next() *attachment {
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

func (st *Actor) broadcast(c actor.Context, p *pendingBatch, tip []byte, head int64) bool {
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
	st.bcast = nil
	shared := st.recordsJSON(p, head) // one encoding for every connection's frame
	for _, a := range to {
		a.last = max(a.last, p.records[len(p.records)-1].Seq)
		parts := wire.BatchFrameParts(a.name, number, p.cursor, tip, false, shared)
		parts.Records, parts.Snapshot, parts.Cursor = p.records, p.snapshot, p.cursor
		if a.q.Offer(parts) {
			continue
		}
		if st.bcast == nil {
			st.bcast = make(map[string]bool, len(to))
		}
		st.bcast[a.conn.Id] = true // the next batch waits until it is queued
		wire.Tell(st.sys, a.conn, &wire.Deliver{Stream: st.self, Name: a.name, Number: number, Notify: true, Parts: parts})
	}
	st.d.Metrics.BatchesSent.WithLabelValues(string(protocol.ModeBroadcast)).Add(float64(len(to)))
	st.d.Metrics.RecordsSent.Add(float64(len(p.records) * len(to)))
	st.delivered = p.cursor
	st.completed(number, p)
	return true
}

// handleReply takes an ack or nack. Only the one for the round trip in
// flight, from its connection, counts; any other is ignored.
func (st *Actor) handleReply(r *wire.Reply) {
	rt := st.inFlight
	if rt == nil && st.orphan != nil && st.orphan.conn.Equal(r.Conn) && st.orphan.number == r.Batch && st.pending != nil {
		// The reply of a delivery whose connection went before it was
		// read: the batch has not gone out again, so it still counts.
		rt = st.orphan
		st.orphan = nil
		st.inFlight = rt
	}
	if rt == nil || !rt.conn.Equal(r.Conn) || rt.number != r.Batch {
		st.d.Metrics.StaleAcks.Inc()
		st.log().Debug("ignoring an ack or nack of a batch not in flight", zap.Int64("batch", r.Batch), zap.String("connection", r.Conn.Id))
		return
	}
	if r.Ack {
		st.d.Metrics.Acks.Inc()
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
	st.d.Metrics.Nacks.Inc()
	st.nacks++
	delay := min(minNackDelay<<min(st.nacks-1, 16), maxNackDelay)
	st.retryAt = time.Now().Add(delay)
	st.log().Info("batch refused by the client; it goes out again", zap.Int64("batch", r.Batch),
		zap.String("reason", r.Reason), zap.Duration("after", delay))
	st.clearRoundTrip()
}

// endRoundTrip ends the round trip in flight without an ack: its records
// go out again, to the next connection in turn.
func (st *Actor) endRoundTrip(why string) {
	st.log().Debug("round trip ended without an ack; the records go out again", zap.String("why", why),
		zap.Int64("batch", st.inFlight.number))
	st.clearRoundTrip()
}

func (st *Actor) clearRoundTrip() {
	if st.inFlight != nil && st.inFlight.timer != nil {
		st.inFlight.timer.Stop()
	}
	st.inFlight = nil
}

// sent records a delivery of the pending batch to a connection.
func (st *Actor) sent(a *attachment, p *pendingBatch) {
	p.sent++
	seq := p.records[len(p.records)-1].Seq
	a.last = max(a.last, seq)
	st.sentHigh = max(st.sentHigh, seq)
}
