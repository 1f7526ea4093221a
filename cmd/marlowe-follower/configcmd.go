package main

import (
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

func newConfigCommand() *cobra.Command {
	var sources, reference bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration (secrets redacted)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if reference {
				fmt.Fprint(cmd.OutOrStdout(), config.Reference())
				return nil
			}
			l, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			out, err := l.Redacted()
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), string(out))
			if sources {
				keys := make([]string, 0, len(l.Sources))
				for k := range l.Sources {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				fmt.Fprintln(cmd.OutOrStdout(), "# where each setting comes from:")
				for _, k := range keys {
					fmt.Fprintf(cmd.OutOrStdout(), "# %s: %s\n", k, l.Sources[k])
				}
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().BoolVar(&sources, "sources", false, "also show where each setting comes from")
	cmd.Flags().BoolVar(&reference, "reference", false, "print the reference of every setting as Markdown")
	return cmd
}
