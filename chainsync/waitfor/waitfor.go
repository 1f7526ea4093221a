// Package waitfor is the tests' one way to wait: on a condition, polled,
// never a sleep for timing. It polls at once, then at growing intervals
// (1 ms doubling up to 20 ms), so that a condition met in a moment is seen
// in a moment and one that takes seconds (a process's HTTP port, a lease's
// expiry) is not asked hundreds of times a second.
//
// It stands on the chain floor (docs/architecture.md, Layering) and
// imports only the standard library, so the tests and kits of every
// floor above the plain types may use it.
package waitfor

import (
	"testing"
	"time"
)

const (
	firstInterval = time.Millisecond
	maxInterval   = 20 * time.Millisecond
)

// Poll reports whether cond held within d: it asks at once, then at
// growing intervals, and once more when d has passed.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	interval := firstInterval
	tick := time.NewTimer(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
			interval = min(2*interval, maxInterval)
			tick.Reset(interval)
		case <-deadline.C:
			return cond()
		}
	}
	return true
}

// Until waits until cond holds and returns how long that took; the test
// fails after d, naming what it waited for.
func Until(t testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !Poll(d, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	return time.Since(start)
}

// NoError waits until cond returns nil; the test fails after d with
// cond's last error, which says what was seen.
func NoError(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	var err error
	if !Poll(d, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("after %s: %v", d, err)
	}
}

// Holds checks that cond holds all along d (polled); the test fails as
// soon as it does not.
func Holds(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if Poll(d, func() bool { return !cond() }) {
		t.Fatalf("%s stopped holding", what)
	}
}
