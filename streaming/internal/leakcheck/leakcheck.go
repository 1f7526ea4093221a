// Package leakcheck is the streaming tests' check that no goroutine
// outlives them (apart from streamtest, which programs outside the tests
// import too).
package leakcheck

import (
	"testing"

	"go.uber.org/goleak"
)

// VerifyTestMain runs a package's tests (for its TestMain) and fails them
// when a goroutine outlives them, but for protoactor's dead-letter
// throttle in the test server, which waits out its interval (a second)
// after a message to an actor that has stopped: a connection's goroutines
// tell its actor they ended, and the actor may be gone by then.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}
