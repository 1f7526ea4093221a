package stream

import (
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// chunk is what the stream read at once: records in seq order, the
// snapshot it was in when it read them (0: the log), and the cursor after
// them.
type chunk struct {
	records []record.Record
	// json holds the records' shared encodings when they came from the
	// catch-up cache (nil, or a nil entry: encoded when the frame is made).
	json     [][]byte
	snapshot int64
	end      record.Cursor
}

// cursorAfter returns the position right after the chunk's i-th record.
func (c *chunk) cursorAfter(i int) record.Cursor {
	return wire.CursorAfter(c.records, c.snapshot, c.end, i)
}

// pendingBatch is a batch formed and not yet acknowledged: the same records
// go out again (with a new number) until one delivery is acknowledged.
type pendingBatch struct {
	records []record.Record
	json    [][]byte // the records' shared encodings, or nil (chunk.json)
	wire    [][]byte // every record's JSON for its frames, once made (Actor.recordsJSON)
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
