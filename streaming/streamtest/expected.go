package streamtest

import (
	"context"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// MustExpected is Expected for a test, which an error fails.
func MustExpected(t testing.TB, b history.Backend, filter record.Filter, from record.Cursor, upTo int64) []record.Record {
	t.Helper()
	exp, err := Expected(context.Background(), b, filter, from, upTo)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// Expected returns, from the backend, what a subscription with filter that
// starts at cursor from must deliver up to seq upTo: the records current as
// of its snapshot (when from is in a snapshot), then every matching record
// of the log after it, rolled-back ones and markers included.
func Expected(ctx context.Context, b history.Backend, filter record.Filter, from record.Cursor, upTo int64) ([]record.Record, error) {
	var out []record.Record
	page := func(p record.RecordListParams) error {
		for {
			p.Limit = 5000
			recs, err := b.RecordList(ctx, &p)
			if err != nil {
				return err
			}
			out = append(out, recs...)
			if len(recs) < p.Limit {
				return nil
			}
			p.After = recs[len(recs)-1].Seq
		}
	}
	after := from.Seq
	if from.Snapshot > 0 {
		if err := page(record.RecordListParams{Filter: filter, Mode: record.ModeSnapshot, Snapshot: from.Snapshot, After: from.Seq}); err != nil {
			return nil, err
		}
		after = from.Snapshot
	}
	if after < upTo {
		if err := page(record.RecordListParams{Filter: filter, Mode: record.ModeLog, After: after, UpTo: upTo}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
