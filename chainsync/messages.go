package chainsync

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/classify"
)

// ChainEvent is a chain event the follower sends downstream (to the
// history processor, or to a sink actor). It took one of the follower's
// credits: whoever is done with it (the history store, once it committed
// the event) returns that credit to Credit with ReturnCredits.
type ChainEvent struct {
	Event  classify.Event
	Credit *actor.PID
}

// CreditsReturned returns N credits to the follower: the events they
// stood for are done with. It is the only way credits come back; the
// follower never waits for them, it stops reading the node while it has
// none.
type CreditsReturned struct{ N int }

// ReturnCredits sends n credits back to the follower at to (nothing when
// to is nil, as for events that did not come from a follower).
func ReturnCredits(system *actor.ActorSystem, to *actor.PID, n int) {
	if to == nil || n <= 0 {
		return
	}
	system.Root.Send(to, &CreditsReturned{N: n})
}
