package actors

import (
	"context"
	"sync/atomic"
)

// Credits bound the work in flight between a producer and a consumer stage.
// The producer Acquires a credit before it hands over one item and blocks
// while none is left; the consumer Releases it once the item is done (for the
// history store: committed). The mailbox in between therefore never holds
// more than the capacity, and a slow consumer slows the producer down to its
// own pace, back to the node's socket.
type Credits struct {
	slots    chan struct{}
	inFlight atomic.Int64
}

// NewCredits returns n credits.
func NewCredits(n int) *Credits {
	if n < 1 {
		n = 1
	}
	return &Credits{slots: make(chan struct{}, n)}
}

// Acquire takes a credit, waiting for one while ctx allows.
func (c *Credits) Acquire(ctx context.Context) error {
	select {
	case c.slots <- struct{}{}:
		c.inFlight.Add(1)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Release returns n credits.
func (c *Credits) Release(n int) {
	for range n {
		select {
		case <-c.slots:
			c.inFlight.Add(-1)
		default:
			return // more releases than acquires: ignore the excess
		}
	}
}

// InFlight returns the number of credits taken and not yet released.
func (c *Credits) InFlight() int { return int(c.inFlight.Load()) }

// Capacity returns the number of credits.
func (c *Credits) Capacity() int { return cap(c.slots) }
