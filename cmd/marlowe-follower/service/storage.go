package service

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// OpenStorage opens the configured database and says where it is. It
// creates nothing: SQLite files are opened when a store or Migrate needs
// them.
func OpenStorage(ctx context.Context, cfg *config.Config) (storage.DB, string, error) {
	if cfg.Store.DatabaseURL != "" {
		pg, err := storage.OpenPostgres(ctx, cfg.Store.DatabaseURL, storage.PostgresOptions{})
		if err != nil {
			return nil, "", fmt.Errorf("store.databaseURL: %w", err)
		}
		return pg, "postgresql", nil
	}
	dir := filepath.Clean(cfg.Store.DataDir)
	lite, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("store.dataDir: %w", err)
	}
	return lite, "sqlite " + dir, nil
}

// MigrationLines returns the migration lines of the three stores in the
// order they are applied: history, contracts, streams.
func MigrationLines(d storage.Dialect) ([]storage.Line, error) {
	history := sqlitestore.Line
	if d == storage.DialectPostgres {
		history = pgstore.Line
	}
	makers := []func() (storage.Line, error){
		history,
		func() (storage.Line, error) { return sqlcontracts.Line(d) },
		func() (storage.Line, error) { return sqlstreams.Line(d) },
	}
	lines := make([]storage.Line, 0, len(makers))
	for _, mk := range makers {
		l, err := mk()
		if err != nil {
			return nil, err
		}
		lines = append(lines, l)
	}
	return lines, nil
}

// openStores opens the process's one database (OpenStorage), applies every
// store's pending migrations in order (history, contracts, streams) and
// returns the history backend on it; the contract and stream stores open
// on the same database (OpenContractStore, OpenStreamStore). Close the
// stores, then db.
func openStores(ctx context.Context, cfg *config.Config) (db storage.DB, backend history.Backend, where string, err error) {
	opened, where, err := OpenStorage(ctx, cfg)
	if err != nil {
		return nil, nil, "", err
	}
	defer func() {
		// The results are nil by now on a failure: close what was opened.
		if err != nil {
			_ = opened.Close()
		}
	}()
	lines, err := MigrationLines(opened.Dialect())
	if err != nil {
		return nil, nil, "", err
	}
	if _, err := opened.Migrate(ctx, lines...); err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", where, err)
	}
	switch db := opened.(type) {
	case *storage.Postgres:
		backend, err = pgstore.New(db)
	case *storage.SQLite:
		backend, err = sqlitestore.New(ctx, db)
	}
	if err != nil {
		return nil, nil, "", err
	}
	return opened, backend, where, nil
}
