package service

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/contracts/contractstore/pgcontracts"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlitecontracts"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/storage"
	"github.com/marlowe-follower/follower/streaming/streamstore/pgstreams"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlitestreams"
)

// Storage is the configured database: a PostgreSQL pool when a database
// URL is set, else the SQLite files of the data directory.
type Storage interface {
	Dialect() storage.Dialect
	Migrate(ctx context.Context, lines ...storage.Line) ([]storage.Result, error)
	Check(ctx context.Context, lines ...storage.Line) ([]storage.Status, error)
	Close() error
}

// OpenStorage opens the configured database and says where it is. It
// creates nothing: SQLite files are opened when a store or Migrate needs
// them.
func OpenStorage(ctx context.Context, cfg *config.Config) (Storage, string, error) {
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
	makers := []func() (storage.Line, error){sqlitestore.Line, sqlitecontracts.Line, sqlitestreams.Line}
	if d == storage.DialectPostgres {
		makers = []func() (storage.Line, error){pgstore.Line, pgcontracts.Line, pgstreams.Line}
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
