package streaming

import (
	"context"
	"sync"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// replyQueue is how many acks and nacks of one subscription a connection
// may have handed to its stream and not seen taken.
const replyQueue = 16

// chunk is what an event stream's subscription (pump) delivered at once:
// records in seq order,
// the snapshot the subscription was in when it read them (0: the log), and
// the cursor after them.
type chunk struct {
	records  []record.Record
	snapshot int64
	end      record.Cursor
	err      error
}

// cursorAfter returns the position right after the chunk's i-th record.
func (c *chunk) cursorAfter(i int) record.Cursor {
	return wire.CursorAfter(c.records, c.snapshot, c.end, i)
}

// pump reads a subscription on its own goroutine, one chunk per request:
// it reads the next chunk only when its consumer asks for it, so a stream
// holds at most the chunk it is given besides what it buffered itself
// (invariant 6). The consumer asks for the next chunk as soon as it runs
// low, so that a subscription at the tip always has a read waiting for
// the next commit.
type pump struct {
	ch      chan chunk
	want    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	pending bool // a chunk was asked for and not yet taken (consumer's side)
}

// startPump starts reading sub, which the pump owns from now on (it closes
// it when it stops).
func startPump(parent context.Context, wg *sync.WaitGroup, sub *history.Subscription) *pump {
	ctx, cancel := context.WithCancel(parent)
	p := &pump{ch: make(chan chunk), want: make(chan struct{}, 1), cancel: cancel, done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(p.done)
		defer sub.Close()
		for {
			select {
			case <-p.want:
			case <-ctx.Done():
				return
			}
			before := sub.Cursor()
			b, err := sub.Next(ctx)
			c := chunk{records: b.Records, snapshot: before.Snapshot, end: b.Cursor, err: err}
			select {
			case p.ch <- c:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

// request asks for the next chunk, unless one is asked for already, and
// returns the channel it comes on.
func (p *pump) request() <-chan chunk {
	if !p.pending {
		p.pending = true
		p.want <- struct{}{}
	}
	return p.ch
}

// taken records that the chunk asked for was received.
func (p *pump) taken() { p.pending = false }

// stop ends the pump and waits for it.
func (p *pump) stop() {
	p.cancel()
	<-p.done
}
