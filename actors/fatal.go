package actors

// FatalError is a failure that no restart can mend (another process writes
// the same store): an actor fails with it (panics with it) so that its
// supervisor stops the pipeline with the reason instead of restarting it.
type FatalError struct{ Err error }

// Fatal wraps err as a FatalError.
func Fatal(err error) *FatalError { return &FatalError{Err: err} }

func (e *FatalError) Error() string { return e.Err.Error() }

func (e *FatalError) Unwrap() error { return e.Err }
