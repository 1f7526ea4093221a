package pipeline

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// NewSystem returns an actor system whose logs go to logger (named "actor").
// protoactor is chatty at info level (every system start, every stop), so
// its messages below warn are kept at debug. Once the system is shut down
// its logs are dropped: protoactor's timers (the dead-letter throttle
// reports a second after the last dead letter) outlive Shutdown, and the
// logger they would write to may be gone by then (a test's logger panics
// when written after its test ends).
func NewSystem(logger *zap.Logger) *actor.ActorSystem {
	core := logger.Named("actor").Core()
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(sys *actor.ActorSystem) *slog.Logger {
			return slog.New(zapslog.NewHandler(quietCore{Core: core, sys: sys}, zapslog.WithName("actor")))
		}),
	)
}

// quietCore lowers protoactor's info messages to debug and drops every
// message written after its system stopped.
type quietCore struct {
	zapcore.Core
	sys *actor.ActorSystem
}

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.sys != nil && c.sys.IsStopped() {
		return ce
	}
	if e.Level == zapcore.InfoLevel {
		e.Level = zapcore.DebugLevel
	}
	if !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core {
	return quietCore{Core: c.Core.With(fields), sys: c.sys}
}
