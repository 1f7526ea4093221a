package processor

import (
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// SemanticInterval turns a transaction's validity interval in slots into the
// interval the Marlowe semantics see: [start of invalidBefore, start of
// invalidHereafter - 1] in POSIX ms, on the network's clock c. Either end
// is nil when open.
func SemanticInterval(c chain.SlotConfig, invalidBefore, invalidHereafter *uint64) record.Interval {
	iv := record.Interval{InvalidBefore: invalidBefore, InvalidHereafter: invalidHereafter}
	if invalidBefore != nil {
		from := c.SlotStart(*invalidBefore)
		iv.FromMillis = &from
	}
	if invalidHereafter != nil {
		to := c.SlotStart(*invalidHereafter) - 1
		iv.ToMillis = &to
	}
	return iv
}
