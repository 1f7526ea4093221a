package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLeafDependencies checks that the public Go client links only what a
// client needs: the log's vocabulary (history/record), the protocol, the
// chain and Marlowe types and the WebSocket library, not the actors, the
// ledger, the history package or a database driver.
func TestLeafDependencies(t *testing.T) {
	for _, pkg := range []string{".", "../protocol", "../../history/record"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := strings.Fields(string(out))
		external := 0
		for _, d := range deps {
			for _, banned := range []string{"github.com/asynkron/protoactor-go", "github.com/blinklabs-io/gouroboros",
				"github.com/jackc/pgx", "modernc.org/sqlite", "go.opentelemetry.io",
				"github.com/marlowe-follower/follower/history", "github.com/marlowe-follower/follower/chainsync/block"} {
				if d == banned || strings.HasPrefix(d, banned+"/") && !strings.HasPrefix(d, "github.com/marlowe-follower/follower/history/record") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
			if first, _, _ := strings.Cut(d, "/"); strings.Contains(first, ".") {
				external++
			}
		}
		if external > 60 {
			t.Errorf("%s depends on %d packages outside the standard library", pkg, external)
		}
		t.Logf("%s: %d packages outside the standard library", pkg, external)
	}
}
