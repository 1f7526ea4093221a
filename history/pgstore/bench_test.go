package pgstore_test

import (
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
)

func benchOpen(tb testing.TB) history.Backend { return openTest(tb) }

// BenchmarkCommit: one block a commit (at the tip) and 500 (syncing).
func BenchmarkCommit(b *testing.B) { historytest.BenchmarkCommit(b, benchOpen) }

// BenchmarkRecordList: catch-up through 100,000 records.
func BenchmarkRecordList(b *testing.B) { historytest.BenchmarkRecordList(b, benchOpen) }
