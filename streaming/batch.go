package streaming

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// chunk is what a subscription delivered at once: records in seq order,
// the snapshot the subscription was in when it read them (0: the log), and
// the cursor after them.
type chunk struct {
	records []record.Record
	// json holds the records' shared encodings when they came from the
	// catch-up cache (nil, or a nil entry: encoded when the frame is made).
	json     [][]byte
	snapshot int64
	end      record.Cursor
	err      error
}

// cursorAfter returns the position right after the chunk's i-th record.
// A chunk read from a snapshot cursor may hold log records after the
// snapshot (when the snapshot's last page was empty the subscription
// moves on to the log within one read): a record above the snapshot's seq
// is a log record, and the position after it is a log cursor.
func (c *chunk) cursorAfter(i int) record.Cursor {
	if i == len(c.records)-1 {
		return c.end
	}
	if seq := c.records[i].Seq; c.snapshot > 0 && seq <= c.snapshot {
		return record.Cursor{Snapshot: c.snapshot, Seq: seq}
	}
	return record.Cursor{Seq: c.records[i].Seq}
}

// pump reads a subscription on its own goroutine, one chunk per request:
// it reads the next chunk only when its consumer asks for it, so a stream
// holds at most the chunk it is given besides what it buffered itself
// (invariant 6). The consumer asks for the next chunk as soon as it runs
// low, so that a subscription at the tip always has a read waiting for
// the next commit.
type pump struct {
	ch      chan chunk
	want    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	pending bool // a chunk was asked for and not yet taken (consumer's side)
}

// startPump starts reading sub, which the pump owns from now on (it closes
// it when it stops).
func startPump(parent context.Context, wg *sync.WaitGroup, sub *history.Subscription) *pump {
	ctx, cancel := context.WithCancel(parent)
	p := &pump{ch: make(chan chunk), want: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.done)
		defer sub.Close()
		for {
			select {
			case <-p.want:
			case <-ctx.Done():
				return
			}
			before := sub.Cursor()
			b, err := sub.Next(ctx)
			c := chunk{records: b.Records, snapshot: before.Snapshot, end: b.Cursor, err: err}
			select {
			case p.ch <- c:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// request asks for the next chunk, unless one is asked for already, and
// returns the channel it comes on.
func (p *pump) request() <-chan chunk {
	if !p.pending {
		p.pending = true
		p.want <- struct{}{}
	}
	return p.ch
}

// taken records that the chunk asked for was received.
func (p *pump) taken() { p.pending = false }

// stop ends the pump and waits for it.
func (p *pump) stop() {
	p.cancel()
	<-p.done
}

// pendingBatch is a batch formed and not yet acknowledged: the same records
// go out again (with a new number) until one delivery is acknowledged.
type pendingBatch struct {
	records []record.Record
	json    [][]byte // the records' shared encodings, or nil (chunk.json)
	wire    [][]byte // every record's JSON for its frames, once made (streamActor.recordsJSON)
	cursor  record.Cursor
	// snapshot is the snapshot its first records were read from (0: the
	// log), for the cursors inside the batch.
	snapshot int64
	// sent counts its deliveries.
	sent int
}

// cursorAfter returns the position right after the batch's i-th record
// (as chunk.cursorAfter).
func (p *pendingBatch) cursorAfter(i int) record.Cursor {
	if i == len(p.records)-1 {
		return p.cursor
	}
	if seq := p.records[i].Seq; p.snapshot > 0 && seq <= p.snapshot {
		return record.Cursor{Snapshot: p.snapshot, Seq: seq}
	}
	return record.Cursor{Seq: p.records[i].Seq}
}

// split cuts the batch at an ack's upTo seq: done holds the records up to
// it (the whole batch when upTo is 0 or past its last record; nil when it
// is before the first), rest the others (nil when none is left). The rest
// keeps its count of deliveries: its records went out before.
func (p *pendingBatch) split(upTo int64) (done, rest *pendingBatch) {
	if upTo <= 0 || len(p.records) == 0 || upTo >= p.records[len(p.records)-1].Seq {
		return p, nil
	}
	k := 0
	for k < len(p.records) && p.records[k].Seq <= upTo {
		k++
	}
	if k == 0 {
		return nil, p
	}
	done = &pendingBatch{records: p.records[:k:k], cursor: p.cursorAfter(k - 1), snapshot: p.snapshot, sent: p.sent}
	rest = &pendingBatch{records: p.records[k:], cursor: p.cursor, snapshot: p.snapshot, sent: p.sent}
	if p.json != nil {
		done.json, rest.json = p.json[:k:k], p.json[k:]
	}
	if p.wire != nil {
		done.wire, rest.wire = p.wire[:k:k], p.wire[k:]
	}
	return done, rest
}

// appendRecord appends a record's JSON: what encoding/json makes of a
// history.Record (TestRecordEncodingMatchesEncodingJSON holds them
// together), without re-validating the payload. Payloads come from the
// history store, which stores the processor's encoding/json output byte
// for byte (TEXT in SQLite, json in PostgreSQL), so they are valid,
// compact JSON already; compacting them again was a third of the cost of
// a catch-up.
func appendRecord(buf []byte, r *record.Record) []byte {
	buf = append(buf, `{"seq":`...)
	buf = strconv.AppendInt(buf, r.Seq, 10)
	buf = append(buf, `,"kind":`...)
	buf = strconv.AppendQuote(buf, string(r.Kind))
	buf = append(buf, `,"block":{"slot":`...)
	buf = strconv.AppendUint(buf, r.Block.Slot, 10)
	buf = append(buf, `,"blockNo":`...)
	buf = strconv.AppendUint(buf, r.Block.BlockNo, 10)
	buf = append(buf, `,"hash":"`...)
	buf = hex.AppendEncode(buf, r.Block.Hash[:])
	buf = append(buf, `"}`...)
	if r.Kind != record.KindRolledBack { // a rollback is about no transaction
		buf = append(buf, `,"txId":"`...)
		buf = hex.AppendEncode(buf, r.TxID[:])
		buf = append(buf, `","txIndex":`...)
		buf = strconv.AppendInt(buf, int64(r.TxIndex), 10)
	}
	if r.Contract != nil {
		buf = append(buf, `,"contractId":"`...)
		buf = hex.AppendEncode(buf, r.Contract.TxID[:])
		buf = append(buf, '#')
		buf = strconv.AppendUint(buf, uint64(r.Contract.Index), 10)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"payload":`...)
	if len(r.Payload) == 0 {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, r.Payload...)
	}
	if r.RolledBackBy != nil {
		buf = append(buf, `,"rolledBackBy":`...)
		buf = strconv.AppendInt(buf, *r.RolledBackBy, 10)
	}
	return append(buf, '}')
}

// framePool recycles the buffers of batch frames once written, so that
// following at the tip allocates next to nothing per delivery.
var framePool = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledFrame: larger buffers are left to the garbage collector.
const maxPooledFrame = 256 << 10

func getFrameBuf(n int) []byte {
	if n > maxPooledFrame {
		return make([]byte, 0, n)
	}
	b := *framePool.Get().(*[]byte)
	if cap(b) < n {
		return make([]byte, 0, max(n, 4096))
	}
	return b[:0]
}

func putFrameBuf(b []byte) {
	if cap(b) <= maxPooledFrame {
		framePool.Put(&b)
	}
}

// batchFrame encodes a batch frame (the JSON of a protocol.Frame of type
// batch) into a pooled buffer, encoding every record.
func batchFrame(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool, recs []record.Record) []byte {
	return (*recordCache)(nil).batchFrame(stream, number, cursor, tip, redelivered, recs, nil, 0)
}

// batchFrame encodes a batch frame into a pooled buffer, taking the JSON
// of the records near head from the cache: the frames of one commit to
// many subscriptions share the records' encoding and differ only in their
// stream, batch number, cursor and tip. json, when not nil, holds the
// records' encodings from the catch-up cache (a nil entry is encoded here).
func (c *recordCache) batchFrame(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool,
	recs []record.Record, json [][]byte, head int64) []byte {
	n := 160 + len(stream) + len(tip)
	for i := range recs {
		n += len(recs[i].Payload) + 512 // the fields besides the payload take at most about 480 bytes
	}
	buf := appendBatchHead(getFrameBuf(n), stream, number)
	for i := range recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		if json != nil && json[i] != nil {
			buf = append(buf, json[i]...)
			continue
		}
		buf = c.appendRecord(buf, &recs[i], head)
	}
	return appendBatchTail(buf, cursor, tip, redelivered)
}

// sharedRecords returns the JSON of a batch's records for a frame written
// in parts (frameParts): the catch-up cache's encodings where it has them,
// the record cache's near the head, else encoded here. The bytes are
// shared: nobody modifies them.
func (c *recordCache) sharedRecords(recs []record.Record, json [][]byte, head int64) [][]byte {
	out := make([][]byte, len(recs))
	for i := range recs {
		switch r := &recs[i]; {
		case json != nil && json[i] != nil:
			out[i] = json[i]
		case r.Seq > head-cacheWindow:
			out[i] = c.encoded(r)
		default:
			out[i] = appendRecord(make([]byte, 0, len(r.Payload)+320), r)
		}
	}
	return out
}

// frameParts is a batch frame in parts: its own head and tail around the
// records' shared JSON, written as one WebSocket message without copying
// the records into a frame of their own.
type frameParts struct {
	head, tail []byte
	recs       [][]byte
}

// batchFrameParts encodes a batch frame's own parts around recs (from
// sharedRecords); the bytes written equal batchFrame's.
func batchFrameParts(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool, recs [][]byte) *frameParts {
	return &frameParts{head: appendBatchHead(make([]byte, 0, 64+len(stream)), stream, number),
		tail: appendBatchTail(make([]byte, 0, 64+len(tip)), cursor, tip, redelivered), recs: recs}
}

// size is the message's length.
func (f *frameParts) size() int {
	n := len(f.head) + len(f.tail) + max(len(f.recs)-1, 0)
	for _, r := range f.recs {
		n += len(r)
	}
	return n
}

// appendTo appends the whole message (for tests and small writes).
func (f *frameParts) appendTo(buf []byte) []byte {
	buf = append(buf, f.head...)
	for i, r := range f.recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, r...)
	}
	return append(buf, f.tail...)
}

func appendBatchHead(buf []byte, stream string, number int64) []byte {
	buf = append(buf, `{"type":"batch","stream":`...)
	buf = appendJSONString(buf, stream)
	buf = append(buf, `,"batch":`...)
	buf = strconv.AppendInt(buf, number, 10)
	return append(buf, `,"records":[`...)
}

func appendBatchTail(buf []byte, cursor record.Cursor, tip []byte, redelivered bool) []byte {
	buf = append(buf, `],"cursor":"`...)
	if cursor.Snapshot > 0 {
		buf = strconv.AppendInt(buf, cursor.Snapshot, 10)
		buf = append(buf, ':')
	}
	buf = strconv.AppendInt(buf, cursor.Seq, 10)
	buf = append(buf, `","tip":`...)
	buf = append(buf, tip...)
	if redelivered {
		buf = append(buf, `,"redelivered":true`...)
	}
	return append(buf, '}')
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= 0x80 {
			b, _ := json.Marshal(s)
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// controlFrame encodes a frame other than a batch.
func controlFrame(f *protocol.Frame) []byte {
	b, err := json.Marshal(f)
	if err != nil {
		// Frames hold only plain values; this cannot fail.
		panic(err)
	}
	return b
}
