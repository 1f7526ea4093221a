package streamtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Raw is a bare WebSocket connection speaking the protocol frame by frame.
// It reads only once Read or TryRead is first called (a test of a client
// that does not read never calls them).
type Raw struct {
	t      testing.TB
	WS     *websocket.Conn
	once   sync.Once
	frames chan rawFrame
}

type rawFrame struct {
	f   *protocol.Frame
	err error
}

// IOLimit bounds a test's dial or write to a server: a watchdog, not a
// speed check, sized for a loaded machine (a CI run with every core
// taken has seen a handshake wait more than 5 s).
const IOLimit = time.Minute

// Dial connects to url; header may be nil.
func Dial(t testing.TB, url string, header http.Header) *Raw {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), IOLimit)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	ws.SetReadLimit(256 << 20)
	r := &Raw{t: t, WS: ws, frames: make(chan rawFrame, 1024)}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return r
}

// reading starts the reader goroutine (once). It ends when the connection
// does.
func (r *Raw) reading() {
	r.once.Do(func() {
		go func() {
			for {
				_, data, err := r.WS.Read(context.Background())
				if err != nil {
					r.frames <- rawFrame{err: err}
					close(r.frames)
					return
				}
				var f protocol.Frame
				if err := json.Unmarshal(data, &f); err != nil {
					err = fmt.Errorf("frame %s: %w", data, err)
				}
				r.frames <- rawFrame{f: &f, err: err}
			}
		}()
	})
}

// Send writes a command.
func (r *Raw) Send(cmd *protocol.Command) {
	r.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	r.SendText(string(b))
}

// SendText writes a text frame.
func (r *Raw) SendText(s string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), IOLimit)
	defer cancel()
	if err := r.WS.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// Read returns the next frame, failing the test after timeout.
func (r *Raw) Read(timeout time.Duration) *protocol.Frame {
	r.t.Helper()
	f, err := r.TryRead(timeout)
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	return f
}

// TryRead returns the next frame or the error: context.DeadlineExceeded
// after timeout (the connection stays usable), the connection's error once
// it is closed.
func (r *Raw) TryRead(timeout time.Duration) (*protocol.Frame, error) {
	r.reading()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case rf, ok := <-r.frames:
		if !ok {
			return nil, net.ErrClosed
		}
		return rf.f, rf.err
	case <-t.C:
		return nil, context.DeadlineExceeded
	}
}

// Next returns the next frame that is not a heartbeat.
func (r *Raw) Next(timeout time.Duration) *protocol.Frame {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		f := r.Read(time.Until(deadline))
		if f.Type != protocol.TypeHeartbeat {
			return f
		}
	}
}

// Expect reads the next non-heartbeat frame and checks its type.
func (r *Raw) Expect(typ string, timeout time.Duration) *protocol.Frame {
	r.t.Helper()
	f := r.Next(timeout)
	if f.Type != typ {
		r.t.Fatalf("got a %s frame (%+v), want %s", f.Type, f, typ)
	}
	return f
}

// Subscribe sends a subscribe command and waits for subscribed.
func (r *Raw) Subscribe(cmd protocol.Command) *protocol.Frame {
	r.t.Helper()
	cmd.Type = protocol.TypeSubscribe
	r.Send(&cmd)
	f := r.Expect(protocol.TypeSubscribed, 5*time.Second)
	if f.Stream != cmd.Stream {
		r.t.Fatalf("subscribed %q, want %q", f.Stream, cmd.Stream)
	}
	return f
}

// Ack acknowledges a batch.
func (r *Raw) Ack(f *protocol.Frame) {
	r.t.Helper()
	r.Send(&protocol.Command{Type: protocol.TypeAck, Stream: f.Stream, Batch: f.Batch})
}

// Collector accumulates records by seq and checks their order.
type Collector struct {
	Records []record.Record
	seen    map[int64]int
	Dups    int
}

// Add appends a batch's records; it returns an error when a record is out
// of order (a seq not above the last one) unless it was seen before (a
// duplicate, counted).
func (c *Collector) Add(recs []record.Record) error {
	if c.seen == nil {
		c.seen = map[int64]int{}
	}
	for _, r := range recs {
		if _, ok := c.seen[r.Seq]; ok {
			c.Dups++
			continue
		}
		if n := len(c.Records); n > 0 && r.Seq <= c.Records[n-1].Seq {
			return fmt.Errorf("record %d after %d: out of order", r.Seq, c.Records[n-1].Seq)
		}
		c.seen[r.Seq] = len(c.Records)
		c.Records = append(c.Records, r)
	}
	return nil
}

// Last returns the highest seq collected (0 when none).
func (c *Collector) Last() int64 {
	if len(c.Records) == 0 {
		return 0
	}
	return c.Records[len(c.Records)-1].Seq
}

// Same checks that got and want hold the same records (seq and kind), in
// order.
func Same(got, want []record.Record) error {
	for i := range min(len(got), len(want)) {
		if got[i].Seq != want[i].Seq || got[i].Kind != want[i].Kind {
			return fmt.Errorf("record %d: got seq %d (%s), want seq %d (%s)", i, got[i].Seq, got[i].Kind, want[i].Seq, want[i].Kind)
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("got %d records, want %d", len(got), len(want))
	}
	return nil
}

// Proxy forwards TCP connections to a streaming server and can cut them
// all at once, like a network failure (no close handshake on either side):
// a storagetest.Proxy.
type Proxy struct{ p *storagetest.Proxy }

// NewProxy listens on a free local port; it stops when the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := storagetest.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &Proxy{p}
}

// URL returns the proxy's WebSocket URL.
func (p *Proxy) URL() string { return "ws://" + p.p.Addr() + "/" }

// DropAll cuts every connection through the proxy; it goes on accepting.
func (p *Proxy) DropAll() { p.p.Drop() }
