package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
)

func newMigrateCommand() *cobra.Command {
	var check bool
	cmd := &cobra.Command{
		Use:   "migrate [--check]",
		Short: "Apply the database schema migrations and exit (run applies them at start too)",
		Long: "Apply the pending schema migrations of every store (history, contract projection, durable streams, in\n" +
			"that order) to the configured database (PostgreSQL when MARLOWE_RT_DATABASE_URL is set, else the\n" +
			"embedded SQLite files in the data directory) and exit. With --check, change nothing: report each\n" +
			"store's stored and latest schema version and the migrations pending (exit status 1 when any are).",
		Args: exactArgs(0),
		RunE: withConfig(func(cmd *cobra.Command, l *config.Loaded) error {
			ctx := cmd.Context()
			db, where, err := stores.OpenDB(ctx, &l.Config)
			if err != nil {
				return err
			}
			defer db.Close()
			lines, err := stores.MigrationLines(db.Dialect())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if check {
				sts, err := db.Check(ctx, lines...)
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				pending := 0
				for _, st := range sts {
					if st.Current() {
						fmt.Fprintf(out, "%s: %s: schema version %d, latest %d: current\n", where, st.Line, st.Stored, st.Latest)
						continue
					}
					pending += len(st.Pending)
					fmt.Fprintf(out, "%s: %s: schema version %d, latest %d: pending %s\n", where, st.Line, st.Stored,
						st.Latest, strings.Join(st.Pending, ", "))
				}
				if pending > 0 {
					return fmt.Errorf("%d migrations pending", pending)
				}
				return nil
			}
			res, err := db.Migrate(ctx, lines...)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			for _, r := range res {
				if r.From == r.To {
					fmt.Fprintf(out, "%s: %s: schema version %d is up to date\n", where, r.Line, r.To)
				} else {
					fmt.Fprintf(out, "%s: %s: migrated from schema version %d to %d\n", where, r.Line, r.From, r.To)
				}
			}
			return nil
		}),
	}
	config.RegisterFlags(cmd.Flags(), "store", "log")
	cmd.Flags().BoolVar(&check, "check", false, "only report the schema versions; change nothing")
	return cmd
}

func newHealthcheckCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the local service answers GET /healthz (for container health checks)",
		Long: "Exit 0 when the service answers GET /healthz on query.host and query.port (for container health\n" +
			"checks): the address it listens on, or 127.0.0.1 when it listens on every interface or on the default.",
		Args: exactArgs(0),
		RunE: withConfig(func(cmd *cobra.Command, l *config.Loaded) error {
			if l.Config.Query.Port == 0 {
				return usageErrorf("query.port is 0: the query API, which serves /healthz, is disabled")
			}
			url := "http://" + localAddr(net.JoinHostPort(l.Config.Query.Host, strconv.Itoa(l.Config.Query.Port))) + "/healthz"
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
		}),
	}
	config.RegisterFlags(cmd.Flags(), "query.host", "query.port")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	return cmd
}
