package stream

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/catchup"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// How a stream reads the history. Behind the head it catches up through
// the server's shared catch-up cache (streaming/catchup): a worker
// goroutine reads the next records, at most the room left in the stream's
// buffer (a batch), and answers with a pageMsg, so the stream's Receive
// never waits on the database and what the stream holds is its batch.
// Once a read reaches the head, the stream opens a history.Feed there to go
// live; when the feed falls behind (the store dropped or refused it), the
// stream closes it and catches up through the cache again.

// pageMsg is a catch-up read's answer, for the feed generation gen.
type pageMsg struct {
	gen  int
	from record.Cursor
	res  catchup.Result
	err  error
}

// readState is where the stream's reading of the history stands.
type readState int

const (
	readFree    readState = iota // reading on while the buffer has room
	readCatchUp                  // a catch-up read through the cache is under way
	readWaiting                  // a read failed: reading goes on after RetryDelay (reopenMsg)
	readStopped                  // the history store stopped for good
)

// aheadRetry is how soon a read whose snapshot is beyond this process's
// head (a reader behind its writer) is tried again.
const aheadRetry = 100 * time.Millisecond

// requestPull reads on while the buffer has room: a catch-up read through
// the cache while no feed is open, else the feed's next step.
func (st *Actor) requestPull() {
	if st.read == readWaiting || st.read == readStopped || len(st.atts) == 0 || st.bufLen >= st.batchSize {
		return
	}
	if st.feed == nil {
		// Behind the head, the next batch is read once the pending one is
		// done: a read from the shared cache takes next to no time, and
		// each stream then holds one batch, not two.
		if st.pending == nil {
			st.readCatchUp()
		}
		return
	}
	if st.pullQueued || st.feed.Live() || st.feed.Waiting() {
		// Live, the store delivers; waiting, its answer comes as a
		// Delivery, after which the stream steps again. A pull meanwhile
		// would find nothing and queue the next: a loop spinning until the
		// answer came, one per stream subscribing at once.
		return
	}
	st.pullQueued = true
	wire.Tell(st.sys, st.self, &pullMsg{gen: st.feedGen})
}

// readCatchUp starts a worker reading the records after the buffer's end
// through the catch-up cache, unless one is reading already.
func (st *Actor) readCatchUp() {
	if st.read == readCatchUp {
		return
	}
	st.read = readCatchUp
	q := catchup.Query{Filter: st.filter, From: st.bufEnd, Max: st.batchSize - st.bufLen}
	sys, self, gen, d := st.sys, st.self, st.feedGen, st.d
	// The server waits for the read (Deps.Workers), which its stop ends
	// (it closes the cache and ends Deps.Reads).
	d.Workers.Add(1)
	go func() {
		defer d.Workers.Done()
		ctx, cancel := context.WithTimeout(d.Reads, time.Minute)
		defer cancel()
		res, err := d.CatchUp.Read(ctx, q)
		wire.Tell(sys, self, &pageMsg{gen: gen, from: q.From, res: res, err: err})
	}()
}

// caughtUp takes a catch-up read's answer: its records join the buffer and,
// at the head, the stream opens its feed to go live.
func (st *Actor) caughtUp(m *pageMsg) {
	if st.read == readCatchUp {
		st.read = readFree
	}
	if m.gen != st.feedGen || st.feed != nil || m.from != st.bufEnd {
		return // the stream moved on meanwhile (a new cursor, no connection)
	}
	switch {
	case errors.Is(m.err, catchup.ErrAhead):
		st.read = readWaiting
		sys, self := st.sys, st.self
		time.AfterFunc(aheadRetry, func() { wire.Tell(sys, self, &reopenMsg{}) })
		return
	case m.err != nil:
		st.readFailed(m.err)
		return
	}
	st.received(chunk{records: m.res.Records, json: m.res.JSON, snapshot: m.from.Snapshot, end: m.res.Cursor})
	st.bufEnd = m.res.Cursor
	if m.res.AtHead {
		st.openFeed(m.res.Cursor)
	}
}

// openFeed starts the live feed after from (at the head).
func (st *Actor) openFeed(from record.Cursor) {
	st.stopFeed()
	st.feed = st.d.History.Feed(st.sys, st.self, st.filter, record.From{Kind: record.FromCursor, Cursor: from})
	// The feed reads only what was committed since the catch-up read
	// reached the head: about a batch at most.
	st.feed.SetPageSize(st.batchSize)
	st.bufEnd = from
}

func (st *Actor) stopFeed() {
	if st.feed != nil {
		st.feed.Close()
		st.feed = nil
	}
	st.feedGen++
}

// pull takes the feed's next step: it asks the store to go live at the
// head, or reads the few records committed since the catch-up reached it.
// When it had to read, the stream catches up through the cache again
// rather than read more here.
func (st *Actor) pull() {
	if st.bufLen >= st.batchSize {
		return
	}
	before := st.feed.Cursor()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	b, ok, err := st.feed.Next(ctx)
	cancel()
	if err != nil {
		st.readFailed(err)
		return
	}
	if ok {
		st.received(chunk{records: b.Records, snapshot: before.Snapshot, end: b.Cursor})
		if st.feed != nil && !st.feed.Live() {
			st.bufEnd = st.feed.Cursor()
			st.stopFeed()
		}
	}
}

// fellBehind: the feed is no longer live (the store dropped or refused it,
// or its writer changed): catch up through the cache from the buffer's end.
func (st *Actor) fellBehind() {
	st.stopFeed()
}

// readFailed stops reading after an error and reads again after
// RetryDelay (not at all once the history store stopped for good).
func (st *Actor) readFailed(err error) {
	st.stopFeed()
	if errors.Is(err, history.ErrStoreStopped) {
		st.read = readStopped
		return
	}
	st.read = readWaiting
	st.log().Error("reading the history failed; reading again", zap.Error(err), zap.Duration("after", st.d.Config.RetryDelay))
	sys, self := st.sys, st.self
	time.AfterFunc(st.d.Config.RetryDelay, func() { wire.Tell(sys, self, &reopenMsg{}) })
}

// received buffers a chunk of records. A live chunk that finds the
// buffer full is not kept: the feed closes, and the stream catches up from
// the end of the buffer when there is room, reading those records again.
func (st *Actor) received(ch chunk) {
	if len(ch.records) == 0 {
		return
	}
	if st.bufLen >= st.batchSize {
		st.stopFeed()
		return
	}
	if st.bufLen == 0 {
		st.bufSince = time.Now()
	}
	st.buf = append(st.buf, ch)
	st.bufLen += len(ch.records)
	st.bufEnd = ch.end
}
