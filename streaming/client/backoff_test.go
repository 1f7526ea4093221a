package client

import (
	"testing"
	"time"
)

// TestBackoffSchedule: the wait before each attempt doubles from
// MinBackoff up to MaxBackoff and stays there, within the ±20 % jitter,
// however many attempts failed.
func TestBackoffSchedule(t *testing.T) {
	c := &Client{opts: Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 40 * time.Millisecond}}
	for attempt := range 100 {
		want := min(5*time.Millisecond<<min(attempt, 20), 40*time.Millisecond)
		for range 20 {
			d := c.backoff(attempt)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("attempt %d: wait %s, want %s ±20%%", attempt, d, want)
			}
		}
	}
}
