package pipeline

import (
	"testing"
	"time"
)

// waitUntil polls cond every 5 ms until it holds; the test fails after a
// minute.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if !cond() {
				t.Fatalf("timed out waiting for %s", what)
			}
			return
		}
	}
}
