package sqlitestore_test

import (
	"testing"

	"github.com/marlowe-follower/follower/history/historytest"
)

// BenchmarkCommit: one block a commit (at the tip) and 500 (syncing).
func BenchmarkCommit(b *testing.B) { historytest.BenchmarkCommit(b, openTest) }

// BenchmarkRecordList: catch-up through 100,000 records.
func BenchmarkRecordList(b *testing.B) { historytest.BenchmarkRecordList(b, openTest) }
