package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlitestore"
)

// failOn makes the history store's writer fail on every Step with the
// error fail returns.
func failOn(fail func() any) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if _, ok := env.Message.(*history.Step); ok {
				panic(fail())
			}
			next(c, env)
		}
	}
}

func startStoreOnly(t *testing.T, mw actor.ReceiverMiddleware) *Pipeline {
	t.Helper()
	ctx := context.Background()
	hb := devnetHistory(t)
	p, err := Start(ctx, Config{Logger: zaptest.NewLogger(t), History: hb, MaxRestarts: 3, RestartWindow: time.Hour,
		Middleware: []actor.ReceiverMiddleware{mw}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Minute) })
	return p
}

// sendStep sends a step to the running store, waiting for one to run.
func sendStep(t *testing.T, p *Pipeline) {
	t.Helper()
	for {
		if pid := p.Child(Store); pid != nil {
			p.System.Root.Send(pid, &history.Step{})
			return
		}
		select {
		case <-p.Done():
			t.Fatalf("the pipeline stopped: %v", p.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestKeepsFailingStopsThePipeline: a child that fails more than
// MaxRestarts times within RestartWindow is restarted that many times
// (a fresh writer each time), then the pipeline stops and says why.
func TestKeepsFailingStopsThePipeline(t *testing.T) {
	p := startStoreOnly(t, failOn(func() any { return "boom" }))
	for i := range 4 {
		sendStep(t, p)
		if i < 3 {
			for p.Restarts(Store) < i+1 {
				select {
				case <-p.Done():
					t.Fatalf("stopped after %d restarts: %v", p.Restarts(Store), p.Err())
				case <-time.After(5 * time.Millisecond):
				}
			}
		}
	}
	<-p.Done()
	err := p.Err()
	if err == nil || !strings.Contains(err.Error(), "the history store failed 4 times within 1h0m0s: boom") {
		t.Fatalf("the pipeline's reason: %v", err)
	}
	if n := p.Restarts(Store); n != 3 {
		t.Fatalf("%d restarts, want 3", n)
	}
	sub := p.Handle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip})
	if _, err := sub.Next(context.Background()); !errors.Is(err, history.ErrStoreStopped) {
		t.Fatalf("a subscription after the stop: %v", err)
	}
}

// TestFatalStopsThePipeline: a child failing with an error no restart
// can mend (here history.ErrAnotherWriter, wrapped) stops the pipeline at
// once, with that error.
func TestFatalStopsThePipeline(t *testing.T) {
	p := startStoreOnly(t, failOn(func() any { return fmt.Errorf("commit: %w", history.ErrAnotherWriter) }))
	sendStep(t, p)
	<-p.Done()
	if err := p.Err(); !errors.Is(err, history.ErrAnotherWriter) {
		t.Fatalf("the pipeline's reason: %v", err)
	}
	if n := p.Restarts(Store); n != 0 {
		t.Fatalf("%d restarts after a fatal error", n)
	}
}

// TestPermanentFailures: the decider stops the pipeline on the stages'
// sentinel errors for failures no restart mends, however wrapped, and on
// nothing else.
func TestPermanentFailures(t *testing.T) {
	for _, err := range []error{history.ErrAnotherWriter, history.ErrFenced, history.ErrHeadWentBack, errSinkRefused} {
		if !permanent(fmt.Errorf("a: %w", fmt.Errorf("b: %w", err))) {
			t.Errorf("%v: not permanent", err)
		}
	}
	for _, err := range []error{errors.New("boom"), context.DeadlineExceeded, history.ErrStoreStopped} {
		if permanent(err) {
			t.Errorf("%v: permanent", err)
		}
	}
}

// devnetHistory is an initialised SQLite history of the devnet's network,
// closed when the test ends.
func devnetHistory(t *testing.T) *sqlitestore.Store {
	t.Helper()
	ctx := context.Background()
	hb, err := sqlitestore.Open(ctx, t.TempDir(), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hb.Close() })
	if err := hb.Init(ctx, &history.InitParams{NetworkMagic: devnet.NetworkMagic}); err != nil {
		t.Fatal(err)
	}
	return hb
}
