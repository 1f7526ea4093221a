package sqlcommon

import (
	"context"
	"fmt"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// NewErrors returns the error translation of a history store named prefix:
// a duplicate seq in records is record.ErrSeqMismatch.
func NewErrors(prefix string) storage.Errors {
	return storage.Errors{Prefix: prefix, Duplicate: func(table string) error {
		if table == "records" {
			return record.ErrSeqMismatch
		}
		return nil
	}}
}

// Schema gives a history store on either database its schema methods
// (SchemaVersion, Migrate, Init): the history's migration line on DB, with
// the store's error translation.
type Schema struct {
	DB   storage.DB
	Line storage.Line
	Errs *storage.Errors
	// RecordNetwork stores the network magic in one write transaction
	// unless one is stored already, and returns the one stored.
	RecordNetwork func(ctx context.Context, magic int64) (stored int64, err error)
}

// SchemaVersion returns the version of the stored schema (0 for an empty
// database) and the newest version this binary knows. It changes nothing.
func (s *Schema) SchemaVersion(ctx context.Context) (stored, latest int, err error) {
	if err := s.Errs.Check(); err != nil {
		return 0, 0, err
	}
	stored, latest, err = storage.LineVersion(ctx, s.DB, s.Line)
	return stored, latest, s.Errs.Translate("schema version", err)
}

// Migrate applies the pending migrations of the history's line in one
// transaction (storage.Apply) and returns the schema version before and
// after. It refuses a schema newer than the binary with
// history.ErrSchemaTooNew and changes nothing then. Concurrent migrations
// wait for each other (PostgreSQL: an advisory lock; SQLite: the write lock).
func (s *Schema) Migrate(ctx context.Context) (from, to int, err error) {
	if err := s.Errs.Check(); err != nil {
		return 0, 0, err
	}
	from, to, err = storage.MigrateLine(ctx, s.DB, s.Line)
	return from, to, s.Errs.Translate("migrate", err)
}

// Init applies pending migrations (unless p.Migrated), then records the
// network on first use or refuses another one with history.ErrWrongNetwork.
func (s *Schema) Init(ctx context.Context, p *history.InitParams) error {
	if !p.Migrated {
		if _, _, err := s.Migrate(ctx); err != nil {
			return err
		}
	}
	stored, err := s.RecordNetwork(ctx, int64(p.NetworkMagic))
	if err != nil {
		return s.Errs.Translate("init", err)
	}
	if stored != int64(p.NetworkMagic) {
		return fmt.Errorf("%s: init: %w: the database follows network magic %d, not %d",
			s.Errs.Prefix, record.ErrWrongNetwork, stored, p.NetworkMagic)
	}
	return nil
}
