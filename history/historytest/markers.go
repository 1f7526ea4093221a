package historytest

import (
	"encoding/json"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

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

// RolledBackTo returns the newest block of a log's records that its last
// rollback marker to p undid, and false when no marker rolls back to p:
// where a follower with this log stands on a devnet journal that rolled
// its chain back to p (devnet.Resume).
func RolledBackTo(log []record.Record, p chain.Point) (chain.Point, bool) {
	for m := len(log) - 1; m >= 0; m-- {
		if log[m].Kind != record.KindRolledBack {
			continue
		}
		var rb record.RolledBack
		if err := json.Unmarshal(log[m].Payload, &rb); err != nil || rb.To != p {
			continue
		}
		for i := m - 1; i >= 0; i-- {
			if by := log[i].RolledBackBy; by != nil && *by == log[m].Seq {
				return log[i].Block.Point(), true
			}
		}
		return chain.Point{}, false
	}
	return chain.Point{}, false
}
