package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// signalContext is cancelled by the first SIGINT or SIGTERM, so the command
// shuts down cleanly; a second signal exits at once.
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
			os.Exit(130)
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
	}
}
