package conn

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// routes are the subscriptions whose acks and nacks the reader hands to
// their streams itself: an ack is one message, reader to stream, not two
// through the connection actor. A subscription is routed once its stream
// is attached (and the connection's credential owns it, for a durable
// stream) and until it ends; the actor answers every other command, and
// a reply to a subscription it does not route (unknown stream,
// forbidden). The reader's messages to a stream come before anything the
// actor sends it about a later command of the client (an unsubscribe): the
// reader sends the reply before it reads the next frame.
type routes struct {
	mu sync.Mutex
	m  map[string]route
}

// route is a routed subscription: its stream, and the connection's count
// of its replies not yet taken.
type route struct {
	stream   *actor.PID
	replying *atomic.Int32
}

func (r *routes) set(name string, rt route) {
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]route{}
	}
	r.m[name] = rt
	r.mu.Unlock()
}

func (r *routes) remove(name string) {
	r.mu.Lock()
	delete(r.m, name)
	r.mu.Unlock()
}

func (r *routes) clear() {
	r.mu.Lock()
	r.m = nil
	r.mu.Unlock()
}

func (r *routes) get(name string) (route, bool) {
	r.mu.Lock()
	rt, ok := r.m[name]
	r.mu.Unlock()
	return rt, ok
}

// isReply reports whether a command is an ack or a nack.
func isReply(cmd *protocol.Command) bool {
	return cmd.Type == protocol.TypeAck || cmd.Type == protocol.TypeNack
}

// hand gives an ack or a nack to the route's stream, on behalf of the
// connection conn; beyond replyQueue not yet taken it is dropped (the
// stream is behind on them: a client acking again and again), and counted.
func (rt route) hand(sys *actor.ActorSystem, conn *actor.PID, d *Deps, cmd *protocol.Command) {
	if rt.replying.Load() >= replyQueue {
		d.Metrics.StaleAcks.Inc()
		return
	}
	rt.replying.Add(1)
	wire.Tell(sys, rt.stream, &wire.Reply{Conn: conn, Batch: cmd.Batch, Ack: cmd.Type == protocol.TypeAck, UpTo: cmd.UpToSeq,
		Reason: cmd.Reason, Taken: rt.replying})
}
