package config

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Levels are log levels: a default and overrides per component (the
// logger's name, such as chainsync or history).
type Levels struct {
	Default   zapcore.Level
	Component map[string]zapcore.Level
}

// ParseLevels reads "info" or "info,chainsync=debug,history=warn".
func ParseLevels(s string) (Levels, error) {
	l := Levels{Default: zapcore.InfoLevel, Component: map[string]zapcore.Level{}}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, level, per := strings.Cut(part, "=")
		if !per {
			level = name
		}
		lv, err := zapcore.ParseLevel(strings.TrimSpace(level))
		if err != nil {
			return l, fmt.Errorf("%q: unknown level (debug, info, warn, error)", level)
		}
		if per {
			l.Component[strings.TrimSpace(name)] = lv
		} else {
			l.Default = lv
		}
	}
	return l, nil
}

// enabled reports whether an entry of a logger is logged.
func (l Levels) enabled(name string, lv zapcore.Level) bool {
	if len(l.Component) > 0 {
		// The first part of a logger's name is its component.
		comp, _, _ := strings.Cut(name, ".")
		if min, ok := l.Component[comp]; ok {
			return lv >= min
		}
	}
	return lv >= l.Default
}

// lowest is the most verbose level any component uses.
func (l Levels) lowest() zapcore.Level {
	low := l.Default
	for _, lv := range l.Component {
		low = min(low, lv)
	}
	return low
}

// levelCore filters entries by their logger's component.
type levelCore struct {
	zapcore.Core
	levels Levels
}

func (c levelCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !c.levels.enabled(e.LoggerName, e.Level) {
		return ce
	}
	return c.Core.Check(e, ce)
}

func (c levelCore) With(fields []zapcore.Field) zapcore.Core {
	return levelCore{Core: c.Core.With(fields), levels: c.levels}
}

// NewLogger builds the process's logger from the log settings: JSON lines or
// colourless console text on stderr, with levels per component.
func NewLogger(cfg Log) (*zap.Logger, error) {
	levels, err := ParseLevels(cfg.Level)
	if err != nil {
		return nil, err
	}
	var enc zapcore.Encoder
	switch cfg.Format {
	case "console":
		ec := zap.NewDevelopmentEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		ec := zap.NewProductionEncoderConfig()
		ec.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(ec)
	}
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), levels.lowest())
	return zap.New(levelCore{Core: core, levels: levels}, zap.AddCaller()), nil
}
