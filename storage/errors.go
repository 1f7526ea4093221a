package storage

import "errors"

// ErrClosed is returned by a storage handle after Close.
var ErrClosed = errors.New("storage closed")
