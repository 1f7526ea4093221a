package historytest

import "github.com/marlowe-follower/follower/history/record"

// NthStart is where the i-th of a test's subscribers starts, in turn: at
// the origin, after a cursor at half of head, at the tip.
func NthStart(i int, head int64) record.From {
	switch i % 3 {
	case 0:
		return record.From{Kind: record.FromOrigin}
	case 1:
		return record.From{Kind: record.FromCursor, Cursor: record.Cursor{Seq: head / 2}}
	default:
		return record.From{Kind: record.FromTip}
	}
}
