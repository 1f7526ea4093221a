// Package client is the Go client of marlowe-follower's streaming API. A
// Client keeps one WebSocket to the server, reconnecting with capped
// exponential backoff, and carries any number of Streams on it. After a
// reconnect each stream is subscribed again: an ephemeral stream from the
// cursor of its last acknowledged batch (in broadcast mode: its last
// received batch), a durable stream by its name (the server resumes it
// after its last ack).
//
// In ack mode delivery is at least once: a batch that was not acknowledged
// on the connection that delivered it comes again (Batch.Redelivered) on the
// next one. Applications apply records idempotently, or deduplicate by seq
// (Request.SkipSeen does it for them).
//
//	c, _ := client.New(client.Options{URL: "ws://127.0.0.1:3781/"})
//	defer c.Close()
//	s, _ := c.Subscribe(ctx, client.Request{Stream: "all", Filter: protocol.Filter{All: true}})
//	for {
//		b, err := s.Next(ctx)
//		if err != nil { ... }
//		apply(b.Records)
//		s.Ack(ctx, b)
//	}
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Defaults of Options.
const (
	DefaultMinBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff    = 10 * time.Second
	DefaultDialTimeout   = 10 * time.Second
	DefaultMaxFrameBytes = 256 << 20
)

// Errors.
var (
	// ErrClosed: the client or the stream was closed.
	ErrClosed = errors.New("streaming client: closed")
	// ErrUnauthorized: the server refused the token; the client stops.
	ErrUnauthorized = errors.New("streaming client: the server refused the token")
)

// ServerError is an error frame from the server about a stream: the stream
// ends with it (a refused subscription, a deleted durable stream).
type ServerError struct {
	Code    string
	Message string
	Stream  string
}

// Error implements error.
func (e *ServerError) Error() string {
	return fmt.Sprintf("stream %q: %s: %s", e.Stream, e.Code, e.Message)
}

// Options configure a Client.
type Options struct {
	// URL of the streaming endpoint, ws://host:port/ or wss://...
	URL string
	// Token, when set, is sent as a bearer token.
	Token string
	// Header holds more handshake headers.
	Header http.Header
	// MinBackoff and MaxBackoff bound the wait between reconnection
	// attempts: it doubles after each failure, with jitter, up to MaxBackoff.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration
	// MaxFrameBytes is the largest frame accepted from the server.
	MaxFrameBytes int64
	// HTTPClient makes the handshake (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Logger (nil: no logs).
	Logger *zap.Logger
}

// Client is a connection to the streaming server shared by streams.
type Client struct {
	opts   Options
	log    *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// tip is the newest tip the server reported, under tipMu (a value, not
	// a pointer swapped: no allocation per frame).
	tipMu sync.Mutex
	tip   protocol.Tip

	mu      sync.Mutex
	closing bool        // Close was called
	conn    *connection // the current connection, nil while disconnected
	streams map[string]*Stream
	err     error // terminal error
	// Connects counts successful connections (tests and metrics).
	connects atomic.Int64
	// badFrames counts the frames the client could not decode.
	badFrames atomic.Int64
}

// New starts a client; it connects in the background and keeps
// reconnecting until Close.
func New(opts Options) (*Client, error) {
	if opts.URL == "" {
		return nil, errors.New("streaming client: Options.URL is required")
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.MinBackoff)
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = DefaultDialTimeout
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{opts: opts, log: log.Named("streaming.client"), ctx: ctx, cancel: cancel,
		streams: map[string]*Stream{}}
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// Close disconnects and ends every stream (Next returns ErrClosed).
func (c *Client) Close() error {
	c.mu.Lock()
	// closing and conn under one lock: either serve has set conn and
	// Close closes it, or serve sees closing and closes it itself.
	c.closing = true
	k := c.conn
	streams := c.streams
	c.streams = map[string]*Stream{}
	c.mu.Unlock()
	// The streams end first, so that the reader does not wait to hand them
	// a batch; then the connection closes with a handshake: the server
	// reads every command sent before (the last ack) before the socket
	// goes. Closing the socket at once, with frames unread, resets it, and
	// the server may never read that ack.
	for _, s := range streams {
		s.fail(ErrClosed)
	}
	done := make(chan struct{})
	if k != nil {
		go func() {
			defer close(done)
			_ = k.ws.Close(websocket.StatusNormalClosure, "")
		}()
		select {
		case <-done:
		case <-time.After(closeWait):
		}
	} else {
		close(done)
	}
	c.cancel()
	if k != nil {
		_ = k.ws.CloseNow()
	}
	<-done
	c.wg.Wait()
	return nil
}

// closeWait bounds Close's handshake with the server.
const closeWait = 2 * time.Second

// Tip returns the newest tip the server reported (zero before any).
func (c *Client) Tip() protocol.Tip {
	c.tipMu.Lock()
	defer c.tipMu.Unlock()
	return c.tip
}

// Connects returns how many times the client connected.
func (c *Client) Connects() int64 { return c.connects.Load() }

// BadFrames returns how many frames from the server the client could not
// decode (each dropped its connection: a FrameError in the log).
func (c *Client) BadFrames() int64 { return c.badFrames.Load() }

// connection is one WebSocket.
type connection struct {
	ws   *websocket.Conn
	done chan struct{}
}

func (k *connection) alive() bool {
	select {
	case <-k.done:
		return false
	default:
		return true
	}
}

func (k *connection) send(ctx context.Context, cmd *protocol.Command) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	return k.ws.Write(ctx, websocket.MessageText, b)
}

// sendAck sends an ack written by hand (the bulk of what a client sends),
// in a buffer of a pool: the WebSocket keeps no reference to it once
// Write returns.
func (k *connection) sendAck(ctx context.Context, stream []byte, batch, upToSeq int64) error {
	bp := ackBuffers.Get().(*[]byte)
	defer ackBuffers.Put(bp)
	b := append((*bp)[:0], `{"type":"ack","stream":`...)
	b = append(b, stream...)
	b = append(b, `,"batch":`...)
	b = strconv.AppendInt(b, batch, 10)
	if upToSeq > 0 {
		b = append(b, `,"upToSeq":`...)
		b = strconv.AppendInt(b, upToSeq, 10)
	}
	b = append(b, '}')
	*bp = b
	return k.ws.Write(ctx, websocket.MessageText, b)
}

// ackBuffers are the buffers acks are written in.
var ackBuffers = sync.Pool{New: func() any {
	b := make([]byte, 0, 128)
	return &b
}}

// run connects, serves the connection, and reconnects with backoff.
func (c *Client) run() {
	defer c.wg.Done()
	attempt := 0
	for c.ctx.Err() == nil {
		k, err := c.dial()
		if err != nil {
			if errors.Is(err, ErrUnauthorized) {
				c.terminate(err)
				return
			}
			c.log.Debug("connecting failed", zap.Error(err), zap.Int("attempt", attempt+1))
		} else {
			c.connects.Add(1)
			if c.serve(k) {
				attempt = 0 // the connection worked: start the backoff over
			}
		}
		if !c.sleep(c.backoff(attempt)) {
			return
		}
		attempt++
	}
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.MinBackoff << min(attempt, 20)
	if d <= 0 || d > c.opts.MaxBackoff {
		d = c.opts.MaxBackoff
	}
	// ±20% jitter, so that many clients do not reconnect in step.
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (c *Client) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.ctx.Done():
		return false
	}
}

func (c *Client) dial() (*connection, error) {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	defer cancel()
	h := http.Header{}
	for k, v := range c.opts.Header {
		h[k] = v
	}
	if c.opts.Token != "" {
		h.Set("Authorization", "Bearer "+c.opts.Token)
	}
	ws, resp, err := websocket.Dial(ctx, c.opts.URL, &websocket.DialOptions{HTTPClient: c.opts.HTTPClient, HTTPHeader: h})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, ErrUnauthorized
		}
		return nil, err
	}
	ws.SetReadLimit(c.opts.MaxFrameBytes)
	return &connection{ws: ws, done: make(chan struct{})}, nil
}

// serve subscribes every stream on a new connection and reads it until it
// ends. It reports whether the connection got as far as a subscription.
func (c *Client) serve(k *connection) bool {
	c.mu.Lock()
	c.conn = k
	closed := c.closing // Close ran before: it did not see k
	streams := make([]*Stream, 0, len(c.streams))
	for _, s := range c.streams {
		streams = append(streams, s)
	}
	c.mu.Unlock()
	if closed {
		_ = k.ws.CloseNow()
	}
	for _, s := range streams {
		c.subscribeOn(k, s)
	}
	ok := c.readLoop(k)
	c.mu.Lock()
	if c.conn == k {
		c.conn = nil
	}
	c.mu.Unlock()
	close(k.done)
	_ = k.ws.CloseNow()
	return ok
}

// subscribeOn sends a stream's subscribe command on a connection, once.
func (c *Client) subscribeOn(k *connection, s *Stream) {
	s.mu.Lock()
	if s.on == k || s.err != nil {
		s.mu.Unlock()
		return
	}
	s.on = k
	cmd := s.command()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.DialTimeout)
	defer cancel()
	if err := k.send(ctx, cmd); err != nil {
		c.log.Debug("sending subscribe failed", zap.String("stream", s.req.Stream), zap.Error(err))
		_ = k.ws.CloseNow()
	}
}

// readLoop reads the connection's frames until it ends. It reports
// whether the connection got as far as a subscription and served well: an
// undecodable frame drops the connection without resetting the backoff.
func (c *Client) readLoop(k *connection) bool {
	subscribed := false
	// A batch's records keep the frame's bytes (their payloads are not
	// copied one by one): each frame is read into bytes of its own.
	var fr frameReader
	var dec decoder
	var f frame
	for {
		// No context: Close ends a read by closing the connection (a read
		// context costs a registration per read).
		_, r, err := k.ws.Reader(context.Background())
		var data []byte
		if err == nil {
			data, err = fr.next(r)
		}
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Debug("connection lost", zap.Error(err), zap.Stringer("status", websocket.CloseStatus(err)))
			}
			return subscribed
		}
		if err := dec.decode(data, &f); err != nil {
			c.badFrames.Add(1)
			var fe *FrameError
			errors.As(err, &fe)
			c.log.Warn("undecodable frame from the server; reconnecting", zap.Error(err), zap.ByteString("frame", fe.Frame))
			return false
		}
		if f.hasTip {
			c.tipMu.Lock()
			c.tip = f.tip
			c.tipMu.Unlock()
		}
		if f.typ == protocol.TypeSubscribed {
			subscribed = true
		}
		c.mu.Lock()
		s := c.streams[string(f.stream)]
		c.mu.Unlock()
		if s == nil {
			continue
		}
		if !s.frame(k, &f) {
			return subscribed
		}
	}
}

// terminate ends every stream with a terminal error.
func (c *Client) terminate(err error) {
	c.mu.Lock()
	c.err = err
	streams := c.streams
	c.streams = map[string]*Stream{}
	c.mu.Unlock()
	for _, s := range streams {
		s.fail(err)
	}
}

// current returns the live connection, if any.
func (c *Client) current() *connection {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil && c.conn.alive() {
		return c.conn
	}
	return nil
}
