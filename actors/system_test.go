package actors

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
