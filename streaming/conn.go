package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// conn is one WebSocket connection: a reader (the HTTP handler's
// goroutine) that executes commands and a writer that drains the bounded
// send queue. The server's heartbeat loop sends it heartbeats and pings.
type conn struct {
	srv    *Server
	ws     *websocket.Conn
	id     uint64
	log    *zap.Logger
	q      *sendQueue
	ctx    context.Context // ends when the connection does
	cancel context.CancelFunc

	// principal is who the connection authenticated as: the owner check
	// of its durable streams.
	principal auth.Principal

	closeOnce sync.Once
	// closing is set when the connection starts to end: nothing more is
	// queued for it, and its reader only takes acks and nacks until the
	// socket ends. Its subscriptions are detached (their round trips end)
	// when the reader has stopped, so that an ack the client sent before
	// the end still counts.
	closing atomic.Bool
	mu      sync.Mutex
	subs    map[string]*attachment
	bad     int
}

func newConn(s *Server, ws *websocket.Conn, id uint64, remote string) *conn {
	ctx, cancel := context.WithCancel(s.ctx)
	q := newSendQueue(s.cfg.SendQueueFrames, s.cfg.SendQueueBytes)
	q.budget = &s.budget
	return &conn{srv: s, ws: ws, id: id, q: q,
		ctx: ctx, cancel: cancel, subs: map[string]*attachment{},
		log: s.log.With(zap.Uint64("connection", id), zap.String("remote", remote))}
}

// serve runs the connection until it ends.
func (c *conn) serve() {
	c.ws.SetReadLimit(c.srv.cfg.MaxFrameBytes)
	c.srv.wg.Add(1)
	go c.writeLoop()
	c.readLoop()
	c.close(websocket.StatusNormalClosure, "")
	c.detachAll()
}

// detachAll detaches every subscription: their round trips end at once.
func (c *conn) detachAll() {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string]*attachment{}
	c.mu.Unlock()
	for _, a := range subs {
		c.srv.m.subscribers.Dec()
		a.st.detach(a)
	}
}

func (c *conn) readLoop() {
	// Reads take no context: one with a Done channel costs a registration
	// per read, and cancelling it would drop the socket without a close
	// handshake. Closing the connection ends a read.
	var buf bytes.Buffer
	for {
		typ, data, err := c.read(&buf)
		if err != nil {
			if st := websocket.CloseStatus(err); st == -1 && c.ctx.Err() == nil {
				c.log.Debug("connection lost", zap.Error(err))
			}
			return
		}
		closing := c.closing.Load()
		if typ != websocket.MessageText {
			if closing {
				continue
			}
			c.reject(protocol.CodeBadFrame, "only text frames holding JSON commands are accepted", "", true)
			continue
		}
		cmd, err := protocol.DecodeCommand(data)
		if err != nil {
			code, msg := protocol.CodeBadJSON, err.Error()
			var bc *protocol.ErrBadCommand
			if errors.As(err, &bc) {
				code, msg = bc.Code, bc.Err.Error()
			}
			if !closing {
				c.reject(code, msg, "", true)
			}
			continue
		}
		if closing && cmd.Type != protocol.TypeAck && cmd.Type != protocol.TypeNack {
			continue // an ending connection takes only replies to what it was sent
		}
		c.execute(cmd)
	}
}

// read reads one message into buf (reused: most commands are small).
func (c *conn) read(buf *bytes.Buffer) (websocket.MessageType, []byte, error) {
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

// reject answers a command with an error frame; abusive errors count
// toward MaxBadFrames, after which the connection is closed.
func (c *conn) reject(code, msg, stream string, abusive bool) {
	c.srv.m.badFrames.WithLabelValues(code).Inc()
	c.send(&protocol.Frame{Type: protocol.TypeError, Code: code, Message: msg, Stream: stream})
	if !abusive {
		return
	}
	c.mu.Lock()
	c.bad++
	n := c.bad
	c.mu.Unlock()
	if n >= c.srv.cfg.MaxBadFrames {
		c.log.Info("closing a connection that sends bad frames", zap.Int("badFrames", n))
		c.close(websocket.StatusPolicyViolation, protocol.CloseTooManyErrors)
	}
}

// send queues a control frame, waiting for room (the reader waits, which
// slows down a client that sends commands without reading answers).
func (c *conn) send(f *protocol.Frame) {
	if err := c.q.push(c.ctx, controlFrame(f), false, c.srv.cfg.WriteTimeout); errors.Is(err, errQueueFull) {
		c.slowConsumer()
	}
}

func (c *conn) execute(cmd *protocol.Command) {
	switch cmd.Type {
	case protocol.TypeSubscribe:
		c.subscribe(cmd)
	case protocol.TypeAck, protocol.TypeNack:
		c.mu.Lock()
		a := c.subs[cmd.Stream]
		c.mu.Unlock()
		if a == nil {
			c.reject(protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream), cmd.Stream, false)
			return
		}
		if a.st.durable && !c.principal.Owns(a.st.owner) {
			c.reject(protocol.CodeForbidden, fmt.Sprintf("durable stream %q belongs to another credential", cmd.Stream), cmd.Stream, false)
			return
		}
		if !a.st.post(reply{att: a, batch: cmd.Batch, ack: cmd.Type == protocol.TypeAck, upTo: cmd.UpToSeq, reason: cmd.Reason},
			c.srv.cfg.WriteTimeout) {
			c.srv.m.staleAcks.Inc()
		}
	case protocol.TypeUnsubscribe:
		c.mu.Lock()
		a := c.subs[cmd.Stream]
		delete(c.subs, cmd.Stream)
		c.mu.Unlock()
		if a == nil {
			c.reject(protocol.CodeUnknownStream, fmt.Sprintf("no subscription named %q on this connection", cmd.Stream), cmd.Stream, true)
			return
		}
		c.srv.m.subscribers.Dec()
		a.st.detach(a)
		c.send(&protocol.Frame{Type: protocol.TypeUnsubscribed, Stream: cmd.Stream})
	case protocol.TypePing:
		t := c.srv.tip()
		c.send(&protocol.Frame{Type: protocol.TypePong, Tip: &t})
	}
}

// subscribe starts or attaches a stream.
func (c *conn) subscribe(cmd *protocol.Command) {
	c.mu.Lock()
	_, exists := c.subs[cmd.Stream]
	n := len(c.subs)
	c.mu.Unlock()
	cfg := &c.srv.cfg
	switch {
	case exists:
		c.reject(protocol.CodeStreamExists, fmt.Sprintf("a subscription named %q is already on this connection", cmd.Stream), cmd.Stream, true)
		return
	case n >= cfg.MaxSubscriptions:
		c.reject(protocol.CodeTooManySubscriptions, fmt.Sprintf("at most %d subscriptions per connection", cfg.MaxSubscriptions), cmd.Stream, true)
		return
	case cmd.BatchSize > cfg.MaxBatchSize:
		c.reject(protocol.CodeBadRequest, fmt.Sprintf("batchSize %d is above the limit %d", cmd.BatchSize, cfg.MaxBatchSize), cmd.Stream, true)
		return
	case time.Duration(cmd.BatchTimeout) > cfg.MaxBatchTimeout:
		c.reject(protocol.CodeBadRequest, fmt.Sprintf("batchTimeout is above the limit %s", cfg.MaxBatchTimeout), cmd.Stream, true)
		return
	}
	var filter record.Filter
	var err error
	if cmd.Filter != nil {
		if filter, err = cmd.Filter.History(); err != nil {
			c.reject(protocol.CodeBadFilter, err.Error(), cmd.Stream, true)
			return
		}
	}
	var st *stream
	switch {
	case cmd.Durable:
		st, err = c.srv.openDurable(c.ctx, cmd, filter, c.principal)
	case !c.principal.Allows(auth.ScopeSubscribe):
		err = &subscribeError{protocol.CodeForbidden, "this token has no subscribe scope: it may use durable streams only"}
	default:
		st, err = c.srv.newEphemeral(cmd, filter)
	}
	if err != nil {
		var se *subscribeError
		if errors.As(err, &se) {
			c.reject(se.code, se.msg, cmd.Stream, true)
			return
		}
		c.log.Error("subscribing", zap.String("stream", cmd.Stream), zap.Error(err))
		c.reject(protocol.CodeInternal, "the subscription could not be set up; try again", cmd.Stream, false)
		return
	}
	a := &attachment{conn: c, name: cmd.Stream, st: st, gone: make(chan struct{})}
	acked, _ := st.positions()
	c.mu.Lock()
	if c.ctx.Err() != nil { // the connection ended meanwhile
		c.mu.Unlock()
		if !st.durable {
			c.srv.forgetEphemeral(st)
		}
		return
	}
	c.subs[cmd.Stream] = a
	c.mu.Unlock()
	c.srv.m.subscribers.Inc()
	c.send(&protocol.Frame{Type: protocol.TypeSubscribed, Stream: cmd.Stream, Durable: st.durable, Mode: st.mode,
		Cursor: acked.String(), BatchSize: st.batchSize, BatchTimeout: protocol.Duration(st.batchTimeout),
		Filter: &st.wire, Tip: ptr(c.srv.tip())})
	switch st.attach(a) {
	case "":
	case protocol.CodeShuttingDown:
		c.dropSub(a, protocol.CodeShuttingDown, "the server is shutting down")
		if !st.durable {
			c.srv.forgetEphemeral(st)
		}
	default:
		c.dropSub(a, protocol.CodeStreamDeleted, "the durable stream was deleted")
	}
}

func ptr[T any](v T) *T { return &v }

// dropSub removes a subscription the server ended, telling the client.
func (c *conn) dropSub(a *attachment, code, msg string) {
	c.mu.Lock()
	if c.subs[a.name] != a {
		c.mu.Unlock()
		return
	}
	delete(c.subs, a.name)
	c.mu.Unlock()
	c.srv.m.subscribers.Dec()
	_ = c.q.tryPush(controlFrame(&protocol.Frame{Type: protocol.TypeError, Code: code, Message: msg, Stream: a.name}), false)
}

// writeLoop writes queued frames. A write that takes longer than
// WriteTimeout (the client does not read) trips the watchdog, which cuts
// the client off; a timer reset per write costs less than a context.
func (c *conn) writeLoop() {
	defer c.srv.wg.Done()
	watchdog := time.AfterFunc(time.Hour, func() { c.slowConsumerNow() })
	watchdog.Stop()
	defer watchdog.Stop()
	for {
		f, ok := c.q.pop(c.ctx.Done())
		if !ok {
			return
		}
		watchdog.Reset(c.srv.cfg.WriteTimeout)
		err := c.ws.Write(context.Background(), websocket.MessageText, f.b)
		c.q.done(f)
		if !watchdog.Stop() {
			return // tripped: the connection is being cut off
		}
		if f.pooled {
			putFrameBuf(f.b)
		}
		if err != nil {
			c.close(websocket.StatusInternalError, "")
			return
		}
	}
}

// ping checks that the client answers; one that does not within
// PingTimeout is disconnected. The server's heartbeat loop calls it.
func (c *conn) ping() {
	ctx, cancel := context.WithTimeout(c.ctx, c.srv.cfg.PingTimeout)
	defer cancel()
	err := c.ws.Ping(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.close(websocket.StatusPolicyViolation, protocol.ClosePingTimeout)
	}
}

// subscribed reports whether the connection has subscriptions.
func (c *conn) subscribed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs) > 0
}

// slowConsumer cuts off a client that does not read: its send queue
// stayed full for WriteTimeout.
func (c *conn) slowConsumer() {
	c.closeOnce.Do(func() {
		c.srv.m.slowDropped.Inc()
		c.log.Warn("disconnecting a client that does not read", zap.String("reason", protocol.CloseSlowConsumer))
		c.shutdown(websocket.StatusPolicyViolation, protocol.CloseSlowConsumer)
	})
}

// slowConsumerNow cuts off a client whose socket took a write for longer
// than WriteTimeout. It still tries the close frame naming the reason: the
// close handshake waits (up to its 5 s) for the stuck write, so a client
// that reads again in that time gets its frames, then the close frame with
// the reason instead of a bare end of the connection; one that never reads
// loses the connection when the handshake gives up.
func (c *conn) slowConsumerNow() { c.slowConsumer() }

// close ends the connection with a status and reason (once).
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() { c.shutdown(code, reason) })
}

// shutdown stops the writer and keepalive and closes the socket in the
// background: the close handshake may take seconds with a peer that does
// not read. The reader goes on taking acks and nacks until the socket
// ends; then serve detaches the subscriptions (their round trips end).
func (c *conn) shutdown(code websocket.StatusCode, reason string) {
	if reason != "" {
		c.srv.m.disconnects.WithLabelValues(reason).Inc()
	}
	c.closing.Store(true)
	c.cancel()
	c.q.close()
	c.srv.wg.Add(1)
	go func() {
		defer c.srv.wg.Done()
		_ = c.ws.Close(code, reason)
	}()
}

// subscribeError is a refusal the client is told about.
type subscribeError struct{ code, msg string }

// Error implements error.
func (e *subscribeError) Error() string { return e.code + ": " + e.msg }

// newEphemeral makes a connection's own stream.
func (s *Server) newEphemeral(cmd *protocol.Command, filter record.Filter) (*stream, error) {
	from, err := protocol.ParseFrom(cmd.From)
	if err != nil {
		return nil, &subscribeError{protocol.CodeBadCursor, err.Error()}
	}
	start, err := s.startCursor(filter, from)
	if err != nil {
		return nil, err
	}
	st := s.newStream(cmd, filter)
	st.acked, st.delivered = start, start
	s.mu.Lock()
	s.ephemeral[st] = struct{}{}
	s.mu.Unlock()
	return st, nil
}

// startCursor resolves a starting point to a cursor: origin is a snapshot
// as of the head now, tip the head now.
func (s *Server) startCursor(filter record.Filter, from record.From) (record.Cursor, error) {
	// A reader process may not have reached a cursor another reader gave
	// (the subscription waits for it): valid up to the writer's head.
	head := s.h.CommittedHead()
	if from.Kind == record.FromCursor && max(from.Cursor.Seq, from.Cursor.Snapshot) > head {
		return record.Cursor{}, &subscribeError{protocol.CodeBadCursor,
			fmt.Sprintf("cursor %s is beyond the head of the log (%d)", from.Cursor, head)}
	}
	return s.h.Subscribe(filter, from).Cursor(), nil
}

// forgetEphemeral drops an ended ephemeral stream.
func (s *Server) forgetEphemeral(st *stream) {
	s.mu.Lock()
	delete(s.ephemeral, st)
	s.mu.Unlock()
}

func (s *Server) newStream(cmd *protocol.Command, filter record.Filter) *stream {
	st := &stream{srv: s, name: cmd.Stream, durable: cmd.Durable, mode: cmd.Mode, filter: filter, replies: make(chan reply, replyQueue),
		wire: cmd.Filter.Canonical(), batchSize: cmd.BatchSize, batchTimeout: time.Duration(cmd.BatchTimeout)}
	if st.mode == "" {
		st.mode = protocol.ModeAck
	}
	if st.batchSize == 0 {
		st.batchSize = s.cfg.DefaultBatchSize
	}
	if cmd.BatchTimeout == 0 {
		st.batchTimeout = s.cfg.DefaultBatchTimeout
	}
	return st
}

// streamFromStored makes the stream of a stored durable stream.
func (s *Server) streamFromStored(rec *streamstore.Stream) (*stream, error) {
	filter, err := rec.Filter.History()
	if err != nil {
		return nil, fmt.Errorf("durable stream %s: stored filter: %w", rec.Name, err)
	}
	cur, err := record.ParseCursor(rec.Cursor)
	if err != nil {
		return nil, fmt.Errorf("durable stream %s: stored cursor: %w", rec.Name, err)
	}
	st := &stream{srv: s, name: rec.Name, owner: rec.Owner, durable: true, mode: rec.Mode, filter: filter, wire: rec.Filter.Canonical(), replies: make(chan reply, replyQueue),
		batchSize: rec.BatchSize, batchTimeout: rec.BatchTimeout, acked: cur, delivered: cur, batchNo: rec.Batch,
		records: rec.Records}
	return st, nil
}
