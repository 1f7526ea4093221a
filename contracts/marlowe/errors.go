package marlowe

import (
	"errors"
	"fmt"
	"strings"
)

// PathError reports where in a value decoding failed, for example
// "contract.when[0].case.deposits: unknown Value constructor 14". Path
// segments are the core JSON key names, so a path reads the same whether the
// input was Plutus Data or JSON.
type PathError struct {
	// segments in reverse order: the innermost first. Decoders add the segment
	// of each level as the error travels outwards, so success costs nothing.
	segments []string
	Err      error
}

// Path returns the location as a dotted path with [i] for list elements.
func (e *PathError) Path() string {
	var b strings.Builder
	for i := len(e.segments) - 1; i >= 0; i-- {
		s := e.segments[i]
		if b.Len() > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func (e *PathError) Error() string {
	if p := e.Path(); p != "" {
		return p + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

// ErrShape is wrapped by every error about a well-formed value of the wrong shape.
var ErrShape = errors.New("unexpected shape")

// shapeReason is a reason at the current level; it matches ErrShape.
type shapeReason string

func (s shapeReason) Error() string        { return string(s) }
func (s shapeReason) Is(target error) bool { return target == ErrShape }

// shapeError is a reason at the current level.
func shapeError(format string, args ...any) error {
	return &PathError{Err: shapeReason(fmt.Sprintf(format, args...))}
}

// at prefixes err with a key segment.
func at(key string, err error) error {
	if err == nil {
		return nil
	}
	var pe *PathError
	if errors.As(err, &pe) {
		pe.segments = append(pe.segments, key)
		return pe
	}
	return &PathError{segments: []string{key}, Err: err}
}

// atIndex prefixes err with a list index segment.
func atIndex(i int, err error) error {
	if err == nil {
		return nil
	}
	return at(fmt.Sprintf("[%d]", i), err)
}

// eachOf reads every item of a list with item; a failure is marked with the
// index of the item.
func eachOf[S, T any](items []S, item func(S) (T, error)) ([]T, error) {
	out := make([]T, len(items))
	for i, it := range items {
		var err error
		if out[i], err = item(it); err != nil {
			return nil, atIndex(i, err)
		}
	}
	return out, nil
}

// eachInto is eachOf for readers that fill in an item in place.
func eachInto[S, T any](items []S, item func(S, *T) error) ([]T, error) {
	out := make([]T, len(items))
	for i, it := range items {
		if err := item(it, &out[i]); err != nil {
			return nil, atIndex(i, err)
		}
	}
	return out, nil
}
