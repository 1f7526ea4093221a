package sqlitestore_test

import (
	"fmt"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
)

func benchOpen(tb testing.TB) history.Backend { return openTest(tb) }

// BenchmarkCommit: one block a commit (at the tip) and 500 (syncing).
func BenchmarkCommit(b *testing.B) {
	for _, blocks := range []int{1, 500} {
		b.Run(fmt.Sprintf("blocks=%d", blocks), func(b *testing.B) { historytest.BenchCommit(b, benchOpen, blocks) })
	}
}

// BenchmarkRecordList: catch-up through 100,000 records.
func BenchmarkRecordList(b *testing.B) {
	tag := record.Filter{Tags: []string{historytest.BenchTag}}
	for _, c := range []struct {
		name string
		p    historytest.BenchListParams
	}{
		{"log/page=1000", historytest.BenchListParams{Page: 1000}},
		{"log/page=10000", historytest.BenchListParams{Page: 10000}},
		{"snapshot/page=1000", historytest.BenchListParams{Page: 1000, Mode: record.ModeSnapshot}},
		{"snapshot/page=10000", historytest.BenchListParams{Page: 10000, Mode: record.ModeSnapshot}},
		{"log/tag/page=1000", historytest.BenchListParams{Page: 1000, Filter: tag}},
	} {
		b.Run(c.name, func(b *testing.B) { historytest.BenchRecordList(b, benchOpen, c.p) })
	}
}
