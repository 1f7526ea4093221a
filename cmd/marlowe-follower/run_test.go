package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

type stopRecorder struct{ stopped int }

func (s *stopRecorder) Stop(time.Duration) error { s.stopped++; return nil }

// TestStopOnFatal: a service that cannot go on is stopped, and the error
// run ends with (its last line, "marlowe-follower: ...") says it stopped,
// so that it is not read beside the banner's "is running" as a passing
// warning; the cause is kept for errors.Is.
func TestStopOnFatal(t *testing.T) {
	cause := errors.New("this process lost the writer lease")
	svc := &stopRecorder{}
	err := stopOnFatal(svc, zap.NewNop(), cause)
	if svc.stopped != 1 || !errors.Is(err, cause) || !strings.HasPrefix(err.Error(), "stopped: the service cannot go on: ") {
		t.Fatalf("stopped %d times, error %q", svc.stopped, err)
	}
}
