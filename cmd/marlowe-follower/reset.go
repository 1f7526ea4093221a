package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
)

// Tables of every component in PostgreSQL, dropped by reset.
var resetTables = []string{
	// history
	"records", "contracts", "contract_tags", "contract_parties", "breadcrumbs", "tip", "horizon",
	"utxos", "utxo_changes", "meta", "writer_epoch", "writer_lease", "schema_migrations",
	// contract projection
	"cv_head", "cv_contracts", "cv_contract_tags", "cv_contract_parties", "cv_transactions", "cv_payouts",
	"cv_withdrawals", "cv_sources", "cv_source_links", "cv_source_refs", "cv_schema_migrations",
	// durable streams
	"ws_streams", "ws_history", "ws_schema_migrations",
}

// Tables of the durable streams, dropped by reset --streams.
var resetStreamTables = []string{"ws_streams", "ws_history", "ws_schema_migrations"}

// Files of the embedded store, one per store, as migrate creates them.
var storeFiles = []string{"history.sqlite", "contracts.sqlite", "streams.sqlite"}

// Files of the embedded store and the chain run --devnet keeps beside it,
// removed by reset.
var resetFiles = append(slices.Clone(storeFiles), DevnetChainFile)

// Files of the durable streams, removed by reset --streams.
var resetStreamFiles = []string{"streams.sqlite"}

func newResetCommand() *cobra.Command {
	var yes, force, streams bool
	cmd := &cobra.Command{
		Use:   "reset --yes [--streams] [--force]",
		Short: "Delete everything stored (history, contracts, durable streams) so that the next run follows again",
		Long: "Delete everything the service stored: the history, the contract projection and the durable streams,\n" +
			"in PostgreSQL (MARLOWE_RT_DATABASE_URL) or in the data directory's SQLite files, and the chain run --devnet\n" +
			"keeps in the data directory (" + DevnetChainFile + "; the next run --devnet makes a new one). The next run follows the\n" +
			"chain again from the configured start point. This is the operator's answer to a stored history that no\n" +
			"longer intersects the node's chain (a fork deeper than the points kept); the service never does it by itself.\n" +
			"A data directory that does not exist is left so: there is nothing to delete.\n\n" +
			"It refuses while a service holds the store (the data directory's lock file, or the service's advisory\n" +
			"lock in PostgreSQL): stop the service first. --force deletes anyway.\n\n" +
			"With --streams it deletes only the durable streams (their definitions and cursors): the answer to a\n" +
			"stream store that does not match the history (the service refuses to start with it).",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return usageErrorf("reset deletes everything stored; confirm with --yes")
			}
			l, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			dir := l.Config.Store.DataDir
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && l.Config.Store.DatabaseURL == "" {
				// Taking the lock would make it.
				fmt.Fprintf(cmd.OutOrStdout(), "nothing to reset: the data directory %s does not exist\n", dir)
				return nil
			}
			st := storelock.Store{DatabaseURL: l.Config.Store.DatabaseURL, DataDir: l.Config.Store.DataDir}
			lock, err := storelock.Exclusive(cmd.Context(), st)
			switch {
			case err == nil:
				defer func() { _ = lock.Release() }()
			case errors.Is(err, storelock.ErrInUse) && !force:
				return fmt.Errorf("%w: stop it before reset, or delete anyway with --force (the running service then fails)", err)
			case errors.Is(err, storelock.ErrInUse):
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; deleting anyway (--force)\n", err)
			default:
				return err
			}
			tables, files, what := resetTables, resetFiles, "every marlowe-follower table"
			if streams {
				tables, files, what = resetStreamTables, resetStreamFiles, "the durable streams' tables"
			}
			if url := st.DatabaseURL; url != "" {
				if err := resetPostgres(cmd.Context(), url, tables); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "dropped %s from the PostgreSQL database\n", what)
				if streams {
					return nil
				}
				files = []string{DevnetChainFile} // the history's chain, when run --devnet kept it
			}
			removed, err := resetFilesIn(dir, files)
			if err != nil {
				return err
			}
			if st.DatabaseURL == "" || removed > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "removed %d files from %s\n", removed, dir)
			}
			return nil
		},
	}
	config.RegisterFlags(cmd.Flags(), "store", "log")
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm that everything stored is to be deleted")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while a service holds the store")
	cmd.Flags().BoolVar(&streams, "streams", false, "delete only the durable streams")
	return cmd
}

func resetPostgres(ctx context.Context, url string, tables []string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("store.databaseURL: %w", err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it is a no-op
	for _, t := range tables {
		if _, err := tx.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{t}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("dropping %s: %w", t, err)
		}
	}
	return tx.Commit(ctx)
}

func resetFilesIn(dir string, files []string) (int, error) {
	removed := 0
	for _, base := range files {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			err := os.Remove(filepath.Join(dir, base+suffix))
			switch {
			case err == nil:
				removed++
			case errors.Is(err, fs.ErrNotExist):
			default:
				return removed, err
			}
		}
	}
	return removed, nil
}
