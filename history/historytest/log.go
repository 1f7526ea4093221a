package historytest

import (
	"context"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// Log reads the whole log of b, page by page, oldest first.
func Log(t testing.TB, b history.Backend) []record.Record {
	t.Helper()
	ctx := context.Background()
	var log []record.Record
	for {
		page, err := b.RecordList(ctx, &record.RecordListParams{After: int64(len(log)), Limit: record.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return log
		}
		log = append(log, page...)
	}
}
