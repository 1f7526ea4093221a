package pipeline

import (
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// waitUntil waits until cond holds; the test fails after a minute.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, time.Minute, what, cond)
}
