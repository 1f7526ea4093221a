package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at link time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build information",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "marlowe-follower %s\n", version)
			info, ok := debug.ReadBuildInfo()
			if !ok {
				return nil
			}
			fmt.Fprintf(out, "go: %s\n", info.GoVersion)
			for _, s := range info.Settings {
				switch s.Key {
				case "vcs.revision", "vcs.time", "vcs.modified", "GOOS", "GOARCH", "CGO_ENABLED":
					fmt.Fprintf(out, "%s: %s\n", s.Key, s.Value)
				}
			}
			for _, dep := range info.Deps {
				switch dep.Path {
				case "github.com/blinklabs-io/gouroboros", "github.com/jackc/pgx/v5", "github.com/asynkron/protoactor-go":
					fmt.Fprintf(out, "%s: %s\n", dep.Path, dep.Version)
				}
			}
			return nil
		},
	}
}
