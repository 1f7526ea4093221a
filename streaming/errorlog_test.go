package streaming

import (
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestHTTPErrorLogger: net/http's errors are logged at WARN at least, and a
// logger set to ERROR keeps its level without zap's complaint on stderr
// ("failed to IncreaseLevel", printed at every start with --log-level error).
func TestHTTPErrorLogger(t *testing.T) {
	for _, level := range []zapcore.Level{zap.DebugLevel, zap.InfoLevel, zap.WarnLevel, zap.ErrorLevel} {
		core, logs := observer.New(level)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		l := zap.New(core, zap.ErrorOutput(zapcore.AddSync(w)))
		hl := httpErrorLogger(l)
		hl.Info("probe")
		hl.Warn("warned")
		_ = w.Close()
		var buf [512]byte
		n, _ := r.Read(buf[:])
		_ = r.Close()
		if n > 0 {
			t.Errorf("level %s: zap complained: %s", level, strings.TrimSpace(string(buf[:n])))
		}
		if got := logs.FilterMessage("probe").Len(); got != 0 {
			t.Errorf("level %s: an INFO line of net/http's logger came through", level)
		}
		if want, got := level <= zap.WarnLevel, logs.FilterMessage("warned").Len() == 1; want != got {
			t.Errorf("level %s: WARN line logged %v, want %v", level, got, want)
		}
	}
}
