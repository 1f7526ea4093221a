package main

import (
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
