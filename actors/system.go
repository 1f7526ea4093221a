// Package actors holds what the pipeline's actors share: the actor system,
// wired so that protoactor's own logs go through the process's zap logger,
// and FatalError, the failure a supervisor stops on instead of restarting.
package actors

import (
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// NewSystem returns an actor system whose logs go to logger (named "actor").
// protoactor is chatty at info level (every system start, every stop), so
// its messages below warn are kept at debug.
func NewSystem(logger *zap.Logger) *actor.ActorSystem {
	core := logger.Named("actor").Core()
	handler := zapslog.NewHandler(quietCore{core}, zapslog.WithName("actor"))
	return actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(handler) }),
	)
}

// quietCore lowers protoactor's info messages to debug.
type quietCore struct{ zapcore.Core }

func (c quietCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level == zapcore.InfoLevel {
		e.Level = zapcore.DebugLevel
	}
	if !c.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, c)
}

func (c quietCore) With(fields []zapcore.Field) zapcore.Core { return quietCore{c.Core.With(fields)} }
