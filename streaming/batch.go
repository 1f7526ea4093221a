package streaming

import (
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// replyQueue is how many acks and nacks of one subscription a connection
// may have handed to its stream and not seen taken.
const replyQueue = 16

// chunk is what a subscription delivered at once: records in seq order,
// the snapshot the subscription was in when it read them (0: the log), and
// the cursor after them.
type chunk struct {
	records  []record.Record
	snapshot int64
	end      record.Cursor
	err      error
}

// cursorAfter returns the position right after the chunk's i-th record.
func (c *chunk) cursorAfter(i int) record.Cursor {
	return wire.CursorAfter(c.records, c.snapshot, c.end, i)
}
