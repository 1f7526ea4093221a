package main

import (
	"testing"
	"time"
)

// waitUntil polls cond every 20 ms and returns how long it took; the test
// fails after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !poll(d, cond) {
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	return time.Since(start)
}

// checkFor polls cond every 20 ms until it returns nil; the test fails
// after d with cond's last error, which says what was seen.
func checkFor(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	var err error
	if !poll(d, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("after %s: %v", d, err)
	}
}

// holdsFor checks that cond holds all along d (polled every 20 ms); the
// test fails as soon as it does not.
func holdsFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if poll(d, func() bool { return !cond() }) {
		t.Fatalf("%s stopped holding", what)
	}
}

// poll reports whether cond held within d, asking every 20 ms.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
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
