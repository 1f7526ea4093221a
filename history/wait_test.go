package history_test

import (
	"testing"
	"time"
)

// waitUntil polls cond until it holds; the test fails after a minute.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(time.Minute, cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// holdsFor checks that cond holds all along d (polled); the test fails
// as soon as it does not.
func holdsFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	if poll(d, func() bool { return !cond() }) {
		t.Fatalf("%s stopped holding", what)
	}
}

// poll reports whether cond held within d, asking every 5 ms.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return cond()
		}
	}
	return true
}
