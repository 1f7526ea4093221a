package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/asynkron/protoactor-go/actor"
)

func TestCreditsBlockAtCapacity(t *testing.T) {
	c := NewCredits(2)
	ctx := context.Background()
	for range 2 {
		if err := c.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if c.InFlight() != 2 {
		t.Fatalf("in flight %d", c.InFlight())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := c.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire beyond capacity: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Acquire(ctx) }()
	c.Release(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Release(5) // excess releases are ignored
	if c.InFlight() != 0 {
		t.Fatalf("in flight after release %d", c.InFlight())
	}
}

func TestSystemLogsThroughZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	sys := NewSystem(zap.New(core))
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := sys.Root.PoisonFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	sys.Shutdown()
	if logs.FilterLoggerName("actor").Len() == 0 {
		t.Fatal("protoactor logged nothing through zap")
	}
	for _, e := range logs.All() {
		if e.Level == zapcore.InfoLevel {
			t.Fatalf("protoactor info message not lowered to debug: %q", e.Message)
		}
	}
}
