package chainsync

import (
	"errors"
	"fmt"

	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// ErrNoIntersection is reported when none of the stored points is on the
// node's chain. When the node's tip is behind our point the follower waits
// for it (NodeBehindError); when it is at or past our point the stored
// history is on a fork the node does not have (DivergedError): following
// stops, and following again is the operator's decision
// (`marlowe-follower reset`), never taken silently.
var ErrNoIntersection = errors.New("no intersection with the node's chain")

// NodeBehindError says that the node's tip is behind the follower's point:
// the node was restored from an older snapshot, is resyncing, or is another
// node after a failover. The follower neither rolls back nor stops: it
// waits until the node has reached its point.
type NodeBehindError struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader // the follower's newest block
}

// Blocks is how many blocks the node is behind.
func (e *NodeBehindError) Blocks() uint64 {
	if e.NodeTip.BlockNo >= e.Point.BlockNo {
		return 0
	}
	return e.Point.BlockNo - e.NodeTip.BlockNo
}

func (e *NodeBehindError) Error() string {
	return fmt.Sprintf("the node's tip (block %d, slot %d) is %d blocks behind the follower's point (block %d, slot %d): "+
		"waiting for the node to reach it (nothing is rolled back)",
		e.NodeTip.BlockNo, e.NodeTip.Point.Slot, e.Blocks(), e.Point.BlockNo, e.Point.Slot)
}

// DivergedError says that the node is at or past the follower's point and
// shares none of its stored points: the stored history is on a fork the
// node does not have (or another chain). Following stops for the operator.
type DivergedError struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader
	Points  []pcommon.Point
}

// ResetAction is what an operator runs when the stored history has diverged
// from the node's chain.
const ResetAction = "stop the service, run `marlowe-follower reset --yes` (it deletes the history, the projection and the durable streams) and start it again"

func (e *DivergedError) Unwrap() error { return ErrNoIntersection }

func (e *DivergedError) Error() string {
	oldest := "none"
	if n := len(e.Points); n > 0 {
		oldest = fmt.Sprintf("slot %d", e.Points[n-1].Slot)
	}
	return fmt.Sprintf("%s: the node's tip (block %d, slot %d) is at or past the follower's point (block %d, slot %d) and none of "+
		"the %d stored points (newest %s, oldest %s) is on its chain: the stored history is on a fork the node does not have; "+
		"following stopped: %s", ErrNoIntersection, e.NodeTip.BlockNo, e.NodeTip.Point.Slot, e.Point.BlockNo, e.Point.Slot,
		len(e.Points), describe(e.Points), oldest, ResetAction)
}

func describe(points []pcommon.Point) string {
	if len(points) == 0 {
		return "origin"
	}
	p := points[0]
	return fmt.Sprintf("slot %d", p.Slot)
}
