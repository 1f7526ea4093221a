package conn

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// The connection's goroutines: they do the blocking I/O and report to the
// actor by message.

// ping pings the client once (a heartbeat asked for it), on a goroutine
// of its own that lives as long as the ping: an idle connection keeps no
// pinger. A client that does not answer within PingTimeout is
// disconnected; a ping the connection's end cuts short is not a failure.
func (c *Actor) ping() {
	ctx, ws, sys, self, timeout := c.ctx, c.ws, c.sys, c.self, c.d.Config.PingTimeout
	defer wire.Tell(sys, self, &ended{pinger: true})
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := ws.Ping(pctx); err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		wire.Tell(sys, self, &pingFailed{})
	}
}

// writeLoop writes queued frames. A write that takes longer than
// WriteTimeout (the client does not read) trips the watchdog, which cuts
// the client off; a timer reset per write costs less than a context with
// a deadline. The writes take no context either: one with a Done channel
// costs a registration per write; endStuckWrite ends a write stuck after a
// budget cut.
func (c *Actor) writeLoop() {
	sys, self := c.sys, c.self
	defer wire.Tell(sys, self, &ended{writer: true})
	watchdog := time.AfterFunc(time.Hour, func() {
		// The close handshake waits (up to its 5 s) for the stuck write,
		// so a client that reads again in that time gets its frames, then
		// the close frame with the reason.
		wire.Tell(sys, self, &Cut{Code: websocket.StatusPolicyViolation, Reason: protocol.CloseSlowConsumer, Why: "slow"})
	})
	watchdog.Stop()
	defer watchdog.Stop()
	for {
		f, ok := c.q.take(c.ctx.Done(), sys, self)
		if !ok {
			return
		}
		watchdog.Reset(c.d.Config.WriteTimeout)
		var err error
		if f.parts != nil {
			err = writeParts(context.Background(), c.ws, f.parts, c.q.progressed)
		} else {
			err = c.ws.Write(context.Background(), websocket.MessageText, f.b)
		}
		c.q.done(f)
		if !watchdog.Stop() {
			return // tripped: the connection is being cut off
		}
		if f.pooled {
			wire.PutFrameBuf(f.b)
		}
		if err != nil {
			return
		}
		if f.final {
			wire.Tell(sys, self, &Cut{Code: websocket.StatusTryAgainLater, Reason: protocol.CloseLeaseLost})
		}
	}
}

// endStuckWrite closes the socket if the writer is still on a frame (the
// client of a budget cut took it not within budgetCloseGrace), which ends
// the write and frees the frame; once the writer is done with its frame,
// the close handshake under way goes on.
func (c *Actor) endStuckWrite() {
	if c.q.idle() > 0 {
		_ = c.ws.CloseNow()
	}
}

// ReadLoop is the reader (the HTTP handler's goroutine, once the
// server actor spawned the actor pid): it hands an ack or a nack of a
// routed subscription to its stream itself (routes), and every other frame
// to the actor, at most cap(credits) ahead of it, until the socket's reads
// end. Reads take no context: one with a Done channel costs a registration
// per read, and cancelling it would drop the socket without a close
// handshake. Closing the connection ends a read.
func (c *Actor) ReadLoop(sys *actor.ActorSystem, pid *actor.PID) {
	var buf bytes.Buffer
	for {
		typ, data, err := c.read(&buf)
		if err != nil {
			wire.Tell(sys, pid, &readEnded{err: err})
			return
		}
		m := &inbound{typ: typ}
		if typ == websocket.MessageText {
			m.cmd, m.err = protocol.DecodeCommand(data)
			if m.err == nil && isReply(m.cmd) {
				if rt, ok := c.routes.get(m.cmd.Stream); ok {
					rt.hand(sys, pid, c.d, m.cmd)
					continue
				}
			}
		}
		select {
		case c.credits <- struct{}{}:
		case <-c.gone:
			return
		}
		wire.Tell(sys, pid, m)
	}
}

// read reads one message into buf (reused: most commands are small).
func (c *Actor) read(buf *bytes.Buffer) (websocket.MessageType, []byte, error) {
	typ, r, err := c.ws.Reader(context.Background())
	if err != nil {
		return 0, nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return 0, nil, err
	}
	if buf.Cap() > 1<<20 {
		defer func() { *buf = bytes.Buffer{} }() // do not keep a large buffer
	}
	return typ, buf.Bytes(), nil
}
