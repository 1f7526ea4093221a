package wire

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// RecordCache holds the JSON of the records the server encoded last, so
// that a commit pushed to many subscriptions is encoded once: every
// subscription whose filter matches a record gets the same bytes, and its
// frames differ only in their stream name, batch number, cursor and tip.
//
// A record is known by its seq and the seq of the rollback marker that
// undid it (0 when none): every other field of a record at a seq is
// written once and never changes, so the two name its JSON exactly (the
// log is append-only; a rollback only sets rolledBackBy). The cache is
// bounded: cacheShards maps of at most cacheShardEntries entries, each
// with the generation before it; when a map fills, it becomes the old
// generation and the one before is dropped. Subscribers at the tip read
// the same few records, so a small cache serves them all; one far behind
// misses and encodes its records itself, as before.
type RecordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards       = 32
	cacheShardEntries = 64
)

type cacheShard struct {
	mu       sync.Mutex
	cur, old map[recordKey][]byte
}

type recordKey struct{ seq, rolledBackBy int64 }

func keyOf(r *record.Record) recordKey {
	k := recordKey{seq: r.Seq}
	if r.RolledBackBy != nil {
		k.rolledBackBy = *r.RolledBackBy
	}
	return k
}

// encoded returns the record's JSON (appendRecord's), shared: callers
// must not modify it.
func (c *RecordCache) Encoded(r *record.Record) []byte {
	k := keyOf(r)
	sh := &c.shards[uint64(k.seq)%cacheShards]
	sh.mu.Lock()
	b, ok := sh.cur[k]
	if !ok {
		if b, ok = sh.old[k]; ok {
			sh.put(k, b)
		}
	}
	sh.mu.Unlock()
	if ok {
		return b
	}
	// Encoded outside the lock: two subscriptions that miss at once both
	// encode it, and the second keeps the first one's bytes.
	b = AppendRecord(make([]byte, 0, len(r.Payload)+320), r)
	sh.mu.Lock()
	if have, ok := sh.cur[k]; ok {
		b = have
	} else {
		sh.put(k, b)
	}
	sh.mu.Unlock()
	return b
}

// put adds an entry (sh.mu held), starting a new generation when the
// current one is full.
func (sh *cacheShard) put(k recordKey, b []byte) {
	if len(sh.cur) >= cacheShardEntries {
		sh.old, sh.cur = sh.cur, nil
	}
	if sh.cur == nil {
		sh.cur = make(map[recordKey][]byte, cacheShardEntries)
	}
	sh.cur[k] = b
}

// CacheWindow: only records within this many seqs of the head are
// cached. Those are what subscribers at the tip read, all of them at once;
// a subscription catching up far behind encodes its records straight into
// its frame, and does not push the tip's records out of the cache.
const CacheWindow = cacheShards * cacheShardEntries / 2

// appendRecord appends the record's JSON, from the cache when the record
// is near the head (a nil cache encodes every record).
func (c *RecordCache) AppendRecord(buf []byte, r *record.Record, head int64) []byte {
	if c == nil || r.Seq <= head-CacheWindow {
		return AppendRecord(buf, r)
	}
	return append(buf, c.Encoded(r)...)
}

// appendRecord appends a record's JSON: what encoding/json makes of a
// history.Record (TestRecordEncodingMatchesEncodingJSON holds them
// together), without re-validating the payload. Payloads come from the
// history store, which stores the processor's encoding/json output byte
// for byte (TEXT in SQLite, json in PostgreSQL), so they are valid,
// compact JSON already; compacting them again was a third of the cost of
// a catch-up.
func AppendRecord(buf []byte, r *record.Record) []byte {
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

// MaxPooledFrame: larger buffers are left to the garbage collector.
const MaxPooledFrame = 256 << 10

func GetFrameBuf(n int) []byte {
	if n > MaxPooledFrame {
		return make([]byte, 0, n)
	}
	b := *framePool.Get().(*[]byte)
	if cap(b) < n {
		return make([]byte, 0, max(n, 4096))
	}
	return b[:0]
}

func PutFrameBuf(b []byte) {
	if cap(b) <= MaxPooledFrame {
		framePool.Put(&b)
	}
}

// batchFrame encodes a batch frame (the JSON of a protocol.Frame of type
// batch) into a pooled buffer, encoding every record.
func BatchFrame(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool, recs []record.Record) []byte {
	return (*RecordCache)(nil).BatchFrame(stream, number, cursor, tip, redelivered, recs, nil, 0)
}

// batchFrame encodes a batch frame into a pooled buffer, taking the JSON
// of the records near head from the cache: the frames of one commit to
// many subscriptions share the records' encoding and differ only in their
// stream, batch number, cursor and tip. json, when not nil, holds the
// records' encodings from the catch-up cache (a nil entry is encoded here).
func (c *RecordCache) BatchFrame(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool,
	recs []record.Record, json [][]byte, head int64) []byte {
	n := 160 + len(stream) + len(tip)
	for i := range recs {
		n += len(recs[i].Payload) + 512 // the fields besides the payload take at most about 480 bytes
	}
	buf := appendBatchHead(GetFrameBuf(n), stream, number)
	for i := range recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		if json != nil && json[i] != nil {
			buf = append(buf, json[i]...)
			continue
		}
		buf = c.AppendRecord(buf, &recs[i], head)
	}
	return appendBatchTail(buf, cursor, tip, redelivered)
}

// SharedRecords returns the JSON of a batch's records for a frame written
// in parts (FrameParts): the catch-up cache's encodings where it has them,
// the record cache's near the head, else encoded here. The bytes are
// shared: nobody modifies them.
func (c *RecordCache) SharedRecords(recs []record.Record, json [][]byte, head int64) [][]byte {
	out := make([][]byte, len(recs))
	for i := range recs {
		switch r := &recs[i]; {
		case json != nil && json[i] != nil:
			out[i] = json[i]
		case r.Seq > head-CacheWindow:
			out[i] = c.Encoded(r)
		default:
			out[i] = AppendRecord(make([]byte, 0, len(r.Payload)+320), r)
		}
	}
	return out
}

// FrameParts is a batch frame in parts: its own head and tail around the
// records' shared JSON, written as one WebSocket message without copying
// the records into a frame of their own.
type FrameParts struct {
	Head, Tail []byte
	Recs       [][]byte
	// The batch the frame was made from (shared, read only), for a
	// writer that needs each record's cursor (a Server-Sent Events
	// stream's event ids): its records, the snapshot its first records
	// were read from (0: the log) and the cursor after it. Set by the
	// stream that delivers it; nil Records when not.
	Records  []record.Record
	Snapshot int64
	Cursor   record.Cursor
}

// CursorAfter returns the position right after the batch's i-th record
// (Records[i]): a record above the snapshot's seq is a log record.
func (f *FrameParts) CursorAfter(i int) record.Cursor {
	return CursorAfter(f.Records, f.Snapshot, f.Cursor, i)
}

// CursorAfter returns the position right after recs[i] of a batch read
// from snapshot (0: the log) that ends at end. A batch read from a snapshot
// cursor may hold log records after the snapshot (when the snapshot's last
// page was empty the subscription moves on to the log within one read): a
// record above the snapshot's seq is a log record, and the position after
// it is a log cursor.
func CursorAfter(recs []record.Record, snapshot int64, end record.Cursor, i int) record.Cursor {
	if i == len(recs)-1 {
		return end
	}
	if seq := recs[i].Seq; snapshot > 0 && seq <= snapshot {
		return record.Cursor{Snapshot: snapshot, Seq: seq}
	}
	return record.Cursor{Seq: recs[i].Seq}
}

// BatchFrameParts encodes a batch frame's own parts around recs (from
// SharedRecords); the bytes written equal BatchFrame's.
// Its head and tail share one buffer.
func BatchFrameParts(stream string, number int64, cursor record.Cursor, tip []byte, redelivered bool, recs [][]byte) *FrameParts {
	head := appendBatchHead(make([]byte, 0, 128+len(stream)+len(tip)), stream, number)
	n := len(head)
	return &FrameParts{Head: head[:n:n], Tail: appendBatchTail(head[n:n], cursor, tip, redelivered), Recs: recs}
}

// Size is the message's length.
func (f *FrameParts) Size() int {
	n := len(f.Head) + len(f.Tail) + max(len(f.Recs)-1, 0)
	for _, r := range f.Recs {
		n += len(r)
	}
	return n
}

// AppendTo appends the whole message (for tests and small writes).
func (f *FrameParts) AppendTo(buf []byte) []byte {
	buf = append(buf, f.Head...)
	for i, r := range f.Recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, r...)
	}
	return append(buf, f.Tail...)
}

func appendBatchHead(buf []byte, stream string, number int64) []byte {
	buf = append(buf, `{"type":"batch","stream":`...)
	buf = AppendJSONString(buf, stream)
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

// AppendJSONString appends s as a JSON string, as encoding/json writes it.
func AppendJSONString(buf []byte, s string) []byte {
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

// ControlFrame encodes a frame other than a batch.
func ControlFrame(f *protocol.Frame) []byte {
	b, err := json.Marshal(f)
	if err != nil {
		// Frames hold only plain values; this cannot fail.
		panic(err)
	}
	return b
}
