package filtercases_test

import (
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/record/filtercases"
)

// TestRecordFilterMatches runs the table against the history's in-memory
// filter (record.Filter.Matches, which live subscriptions use): a record of
// each contract passes exactly when the case selects the contract, and a
// rollback marker passes every filter.
func TestRecordFilterMatches(t *testing.T) {
	for _, c := range filtercases.Cases() {
		if c.Uses(filtercases.NameStatus) {
			continue // records have no status
		}
		t.Run(c.Name, func(t *testing.T) {
			f, err := c.RecordFilter()
			if err != nil {
				t.Fatal(err)
			}
			var got []chain.TxOutRef
			for i := range filtercases.Contracts {
				ct := &filtercases.Contracts[i]
				r := record.Record{Seq: int64(i + 1), Kind: record.KindInputsApplied, Contract: &ct.ID}
				if f.Matches(&r, ct.Index(int64(i+1))) {
					got = append(got, ct.ID)
				}
			}
			if names := filtercases.Selected(got); !slices.Equal(names, c.Want) {
				t.Fatalf("%v selects %v, want %v", c.Params, names, c.Want)
			}
			marker := record.Record{Seq: 99, Kind: record.KindRolledBack}
			if !f.Matches(&marker, nil) {
				t.Fatal("a rollback marker does not pass")
			}
		})
	}
}
