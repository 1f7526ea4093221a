package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/service"
)

func newMigrateCommand() *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "migrate [--check]",
		Short: "Apply the database schema migrations and exit (run applies them at start too)",
		Long: "Apply the pending schema migrations of the configured store (PostgreSQL when MARLOWE_RT_DATABASE_URL\n" +
			"is set, else the embedded SQLite file in the data directory) and exit. With --check, only report the\n" +
			"stored and the latest schema version (exit status 1 when migrations are pending).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			backend, where, err := service.OpenBackend(ctx, &l.Config)
			if err != nil {
				return err
			}
			defer backend.Close()
			m, ok := backend.(service.Migrator)
			if !ok {
				return fmt.Errorf("%s: this store cannot migrate", where)
			}
			if check {
				stored, latest, err := m.SchemaVersion(ctx)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: schema version %d, latest %d\n", where, stored, latest)
				if stored < latest {
					return fmt.Errorf("%d migrations pending", latest-stored)
				}
				return nil
			}
			from, to, err := m.Migrate(ctx)
			if err != nil {
				return err
			}
			if from == to {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: schema version %d is up to date\n", where, to)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: migrated from schema version %d to %d\n", where, from, to)
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), "store", "log")
	cmd.Flags().BoolVar(&check, "check", false, "only report the schema versions")
	return cmd
}

func newHealthcheckCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the local service answers GET /healthz (for container health checks)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			if l.Config.Query.Port == 0 {
				return usageErrorf("query.port is 0: the query API, which serves /healthz, is disabled")
			}
			url := "http://127.0.0.1:" + strconv.Itoa(l.Config.Query.Port) + "/healthz"
			client := &http.Client{Timeout: timeout}
			resp, err := client.Get(url)
			if err != nil {
				return fmt.Errorf("%s: %w", url, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", url, resp.Status)
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), "query")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
