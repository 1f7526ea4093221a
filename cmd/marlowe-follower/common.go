package main

import (
	"context"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

// loadConfig loads the layered configuration for a command whose flags were
// registered with config.RegisterFlags.
func loadConfig(cmd *cobra.Command) (*config.Loaded, error) {
	file, _ := cmd.Flags().GetString("config")
	l, err := config.Load(cmd.Flags(), file, nil)
	if err != nil {
		return nil, usageError{err}
	}
	return l, nil
}

// newLogger builds the logger of the loaded configuration.
func newLogger(l *config.Loaded) (*zap.Logger, error) {
	return config.NewLogger(l.Config.Log)
}

// startCommand sets up a command that runs until it is stopped: the
// logger of the loaded configuration and a context that ends at SIGINT or
// SIGTERM (signalContext). done, deferred, stops listening for the
// signals and flushes the log.
func startCommand(cmd *cobra.Command, l *config.Loaded) (ctx context.Context, log *zap.Logger, done func(), err error) {
	log, err = newLogger(l)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	ctx, stop := signalContext(cmd.Context(), cmd.ErrOrStderr())
	return ctx, log, func() { stop(); _ = log.Sync() }, nil
}

// withConfig is the RunE of a command that starts by loading its layered
// configuration (loadConfig): run is called with it.
func withConfig(run func(cmd *cobra.Command, l *config.Loaded) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		l, err := loadConfig(cmd)
		if err != nil {
			return err
		}
		return run(cmd, l)
	}
}
