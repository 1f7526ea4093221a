package record

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cursor is a subscription's position. In snapshot phase (Snapshot > 0) it
// walks the records current as of seq Snapshot, Seq being the last one
// delivered; afterwards it is the seq up to which the log was delivered.
type Cursor struct {
	Snapshot int64
	Seq      int64
}

// String returns the cursor's text: "SEQ" or "SNAPSHOT:SEQ".
func (c Cursor) String() string {
	if c.Snapshot > 0 {
		return strconv.FormatInt(c.Snapshot, 10) + ":" + strconv.FormatInt(c.Seq, 10)
	}
	return strconv.FormatInt(c.Seq, 10)
}

// ErrBadCursor is wrapped by ParseCursor errors.
var ErrBadCursor = errors.New("bad cursor")

// ParseCursor reads a cursor's text.
func ParseCursor(s string) (Cursor, error) {
	snap, seq, two := strings.Cut(s, ":")
	if !two {
		seq, snap = snap, ""
	}
	var c Cursor
	var err error
	if c.Seq, err = strconv.ParseInt(seq, 10, 64); err != nil || c.Seq < 0 {
		return Cursor{}, fmt.Errorf("%w %q", ErrBadCursor, s)
	}
	if two {
		if c.Snapshot, err = strconv.ParseInt(snap, 10, 64); err != nil || c.Snapshot <= 0 || c.Seq > c.Snapshot {
			return Cursor{}, fmt.Errorf("%w %q", ErrBadCursor, s)
		}
	}
	return c, nil
}

// FromKind says where a subscription starts.
type FromKind uint8

// Starting points.
const (
	// FromOrigin: the current matching records (a snapshot as of the head at
	// subscription time), then every later record.
	FromOrigin FromKind = iota
	// FromTip: only records committed after the subscription.
	FromTip
	// FromCursor: every record after the cursor, rolled-back ones and
	// markers included.
	FromCursor
)

// From is a subscription's starting point.
type From struct {
	Kind   FromKind
	Cursor Cursor
}

// Batch is what a subscription delivers at a time.
type Batch struct {
	Records []Record
	// Cursor is the position after the batch: resuming from it continues
	// exactly after these records.
	Cursor Cursor
	// Live reports whether the records came straight from a commit.
	Live bool
}
