package wire

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Queue is a subscription's way into its connection's send queue: whether
// it has room for another frame (the stream hands its batch to a
// connection with room first), and Offer, which queues a batch frame
// straight away when the connection lets the stream do so and the queue
// takes it at once. When Offer refuses, the stream sends the batch to the
// connection actor (Deliver), which queues it or lets it wait for room.
type Queue interface {
	HasRoom() bool
	Offer(parts *FrameParts) bool
}

// Messages a connection sends the server actor.
type (
	// OpenStream asks for a subscription's stream: the server finds or
	// makes it and sends it Attach on the connection's behalf (or answers
	// the connection with SubscribeRefused).
	OpenStream struct {
		Cmd    *protocol.Command
		Filter record.Filter
		Who    auth.Principal
		Conn   *actor.PID
		ID     uint64
		Queue  Queue
	}
)

// Messages of a stream actor.
type (
	// Attach adds a connection (the server sends it on the connection's
	// behalf); the stream answers the connection with Attached or
	// AttachRefused.
	Attach struct {
		Conn  *actor.PID
		ID    uint64
		Queue Queue
		Name  string
	}
	// Detach removes a connection: unsubscribed, or the connection stopped.
	Detach struct{ Conn *actor.PID }
	// ConnClosing: the connection is ending; its acks still come.
	ConnClosing struct{ Conn *actor.PID }
	// Reply is an ack or a nack.
	Reply struct {
		Conn  *actor.PID
		Batch int64
		Ack   bool
		// UpTo, in an ack, acknowledges only the records up to that seq
		// (0: all).
		UpTo   int64
		Reason string
		Taken  *atomic.Int32 // the connection's count of replies not yet taken
	}
	// Undelivered: the connection did not queue the batch (it is ending).
	Undelivered struct {
		Conn   *actor.PID
		Number int64
	}
	// QueuedNotice: a broadcast batch is in the connection's queue.
	QueuedNotice struct{ Conn *actor.PID }
	// DrainStream: the server stops; finish the round trip in flight,
	// send no new batch, then stop.
	DrainStream struct{}
	// CloseStream: the durable stream was deleted.
	CloseStream struct{ Msg string }
)

// Messages of a connection actor.
type (
	// SubscribeRefused: the server refused a subscribe.
	SubscribeRefused struct {
		Name, Code, Msg string
		Abusive         bool
	}
	// Heartbeat is the server's periodic frame with the tip.
	Heartbeat struct{ Frame []byte }
	// Attached: a stream took the connection.
	Attached struct {
		Stream  *actor.PID
		Name    string
		Durable bool
		Owner   string
		Frame   []byte // the subscribed frame
	}
	// AttachRefused: the stream would not take the connection.
	AttachRefused struct{ Name, Code, Msg string }
	// Deliver is a batch frame for a subscription.
	Deliver struct {
		Stream *actor.PID
		Name   string
		Number int64
		Frame  []byte      // pooled (GetFrameBuf)
		Parts  *FrameParts // or the frame in parts around shared records
		// Notify: the stream waits for QueuedNotice (or Undelivered)
		// once the frame is queued (a broadcast batch).
		Notify bool
	}
	// DropSub: the stream ended the subscription (deleted).
	DropSub struct {
		Stream          *actor.PID
		Name, Code, Msg string
	}
	// LeaseLost: another process took the durable stream and goes on
	// from before records this connection got: the connection gets the
	// error frame and is closed.
	LeaseLost struct {
		Stream *actor.PID
		Name   string
	}
	// Control is a control frame to queue (ControlFrame's).
	Control struct{ Frame []byte }
)

// Tell sends msg to pid unless that actor has stopped: the goroutines,
// timers and late replies of a connection or stream may outlive its
// actor, and what they would tell it no longer matters (a message to a
// stopped actor would be a dead letter, logged).
func Tell(sys *actor.ActorSystem, pid *actor.PID, msg any) {
	if _, ok := sys.ProcessRegistry.GetLocal(pid.Id); ok {
		sys.Root.Send(pid, msg)
	}
}
