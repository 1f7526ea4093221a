package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed: bad input data, a failed operation
	exitUsage = 2 // the command line itself is wrong
)

// usageError marks an error in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// run executes the command line and returns the process exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "marlowe-follower: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitError
}

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "marlowe-follower",
		Short: "Follow Marlowe contracts on Cardano and serve their history",
		Long: "marlowe-follower follows the Cardano chain from a node's local socket, recognises\n" +
			"Marlowe contract activity, keeps it as an ordered, rollback-aware history and serves it.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentFlags().String("config", "", "YAML configuration file (settings: flags > MARLOWE_RT_* environment > file > defaults)")
	root.AddCommand(newDatumCommand(), newVersionCommand(), newDevnetCommand(), newFollowCommand(), newConfigCommand(), newRunCommand(),
		newMigrateCommand(), newHealthcheckCommand(), newResetCommand(), newTailCommand())
	return root
}

// exactArgs is cobra.ExactArgs reporting a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
