package sqlstreams_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamstore/streamstoretest"
)

// testURL is the test database (storagetest.PostgresURL), which must
// answer unless MARLOWE_TEST_SKIP_POSTGRES=1.
func testURL(t *testing.T) string {
	t.Helper()
	url := storagetest.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL at %s is unreachable (set MARLOWE_TEST_SKIP_POSTGRES=1 to skip): %v", url, err)
	}
	conn.Close(ctx)
	return url
}

// freshSchema returns a new schema name, dropped when the test ends.
func freshSchema(t *testing.T, url string) string {
	t.Helper()
	return storagetest.NewSchema(t, url, "ws_test")
}

func TestConformancePostgres(t *testing.T) {
	url := testURL(t)
	streamstoretest.Run(t, func(t *testing.T) streamstoretest.Opener {
		schema := freshSchema(t, url)
		return func() (streamstore.Store, error) {
			return sqlstreams.OpenPostgres(context.Background(), url, schema)
		}
	})
}

func TestTablesArePrefixedPostgres(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	ctx := context.Background()
	s, err := sqlstreams.OpenPostgres(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(names) != "[ws_history ws_schema_migrations ws_streams]" {
		t.Fatalf("tables %v", names)
	}
}

// TestSchemaTooNew: a schema migrated by a newer binary is refused.
func TestSchemaTooNewPostgres(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	ctx := context.Background()
	s, err := sqlstreams.OpenPostgres(ctx, url, schema)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
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
