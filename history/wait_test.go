package history_test

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

// holdsFor checks that cond holds all along d.
func holdsFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	waitfor.Holds(t, d, what, cond)
}

// poll reports whether cond held within d.
var poll = waitfor.Poll
