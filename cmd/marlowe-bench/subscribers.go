package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// The kinds of WebSocket subscriber.
const (
	// clientRaw is a bare WebSocket (the library streaming/client uses)
	// that takes the batch number, and each record's seq and block number,
	// out of the frame's text without decoding it, and acks: what a
	// subscriber cannot do without, so that the figures are the server's.
	clientRaw = "raw"
	// clientGo is the Go client, streaming/client, as an application uses it.
	clientGo = "go"
)

// receipt is a record a subscriber received: its seq, its block and when
// the frame arrived (Unix ns).
type receipt struct {
	seq   int64
	block uint64
	at    int64
}

// tally is what one subscriber saw. Only the subscriber writes it, until
// it has stopped (but block, which others read while it runs).
type tally struct {
	// last is the last seq received; count the records received.
	last, count int64
	// disorder counts records whose seq was not the one after the last.
	disorder int64
	// receipts are kept when asked (the tip phases).
	receipts []receipt
	keep     bool
	// done is when the subscriber had every record up to its goal.
	done time.Time
	err  error
	// seq is last, for other goroutines.
	seq atomic.Int64
}

// add notes a record.
func (t *tally) add(seq int64, block uint64, at int64) {
	if t.last != 0 && seq != t.last+1 {
		t.disorder++
	}
	t.last = seq
	t.count++
	t.seq.Store(seq)
	if t.keep {
		t.receipts = append(t.receipts, receipt{seq, block, at})
	}
}

// subscriber is one WebSocket subscriber of either kind, with one stream.
// Once connected it reads (so it answers the server's pings) and notes
// the records it gets in its tally, acking every batch, until it has the
// goal seq (0: until closed).
type subscriber interface {
	// subscribe asks for the stream from a starting point and waits until
	// the server has accepted it.
	subscribe(ctx context.Context, from string) error
	// wait returns once the subscriber has stopped reading.
	wait()
	// close disconnects.
	close()
}

// dialSubscriber connects a subscriber of the given kind that notes what
// it gets in t.
func dialSubscriber(ctx context.Context, kind, url string, t *tally, goal int64) (subscriber, error) {
	switch kind {
	case clientRaw:
		ws, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			return nil, err
		}
		ws.SetReadLimit(-1)
		s := &rawSubscriber{ws: ws, t: t, goal: goal, subscribed: make(chan error, 1), done: make(chan struct{})}
		go s.read()
		return s, nil
	case clientGo:
		c, err := client.New(client.Options{URL: url})
		if err != nil {
			return nil, err
		}
		return &goSubscriber{c: c, t: t, goal: goal, done: make(chan struct{})}, nil
	}
	return nil, fmt.Errorf("unknown subscriber kind %q", kind)
}

// dialAll connects a subscriber for each tally, parallel connections at a
// time; on a failure it closes those it made.
func dialAll(ctx context.Context, kind, url string, tallies []tally, goal int64, parallel int) ([]subscriber, error) {
	subs := make([]subscriber, len(tallies))
	err := inParallel(len(subs), parallel, func(i int) (err error) {
		subs[i], err = dialSubscriber(ctx, kind, url, &tallies[i], goal)
		return err
	})
	if err != nil {
		closeAll(subs)
		return nil, fmt.Errorf("connecting %d %s subscribers: %w", len(subs), kind, err)
	}
	return subs, nil
}

// subscribeAll subscribes every subscriber from the same point, parallel
// at a time.
func subscribeAll(ctx context.Context, subs []subscriber, from string, parallel int) error {
	err := inParallel(len(subs), parallel, func(i int) error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return subs[i].subscribe(sctx, from)
	})
	if err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	return nil
}

// inParallel runs do(0..n-1), parallel at a time, and returns the first
// error.
func inParallel(n, parallel int, do func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = do(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// closeAll closes the subscribers, all at once (a Go client's close waits
// for the close handshake), and waits until they have stopped.
func closeAll(subs []subscriber) {
	_ = inParallel(len(subs), len(subs), func(i int) error {
		if subs[i] != nil {
			subs[i].close()
			subs[i].wait()
		}
		return nil
	})
}

// streamName is the one stream each subscriber has.
const streamName = "f"

// rawSubscriber is a clientRaw subscriber: one goroutine reads its frames
// and acks them.
type rawSubscriber struct {
	ws         *websocket.Conn
	t          *tally
	goal       int64
	subscribed chan error // the answer to the subscribe
	answered   bool
	done       chan struct{}
	closed     atomic.Bool
}

func (s *rawSubscriber) subscribe(ctx context.Context, from string) error {
	if err := s.ws.Write(ctx, websocket.MessageText, streamtest.SubscribeAll(streamName, from)); err != nil {
		return err
	}
	select {
	case err := <-s.subscribed:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read is the subscriber's goroutine.
func (s *rawSubscriber) read() {
	defer close(s.done)
	t := s.t
	err := s.follow()
	if !s.answered {
		s.subscribed <- fmt.Errorf("no answer to the subscribe: %w", err)
	}
	if err != nil && !s.closed.Load() {
		t.err = err
	}
	if s.goal > 0 && t.last >= s.goal {
		t.done = time.Now()
	}
}

func (s *rawSubscriber) follow() error {
	t := s.t
	var buf bytes.Buffer
	for s.goal == 0 || t.last < s.goal {
		// No read context: close ends a read by closing the socket.
		_, r, err := s.ws.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			return err
		}
		now, data := time.Now().UnixNano(), buf.Bytes()
		switch streamtest.FrameKind(data) {
		case "subscribed":
			s.answered = true
			s.subscribed <- nil
			continue
		case "error":
			return fmt.Errorf("error frame: %s", data)
		case "":
			continue // neither a batch nor an answer
		}
		records := streamtest.ScanRecords(data, func(seq int64, block uint64) { t.add(seq, block, now) })
		batch, ok := streamtest.BatchNumber(data)
		if records == 0 || !ok {
			return fmt.Errorf("a batch frame without the records or the batch number the raw subscriber looks for: %.200s", data)
		}
		if err := s.ws.Write(context.Background(), websocket.MessageText, streamtest.AckText(streamName, batch)); err != nil {
			return err
		}
	}
	return nil
}

func (s *rawSubscriber) wait() { <-s.done }

func (s *rawSubscriber) close() {
	s.closed.Store(true)
	_ = s.ws.CloseNow()
}

// goSubscriber is a clientGo subscriber: the client reads the connection;
// a goroutine takes its batches (Next) and acks them.
type goSubscriber struct {
	c      *client.Client
	t      *tally
	goal   int64
	done   chan struct{}
	closed atomic.Bool
	began  atomic.Bool
}

func (s *goSubscriber) subscribe(ctx context.Context, from string) error {
	st, err := s.c.Subscribe(ctx, client.Request{Stream: streamName, From: from, Filter: protocol.Filter{All: true}})
	if err != nil {
		return err
	}
	s.began.Store(true)
	go func() {
		defer close(s.done)
		err := s.follow(st)
		if err != nil && !s.closed.Load() {
			s.t.err = err
		}
		if s.goal > 0 && s.t.last >= s.goal {
			s.t.done = time.Now()
		}
	}()
	return nil
}

func (s *goSubscriber) follow(st *client.Stream) error {
	ctx := context.Background() // close ends Next
	t := s.t
	for s.goal == 0 || t.last < s.goal {
		b, err := st.Next(ctx)
		if err != nil {
			if errors.Is(err, client.ErrClosed) && s.closed.Load() {
				return nil
			}
			return err
		}
		now := time.Now().UnixNano()
		for i := range b.Records {
			t.add(b.Records[i].Seq, b.Records[i].Block.BlockNo, now)
		}
		if err := st.Ack(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

func (s *goSubscriber) wait() {
	if s.began.Load() {
		<-s.done
	}
}

func (s *goSubscriber) close() {
	s.closed.Store(true)
	_ = s.c.Close()
}
