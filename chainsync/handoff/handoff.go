// Package handoff is what the chain-sync follower and the actors after it
// exchange, without the node's protocol: each chain event with the credit
// it took (ChainEvent), the credits given back once events are done with
// (CreditsReturned, Return, Credits), and the committed state the follower
// resumes from (Checkpoints, Restored). It imports protoactor and the
// chain's plain types only, so that the stages downstream (the history)
// link nothing of the node's protocol library.
package handoff

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
)

// ChainEvent is a chain event the follower sends downstream (to the
// history processor, or to a sink actor). It took one of the follower's
// credits: whoever is done with it (the history store, once it committed
// the event) returns that credit to Credit.
type ChainEvent struct {
	Event  classify.Event
	Credit *actor.PID
}

// CreditsReturned returns N credits to the follower: the events they
// stood for are done with. It is the only way credits come back; the
// follower never waits for them, it stops reading the node while it has
// none.
type CreditsReturned struct{ N int }

// Return sends n credits back to the follower at to (nothing when to is
// nil, as for events that did not come from a follower).
func Return(system *actor.ActorSystem, to *actor.PID, n int) {
	if to == nil || n <= 0 {
		return
	}
	system.Root.Send(to, &CreditsReturned{N: n})
}

// Credits tallies the credits a batch of events took, by follower, so
// that they go back in one message to each. The zero value is empty.
type Credits struct {
	owed []owed
}

type owed struct {
	to *actor.PID
	n  int
}

// Add counts one credit taken from the follower at to (nothing for nil).
func (c *Credits) Add(to *actor.PID) {
	if to == nil {
		return
	}
	for i := range c.owed {
		if c.owed[i].to == to || c.owed[i].to.Equal(to) {
			c.owed[i].n++
			return
		}
	}
	c.owed = append(c.owed, owed{to: to, n: 1})
}

// Return gives every counted credit back and empties the tally.
func (c *Credits) Return(system *actor.ActorSystem) {
	for _, o := range c.owed {
		Return(system, o.to, o.n)
	}
	c.owed = nil
}

// Restored is the state the follower resumes from: what the history store
// committed last.
type Restored struct {
	// Breadcrumbs are recent headers to intersect with, newest first; empty
	// when nothing was followed yet.
	Breadcrumbs []chain.BlockHeader
	// UTxOs is the tracked output set as of the newest breadcrumb, Recent
	// the UTxO changes of the blocks before it that a rollback may undo
	// (oldest first), and Horizon the newest block whose changes are gone.
	UTxOs   []classify.TrackedUTxO
	Recent  []classify.UTxOChanges
	Horizon chain.BlockHeader
}

// Checkpoints gives the follower the state to resume from.
type Checkpoints interface {
	Restore(ctx context.Context) (*Restored, error)
}
