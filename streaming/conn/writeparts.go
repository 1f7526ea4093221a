package conn

import (
	"bufio"
	"context"
	"io"
	"sync"

	"github.com/coder/websocket"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// partsWriters are the buffers frames in parts are written through: one
// per write under way, not per connection. Each Write to a message writer
// is a WebSocket frame of its own; the buffer makes them few and large.
var partsWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, partsBuffer) }}

const partsBuffer = 32 << 10

// writeParts writes a frame in parts as one WebSocket text message: its
// head, the records' shared JSON separated by commas, its tail. A frame
// that fits the buffer goes out as one WebSocket frame; a larger one as a
// few continuation frames, which every client reassembles into the one
// message. progress, when not nil, is called each time a part of a larger
// frame has been handed to the socket: a client that reads lets the writer
// on, one that does not holds it in one write (the budget tells them
// apart by it: SendQueue.progressed).
func writeParts(ctx context.Context, ws *websocket.Conn, f *wire.FrameParts, progress func()) error {
	if f.Size() <= partsBuffer {
		buf := wire.GetFrameBuf(f.Size())
		err := ws.Write(ctx, websocket.MessageText, f.AppendTo(buf))
		wire.PutFrameBuf(buf)
		return err
	}
	w, err := ws.Writer(ctx, websocket.MessageText)
	if err != nil {
		return err
	}
	bw := partsWriters.Get().(*bufio.Writer)
	if progress != nil {
		bw.Reset(progressWriter{w, progress})
	} else {
		bw.Reset(w)
	}
	defer func() {
		bw.Reset(nil)
		partsWriters.Put(bw)
	}()
	_, _ = bw.Write(f.Head)
	for i, r := range f.Recs {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(r)
	}
	_, _ = bw.Write(f.Tail)
	if err := bw.Flush(); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

// progressWriter calls progress after each write to w that went through.
type progressWriter struct {
	w        io.Writer
	progress func()
}

func (p progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if err == nil {
		p.progress()
	}
	return n, err
}
