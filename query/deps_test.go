package query_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestQueryReadsThroughTheStores checks that the query API depends on the
// log's vocabulary (history/record) and the contract store's types, not on
// the actors, the history package, the chain-sync client or a database
// driver: it reads through the interfaces the stores implement (the
// history store's handle, the projection), never a backend of its own.
func TestQueryReadsThroughTheStores(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/asynkron/protoactor-go", "github.com/blinklabs-io/gouroboros",
			"github.com/jackc/pgx", "modernc.org/sqlite", "github.com/marlowe-follower/follower/history",
			"github.com/marlowe-follower/follower/chainsync", "github.com/marlowe-follower/follower/contracts/contractstore/"} {
			allowed := strings.HasPrefix(d, "github.com/marlowe-follower/follower/history/record") ||
				d == "github.com/marlowe-follower/follower/chainsync/chain"
			if !allowed && (d == banned || strings.HasPrefix(d, banned+"/") || strings.HasSuffix(banned, "/") && strings.HasPrefix(d, banned)) {
				t.Errorf("query depends on %s", d)
			}
		}
	}
}
