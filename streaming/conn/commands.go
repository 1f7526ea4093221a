package conn

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// handle decodes and executes a frame from the client.
func (c *Actor) handle(ac actor.Context, m *inbound) {
	<-c.credits // the reader may read the next frame
	if m.typ != websocket.MessageText {
		c.reject(ac, protocol.CodeBadFrame, "only text frames holding JSON commands are accepted", "", true)
		return
	}
	if err := m.err; err != nil {
		code, msg, stream := protocol.CodeBadJSON, err.Error(), ""
		var bc *protocol.ErrBadCommand
		if errors.As(err, &bc) {
			code, msg, stream = bc.Code, bc.Err.Error(), bc.Stream
		}
		c.reject(ac, code, msg, stream, true)
		return
	}
	switch cmd := m.cmd; cmd.Type {
	case protocol.TypeSubscribe:
		c.subscribe(ac, cmd)
	case protocol.TypeAck, protocol.TypeNack:
		if code, msg := c.reply(cmd); code != "" {
			c.reject(ac, code, msg, cmd.Stream, false)
		}
	case protocol.TypeUnsubscribe:
		s := c.subs[cmd.Stream]
		if s == nil || s.stream == nil {
			c.reject(ac, protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream), cmd.Stream, true)
			return
		}
		s.out.setOpen(false) // unsubscribed is the subscription's last frame
		c.routes.remove(cmd.Stream)
		delete(c.subs, cmd.Stream)
		c.d.Metrics.Subscribers.Dec()
		wire.Tell(c.sys, s.stream, &wire.Detach{Conn: c.self})
		c.send(ac, &protocol.Frame{Type: protocol.TypeUnsubscribed, Stream: cmd.Stream})
	case protocol.TypePing:
		t := c.d.Tips.Tip()
		c.send(ac, &protocol.Frame{Type: protocol.TypePong, Tip: &t})
	}
}

// reply hands an ack or a nack to its stream; the error code and message
// when it cannot.
func (c *Actor) reply(cmd *protocol.Command) (code, msg string) {
	s := c.subs[cmd.Stream]
	if s == nil || s.stream == nil {
		return protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream)
	}
	if s.durable && !c.principal.Owns(s.owner) {
		return protocol.CodeForbidden, fmt.Sprintf("durable stream %q belongs to another credential", cmd.Stream)
	}
	route{stream: s.stream, replying: &s.replying}.hand(c.sys, c.self, c.d, cmd)
	return "", ""
}

// subscribe checks a subscribe command and asks the server for its
// stream; the commands after it wait for the answer (opening).
func (c *Actor) subscribe(ac actor.Context, cmd *protocol.Command) {
	cfg := &c.d.Config
	_, exists := c.subs[cmd.Stream]
	switch {
	case exists:
		c.reject(ac, protocol.CodeStreamExists, fmt.Sprintf("a subscription named %q is already on this connection", cmd.Stream), cmd.Stream, true)
		return
	case len(c.subs) >= cfg.MaxSubscriptions:
		c.reject(ac, protocol.CodeTooManySubscriptions, fmt.Sprintf("at most %d subscriptions per connection", cfg.MaxSubscriptions), cmd.Stream, true)
		return
	case cmd.BatchSize > cfg.MaxBatchSize:
		c.reject(ac, protocol.CodeBadRequest, fmt.Sprintf("batchSize %d is above the limit %d", cmd.BatchSize, cfg.MaxBatchSize), cmd.Stream, true)
		return
	case time.Duration(cmd.BatchTimeout) > cfg.MaxBatchTimeout:
		c.reject(ac, protocol.CodeBadRequest, fmt.Sprintf("batchTimeout is above the limit %s", cfg.MaxBatchTimeout), cmd.Stream, true)
		return
	}
	var filter record.Filter
	if cmd.Filter != nil {
		var err error
		if filter, err = cmd.Filter.History(); err != nil {
			c.reject(ac, protocol.CodeBadFilter, err.Error(), cmd.Stream, true)
			return
		}
	}
	if !cmd.Durable && !c.principal.Allows(auth.ScopeSubscribe) {
		c.reject(ac, protocol.CodeForbidden, "this token has no subscribe scope: it may use durable streams only", cmd.Stream, true)
		return
	}
	sub := &connSub{out: c.q.newOutlet()}
	c.subs[cmd.Stream] = sub
	c.awaiting = cmd.Stream
	c.state.Become(c.opening)
	wire.Tell(c.sys, ac.Parent(), &wire.OpenStream{Cmd: cmd, Filter: filter, Who: c.principal, Conn: c.self, ID: c.id, Queue: sub.out})
}

// reject answers a command with an error frame; abusive errors count
// toward MaxBadFrames, after which the connection is closed.
func (c *Actor) reject(ac actor.Context, code, msg, stream string, abusive bool) {
	c.d.Metrics.BadFrames.WithLabelValues(code).Inc()
	c.send(ac, &protocol.Frame{Type: protocol.TypeError, Code: code, Message: msg, Stream: stream})
	if !abusive {
		return
	}
	c.bad++
	if c.bad >= c.d.Config.MaxBadFrames && c.ctx.Err() == nil {
		c.log.Info("closing a connection that sends bad frames", zap.Int("badFrames", c.bad))
		c.close(ac, websocket.StatusPolicyViolation, protocol.CloseTooManyErrors)
	}
}

// send queues a control frame; when the queue has no room it waits for
// some (the client is cut off if it does not read within WriteTimeout).
func (c *Actor) send(ac actor.Context, f *protocol.Frame) {
	c.enqueue(ac, waiting{frame: wire.ControlFrame(f)})
}
