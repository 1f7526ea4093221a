package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// signalContext is cancelled by the first SIGINT or SIGTERM, so the command
// shuts down cleanly; a second signal exits at once, after the cleanups
// registered with onForcedExit (the deferred ones do not run then).
func signalContext(parent context.Context, stderr io.Writer) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-ch:
			fmt.Fprintf(stderr, "marlowe-follower: %s: shutting down (send it again to force)\n", sig)
			cancel()
		case <-ctx.Done():
			signal.Stop(ch)
			return
		}
		if sig, ok := <-ch; ok {
			fmt.Fprintf(stderr, "marlowe-follower: %s again: exiting now\n", sig)
			forced.run()
			os.Exit(130)
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}

// forced holds what must be undone even when a second signal ends the
// process at once: temporary directories.
var forced forcedExit

type forcedExit struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// onForcedExit registers f to run before a forced exit; remove forgets it
// (call it once the normal cleanup has run).
func onForcedExit(f func()) (remove func()) {
	forced.mu.Lock()
	defer forced.mu.Unlock()
	if forced.fns == nil {
		forced.fns = map[int]func(){}
	}
	id := forced.next
	forced.next++
	forced.fns[id] = f
	return func() {
		forced.mu.Lock()
		defer forced.mu.Unlock()
		delete(forced.fns, id)
	}
}

func (e *forcedExit) run() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.fns {
		f()
	}
}
