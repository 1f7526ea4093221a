package historytest

import "github.com/marlowe-follower/follower/history/record"

// RollbackMarkers counts the rollback markers of a log: a test whose chain
// should have rolled back checks that its log shows it.
func RollbackMarkers(log []record.Record) int {
	n := 0
	for i := range log {
		if log[i].Kind == record.KindRolledBack {
			n++
		}
	}
	return n
}
