package sqlstreams_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamstore/streamstoretest"
)

func TestConformancePostgres(t *testing.T) {
	url := storagetest.PostgresURL(t)
	streamstoretest.Run(t, func(t *testing.T) streamstoretest.Opener {
		schema := storagetest.NewSchema(t, url, "ws_test")
		return func() (streamstore.Store, error) {
			return sqlstreams.OpenPostgres(context.Background(), url, schema)
		}
	})
}

// openPostgres opens a store on a fresh schema of the test database.
func openPostgres(t *testing.T) (s *sqlstreams.Store, url, schema string) {
	t.Helper()
	url = storagetest.PostgresURL(t)
	schema = storagetest.NewSchema(t, url, "ws_test")
	s, err := sqlstreams.OpenPostgres(context.Background(), url, schema)
	if err != nil {
		t.Fatal(err)
	}
	return s, url, schema
}

func TestTablesArePrefixedPostgres(t *testing.T) {
	s, url, schema := openPostgres(t)
	defer s.Close()
	names := storagetest.Tables(t, url, schema)
	if fmt.Sprint(names) != "[ws_history ws_schema_migrations ws_streams]" {
		t.Fatalf("tables %v", names)
	}
}

// TestSchemaTooNew: a schema migrated by a newer binary is refused.
func TestSchemaTooNewPostgres(t *testing.T) {
	s, url, schema := openPostgres(t)
	s.Close()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, "ws_schema_migrations"}.Sanitize()+
		` (version, name) VALUES (99, 'future')`); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlstreams.OpenPostgres(ctx, url, schema); !errors.Is(err, streamstore.ErrSchemaTooNew) {
		t.Fatalf("open: %v", err)
	}
}
