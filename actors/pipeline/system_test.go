package pipeline

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/asynkron/protoactor-go/actor"
)

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

// protoactor's timers outlive Shutdown (the dead-letter throttle reports a
// second later); what they log then must not reach a logger that may be gone.
func TestSystemDropsLogsAfterShutdown(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	sys := NewSystem(zap.New(core))
	sys.Logger().Warn("before")
	sys.Shutdown()
	sys.Logger().Warn("after")
	if logs.FilterMessage("before").Len() != 1 {
		t.Fatal("a warning before Shutdown was dropped")
	}
	if n := logs.FilterMessage("after").Len(); n != 0 {
		t.Fatalf("%d warnings after Shutdown reached the logger", n)
	}
}
