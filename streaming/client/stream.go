package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Request describes a subscription.
type Request struct {
	// Stream names the subscription (for a durable stream: the stream).
	Stream string
	// Filter selects the records ({All: true} for every record). It may
	// be left empty to resume an existing durable stream.
	Filter protocol.Filter
	// From is where a new stream starts: "origin" (the default), "tip", or
	// a cursor from a batch. After a reconnect an ephemeral stream resumes
	// from its own cursor instead.
	From string
	// Mode is ack (the default) or broadcast.
	Mode protocol.Mode
	// Durable asks for a durable named stream.
	Durable bool
	// BatchSize and BatchTimeout shape batches (0: the server's defaults).
	BatchSize    int
	BatchTimeout time.Duration
	// SkipSeen drops records with a seq not above the highest one Next
	// returned before on this stream: redelivered records are then not
	// seen twice (a batch left empty is acknowledged and skipped).
	SkipSeen bool
}

// Batch is a batch of records from the server.
type Batch struct {
	Stream string
	Number int64
	// Records are the batch's records. Their fields are decoded; each
	// Payload is the payload's JSON as the server sent it (not decoded,
	// not copied: the payloads of a batch share the frame's bytes, in a
	// buffer of up to 16 KiB shared with the frames around it, which a
	// payload kept keeps in memory; copy one to keep it long).
	Records []record.Record
	// Raw holds each record's JSON as the server sent it: Raw[i] is
	// Records[i], for a client that passes records on as they came.
	Raw []json.RawMessage
	// Cursor is the position after the batch.
	Cursor      string
	Tip         protocol.Tip
	Redelivered bool
	conn        *connection
}

// Stream is a subscription of a Client.
type Stream struct {
	c       *Client
	req     Request
	name    []byte // the stream's name in JSON, for acks
	batches chan *Batch
	done    chan struct{}

	mu         sync.Mutex
	on         *connection // the connection the subscribe was sent on
	cursor     string      // where an ephemeral stream resumes
	lastSeq    int64
	err        error
	subscribed chan struct{} // closed at the first subscribed frame
	first      bool
}

// Subscribe starts a stream and waits until the server has accepted it,
// connecting first if needed (it keeps trying until ctx ends). A refused
// subscription returns a *ServerError.
func (c *Client) Subscribe(ctx context.Context, req Request) (*Stream, error) {
	if req.Stream == "" {
		return nil, errors.New("streaming client: Request.Stream is required")
	}
	if req.Mode == "" {
		req.Mode = protocol.ModeAck
	}
	name, err := json.Marshal(req.Stream)
	if err != nil {
		return nil, err
	}
	s := &Stream{c: c, req: req, name: name, batches: make(chan *Batch, 8), done: make(chan struct{}),
		subscribed: make(chan struct{}), cursor: req.From}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if c.closing {
		// Close has taken the streams to end them: a stream added now would
		// wait for ever.
		c.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := c.streams[req.Stream]; ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("streaming client: stream %q is already subscribed", req.Stream)
	}
	c.streams[req.Stream] = s
	k := c.conn
	c.mu.Unlock()
	if k != nil && k.alive() {
		c.subscribeOn(k, s)
	}
	select {
	case <-s.subscribed:
		return s, nil
	case <-s.done:
		c.forget(s)
		return nil, s.Err()
	case <-ctx.Done():
		// The unsubscribe may not wait on a connection that takes no
		// writes any more than Close's handshake would.
		cctx, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		_ = s.Close(cctx)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(s *Stream) {
	c.mu.Lock()
	if c.streams[s.req.Stream] == s {
		delete(c.streams, s.req.Stream)
	}
	c.mu.Unlock()
}

// command is the subscribe command for the stream's current position
// (s.mu held).
func (s *Stream) command() *protocol.Command {
	f := s.req.Filter
	cmd := &protocol.Command{Type: protocol.TypeSubscribe, Stream: s.req.Stream, Filter: &f, From: s.cursor,
		Mode: s.req.Mode, Durable: s.req.Durable, BatchSize: s.req.BatchSize,
		BatchTimeout: protocol.Duration(s.req.BatchTimeout)}
	if s.req.Durable && f.Empty() {
		cmd.Filter = nil
	}
	return cmd
}

// frame handles a frame for this stream; false asks to drop the connection.
func (s *Stream) frame(k *connection, f *frame) bool {
	switch f.typ {
	case protocol.TypeSubscribed:
		s.mu.Lock()
		if !s.first {
			s.first = true
			close(s.subscribed)
		}
		if !s.req.Durable && f.cursor != "" && (s.cursor == "" || s.cursor == "origin" || s.cursor == "tip") {
			// The resolved starting point: resuming from it before the first
			// ack gives the same records, not a new snapshot or tip.
			s.cursor = f.cursor
		}
		s.mu.Unlock()
	case protocol.TypeBatch:
		b := f.newBatch()
		*b = Batch{Stream: s.req.Stream, Number: f.batch, Records: f.records, Raw: f.raw, Cursor: f.cursor, Tip: f.tip,
			Redelivered: f.redelivered, conn: k}
		if s.req.Mode == protocol.ModeBroadcast {
			s.mu.Lock()
			s.cursor = f.cursor
			s.mu.Unlock()
		}
		// Most often there is room (or Next waiting): a send without a
		// select over the four.
		select {
		case s.batches <- b:
		default:
			select {
			case s.batches <- b:
			case <-s.done:
			case <-k.done:
			case <-s.c.ctx.Done():
				return false
			}
		}
	case protocol.TypeError:
		switch f.code {
		case protocol.CodeAckTimeout:
			s.c.log.Info("a batch was not acknowledged in time; the server sends it again", zap.String("stream", s.req.Stream))
		case protocol.CodeUnknownStream:
		case protocol.CodeInternal:
			s.c.log.Warn("the server could not set up the stream; reconnecting", zap.String("stream", s.req.Stream))
			return false
		case protocol.CodeLeaseLost:
			// The server closes the connection: the stream goes on on the
			// next one.
			s.c.log.Info("another server took the durable stream; reconnecting", zap.String("stream", s.req.Stream))
			return false
		default:
			s.fail(&ServerError{Code: f.code, Message: f.message, Stream: s.req.Stream})
			s.c.forget(s)
		}
	}
	return true
}

func (s *Stream) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// Err returns the error that ended the stream, if it ended.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Cursor returns where an ephemeral stream would resume: after its last
// acknowledged batch (broadcast mode: its last received batch).
func (s *Stream) Cursor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cursor
}

// Next returns the next batch, waiting for one. In ack mode batches that
// arrived on a connection that has since dropped are skipped: the server
// sends their records again.
func (s *Stream) Next(ctx context.Context) (*Batch, error) {
	for {
		var b *Batch
		// A batch waiting is taken without a select over the three; an
		// ended stream ends Next first.
		select {
		case <-s.done:
			return nil, s.Err()
		default:
		}
		select {
		case b = <-s.batches:
		default:
			select {
			case b = <-s.batches:
			case <-s.done:
				return nil, s.Err()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.req.Mode == protocol.ModeAck && !b.conn.alive() {
			continue
		}
		if s.req.SkipSeen && !s.skipSeen(b) {
			_ = s.Ack(ctx, b)
			continue
		}
		return b, nil
	}
}

// skipSeen drops records seen before; false when none is left.
func (s *Stream) skipSeen(b *Batch) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Filtered in place (the arrays are the batch's own), once a record
	// seen before is found: none, most often.
	first := 0
	for first < len(b.Records) && b.Records[first].Seq > s.lastSeq {
		first++
	}
	out, raw := b.Records[:first], b.Raw[:first]
	for i := first; i < len(b.Records); i++ {
		if r := b.Records[i]; r.Seq > s.lastSeq {
			out = append(out, r)
			raw = append(raw, b.Raw[i])
		}
	}
	clear(b.Records[len(out):]) // the payloads dropped are not kept alive
	clear(b.Raw[len(raw):])
	b.Records, b.Raw = out, raw
	if n := len(out); n > 0 {
		s.lastSeq = out[n-1].Seq
	}
	return len(out) > 0
}

// Ack acknowledges a batch (ack mode). An ack for a batch whose
// connection has dropped is not sent and returns nil: the batch comes again.
func (s *Stream) Ack(ctx context.Context, b *Batch) error {
	return s.reply(ctx, b, protocol.TypeAck, 0, "")
}

// AckUpTo acknowledges the records of a batch up to seq (ack mode): the
// server sends the batch's later records again, at once, in a new batch.
// A client that used only part of a batch (it stopped half way) acks that
// part. A seq at or past the batch's last record acknowledges the whole
// batch, as Ack.
func (s *Stream) AckUpTo(ctx context.Context, b *Batch, seq int64) error {
	if n := len(b.Records); n == 0 || seq >= b.Records[n-1].Seq {
		return s.Ack(ctx, b)
	}
	if seq <= 0 {
		return nil
	}
	return s.reply(ctx, b, protocol.TypeAck, seq, "")
}

// Nack refuses a batch: the server sends its records again after a delay.
func (s *Stream) Nack(ctx context.Context, b *Batch, reason string) error {
	return s.reply(ctx, b, protocol.TypeNack, 0, reason)
}

// reply sends an ack (of the batch up to upToSeq, if above 0) or a nack.
func (s *Stream) reply(ctx context.Context, b *Batch, typ string, upToSeq int64, reason string) error {
	if s.req.Mode != protocol.ModeAck {
		return nil
	}
	if err := s.Err(); err != nil {
		return err
	}
	k := s.c.current()
	if k == nil || k != b.conn {
		return nil
	}
	var err error
	if typ == protocol.TypeAck {
		err = k.sendAck(ctx, s.name, b.Number, upToSeq)
	} else {
		err = k.send(ctx, &protocol.Command{Type: typ, Stream: s.req.Stream, Batch: b.Number, Reason: reason})
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return nil // the connection is dropping: the batch comes again
	}
	if typ == protocol.TypeAck {
		s.mu.Lock()
		if upToSeq > 0 {
			s.cursor = cursorUpTo(s.cursor, b.Cursor, upToSeq)
		} else {
			s.cursor = b.Cursor
		}
		s.mu.Unlock()
	}
	return nil
}

// cursorUpTo is the position right after the record seq of a batch that
// ends at end, the stream's position before the batch being prev: a
// snapshot cursor when the record belongs to the snapshot (the batch ends
// in it, or the stream was in it and seq is not above it), else a log
// cursor.
func cursorUpTo(prev, end string, seq int64) string {
	e, err := record.ParseCursor(end)
	if err != nil {
		return end
	}
	if e.Snapshot > 0 {
		return record.Cursor{Snapshot: e.Snapshot, Seq: seq}.String()
	}
	if p, err := record.ParseCursor(prev); err == nil && p.Snapshot > 0 && seq <= p.Snapshot {
		return record.Cursor{Snapshot: p.Snapshot, Seq: seq}.String()
	}
	return record.Cursor{Seq: seq}.String()
}

// Close unsubscribes the stream; Next returns ErrClosed afterwards. A
// durable stream stays on the server (delete it through the query API).
func (s *Stream) Close(ctx context.Context) error {
	s.c.forget(s)
	s.fail(ErrClosed)
	if k := s.c.current(); k != nil {
		return k.send(ctx, &protocol.Command{Type: protocol.TypeUnsubscribe, Stream: s.req.Stream})
	}
	return nil
}
