package conn

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// Serve is the event stream's writer, on the HTTP handler's goroutine
// once the server actor spawned the actor pid: it writes what the actor
// queues to w as events, each batch within WriteTimeout, until the stream
// ends.
func (e *Events) Serve(w http.ResponseWriter, sys *actor.ActorSystem, pid *actor.PID) {
	e.writeEvents(&eventWriter{timeout: e.d.Config.WriteTimeout, rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10)}, sys, pid)
}

// writeEvents is the event stream's writer, on the HTTP handler's
// goroutine: it writes what the actor queued as events until the stream
// ends (the actor closes it, the client goes, a write fails or times
// out), then tells the actor.
func (e *Events) writeEvents(ev *eventWriter, sys *actor.ActorSystem, pid *actor.PID) {
	slow := false
	for {
		f, ok := e.q.take(e.ctx.Done(), sys, pid)
		if !ok {
			break
		}
		var err error
		if f.parts != nil {
			err = ev.records(f.parts)
		} else {
			err = ev.write(f.b)
		}
		e.q.done(f)
		if err != nil {
			slow = errors.Is(err, errEventTimeout)
			break
		}
	}
	wire.Tell(sys, pid, &eventsEnded{slow: slow})
}

var errEventTimeout = errors.New("event stream: write timed out")

// eventWriter writes events with a write deadline per batch.
type eventWriter struct {
	timeout time.Duration
	rc      *http.ResponseController
	bw      *bufio.Writer
}

// begin sets the deadline of the writes that follow.
func (e *eventWriter) begin() {
	_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
}

func (e *eventWriter) flush() error {
	if err := e.bw.Flush(); err != nil {
		return e.classify(err)
	}
	if err := e.rc.Flush(); err != nil {
		return e.classify(err)
	}
	return nil
}

func (e *eventWriter) classify(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
		return errEventTimeout
	}
	return err
}

// write writes an event (or comment) whole.
func (e *eventWriter) write(b []byte) error {
	e.begin()
	e.bw.Write(b)
	return e.flush()
}

// records writes a batch's records, an event each, whose id is the
// cursor right after the record.
func (e *eventWriter) records(f *wire.FrameParts) error {
	e.begin()
	for i := range f.Records {
		e.bw.WriteString("id: ")
		e.bw.WriteString(f.CursorAfter(i).String())
		e.bw.WriteString("\nevent: record\ndata: ")
		e.bw.Write(f.Recs[i])
		e.bw.WriteString("\n\n")
		if e.bw.Buffered() > 16<<10 {
			if err := e.flush(); err != nil {
				return err
			}
			e.begin()
		}
	}
	return e.flush()
}
