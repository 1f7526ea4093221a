package handoff

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// TestCreditsGoBackInOneMessagePerFollower: a batch's tally returns each
// follower's credits in one CreditsReturned, and nothing for events that
// came from no follower.
func TestCreditsGoBackInOneMessagePerFollower(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	got := make(chan [2]any, 8)
	follower := func(name string) *actor.PID {
		return system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
			switch m := c.Message().(type) {
			case *CreditsReturned:
				got <- [2]any{name, m.N}
			case string: // the end marker: sent after the credits, so taken after them
				got <- [2]any{name, m}
			}
		}))
	}
	a, b := follower("a"), follower("b")
	var c Credits
	for _, to := range []*actor.PID{a, b, a, nil, a, actor.NewPID(a.Address, a.Id)} {
		c.Add(to)
	}
	c.Return(system)
	c.Return(system) // emptied: nothing more
	system.Root.Send(a, "end")
	system.Root.Send(b, "end")
	credits := map[string][]any{}
	for ended := 0; ended < 2; {
		select {
		case m := <-got:
			credits[m[0].(string)] = append(credits[m[0].(string)], m[1])
			if m[1] == "end" {
				ended++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("credits not returned: %v", credits)
		}
	}
	if !reflect.DeepEqual(credits, map[string][]any{"a": {4, "end"}, "b": {1, "end"}}) {
		t.Fatalf("returned %v, want a 4 and b 1, once each", credits)
	}
}
