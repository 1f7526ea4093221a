package waitfor

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of stopping the
// test, so that the helpers' failures can be checked.
type recorder struct {
	testing.TB
	failed atomic.Value
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(fmt.Sprintf(format, args...))
}

func TestPollSeesACondition(t *testing.T) {
	var n atomic.Int32
	if !Poll(time.Minute, func() bool { return n.Add(1) >= 5 }) {
		t.Fatal("Poll gave up on a condition that held at the fifth ask")
	}
	if n.Load() != 5 {
		t.Fatalf("asked %d times, want 5 (it stops once the condition holds)", n.Load())
	}
	if Poll(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll reported a condition that never held")
	}
}

func TestPollAsksOnceMoreAtTheDeadline(t *testing.T) {
	start := time.Now()
	ok := Poll(10*time.Millisecond, func() bool { return time.Since(start) >= 10*time.Millisecond })
	if !ok {
		t.Fatal("a condition that holds at the deadline was missed")
	}
}

func TestHelpersFailTheTest(t *testing.T) {
	r := &recorder{TB: t}
	if d := Until(r, time.Minute, "a", func() bool { return true }); d > time.Minute || r.failed.Load() != nil {
		t.Fatalf("Until failed on a held condition: %v", r.failed.Load())
	}
	Until(r, 10*time.Millisecond, "the never", func() bool { return false })
	if msg, _ := r.failed.Load().(string); msg != "timed out after 10ms waiting for the never" {
		t.Fatalf("Until: %q", msg)
	}
	r = &recorder{TB: t}
	NoError(r, 10*time.Millisecond, func() error { return fmt.Errorf("seen 3") })
	if msg, _ := r.failed.Load().(string); msg != "after 10ms: seen 3" {
		t.Fatalf("NoError: %q", msg)
	}
	r = &recorder{TB: t}
	Holds(r, 10*time.Millisecond, "the always", func() bool { return true })
	if r.failed.Load() != nil {
		t.Fatalf("Holds failed on a condition that held: %v", r.failed.Load())
	}
	var n atomic.Int32
	Holds(r, time.Minute, "the third", func() bool { return n.Add(1) < 3 })
	if msg, _ := r.failed.Load().(string); msg != "the third stopped holding" {
		t.Fatalf("Holds: %q", msg)
	}
}
