package storage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0002_second.sql": {Data: []byte("two")},
		"m/0001_first.sql":  {Data: []byte("one")},
		"m/README.md":       {Data: []byte("not a migration")},
	}
	ms, err := storage.Load(fsys, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[1].SQL != "two" || ms[1].Name != "0002_second.sql" {
		t.Fatalf("%+v %v", ms, err)
	}
	for name, bad := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"no number": {"m/first.sql": {}},
		"zero":      {"m/0000_a.sql": {}},
		"none":      {"m/README.md": {}},
		"no dir":    {},
	} {
		if _, err := storage.Load(bad, "m"); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

func TestRebind(t *testing.T) {
	q := `SELECT a FROM t WHERE b = ? AND c IN (?, ?)`
	if got := storage.Rebind(storage.DialectPostgres, q); got != `SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)` {
		t.Fatalf("postgres: %s", got)
	}
	if got := storage.Rebind(storage.DialectSQLite, q); got != q {
		t.Fatalf("sqlite: %s", got)
	}
}

// testLines are two lines of the test's own: a has two migrations, b one.
func testLines(t *testing.T) []storage.Line {
	t.Helper()
	fsys := fstest.MapFS{
		"a/0001_init.sql": {Data: []byte("CREATE TABLE a_one (x integer PRIMARY KEY);\nCREATE TABLE a_two (y integer)")},
		"a/0002_more.sql": {Data: []byte("CREATE TABLE a_three (z integer)")},
		"b/0001_init.sql": {Data: []byte("CREATE TABLE b_one (x integer)")},
	}
	a, err := storage.NewLine("alpha", "a_schema_migrations", fsys, "a", storage.FileSpec{Name: "a.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := storage.NewLine("beta", "b_schema_migrations", fsys, "b", storage.FileSpec{Name: "b.sqlite", ReadConns: -1})
	if err != nil {
		t.Fatal(err)
	}
	return []storage.Line{a, b}
}

// database is what the runner tests need of either dialect.
type database interface {
	Migrate(ctx context.Context, lines ...storage.Line) ([]storage.Result, error)
	Check(ctx context.Context, lines ...storage.Line) ([]storage.Status, error)
	Close() error
}

// runnerCases: --check on a fresh database reports everything pending,
// Migrate applies every line in order, then everything is current; a
// openSQLite opens the SQLite database in dir, closed when t ends.
func openSQLite(t *testing.T, dir string) *storage.SQLite {
	t.Helper()
	db, err := storage.OpenSQLite(dir, storage.SQLiteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// second Migrate does nothing; a newer schema is refused.
func runnerCases(t *testing.T, db database, tables func() []string, setVersion func(table string, v int)) {
	ctx := t.Context()
	lines := testLines(t)
	sts, err := db.Check(ctx, lines...)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.Status{
		{Line: "alpha", Stored: 0, Latest: 2, Pending: []string{"0001_init.sql", "0002_more.sql"}},
		{Line: "beta", Stored: 0, Latest: 1, Pending: []string{"0001_init.sql"}},
	}
	if fmt.Sprint(sts) != fmt.Sprint(want) {
		t.Fatalf("check of a fresh database: %+v, want %+v", sts, want)
	}
	if got := tables(); len(got) != 0 {
		t.Fatalf("check created %v", got)
	}
	res, err := db.Migrate(ctx, lines...)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res) != fmt.Sprint([]storage.Result{{Line: "alpha", From: 0, To: 2}, {Line: "beta", From: 0, To: 1}}) {
		t.Fatalf("migrate: %+v", res)
	}
	wantTables := []string{"a_one", "a_schema_migrations", "a_three", "a_two", "b_one", "b_schema_migrations"}
	if got := tables(); !slices.Equal(got, wantTables) {
		t.Fatalf("tables after migrate: %v, want %v", got, wantTables)
	}
	sts, err = db.Check(ctx, lines...)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if !st.Current() || st.Stored != st.Latest || len(st.Pending) != 0 {
			t.Fatalf("check after migrate: %+v", sts)
		}
	}
	res, err = db.Migrate(ctx, lines...)
	if err != nil || res[0].From != 2 || res[0].To != 2 || res[1].From != 1 || res[1].To != 1 {
		t.Fatalf("migrate again: %+v %v", res, err)
	}
	setVersion("a_schema_migrations", 3)
	if _, err := db.Migrate(ctx, lines...); !errors.Is(err, record.ErrSchemaTooNew) || !strings.Contains(err.Error(), "alpha") {
		t.Fatalf("migrate of a newer schema: %v", err)
	}
	if sts, err := db.Check(ctx, lines...); err != nil || sts[0].Stored != 3 || !sts[0].Current() {
		t.Fatalf("check of a newer schema: %+v %v", sts, err)
	}
}

func TestSQLiteRunner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	db := openSQLite(t, dir)
	tables := func() []string {
		var out []string
		for _, f := range []string{"a.sqlite", "b.sqlite"} {
			path := filepath.Join(dir, f)
			if _, err := os.Stat(path); err != nil {
				continue
			}
			out = append(out, sqliteTables(t, path)...)
		}
		slices.Sort(out)
		return out
	}
	runnerCases(t, db, tables, func(table string, v int) {
		conn := sqliteConn(t, filepath.Join(dir, "a.sqlite"))
		if _, err := conn.Exec(`INSERT INTO `+table+` (version, name) VALUES (?, 'newer')`, v); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// TestSQLiteCheckCreatesNothing: --check of a data directory that does not
// exist reports every migration pending and leaves no directory behind.
func TestSQLiteCheckCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	db := openSQLite(t, dir)
	sts, err := db.Check(t.Context(), testLines(t)...)
	if err != nil || len(sts) != 2 || sts[0].Current() || sts[1].Current() {
		t.Fatalf("check: %+v %v", sts, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("check created the data directory: %v", err)
	}
}

// TestSQLiteFailedMigrationRollsBack: a migration that fails leaves the
// line at the version before it, with none of its tables.
func TestSQLiteFailedMigrationRollsBack(t *testing.T) {
	dir := t.TempDir()
	fsys := fstest.MapFS{
		"a/0001_init.sql": {Data: []byte("CREATE TABLE a_one (x integer)")},
		"a/0002_bad.sql":  {Data: []byte("CREATE TABLE a_two (y integer); CREATE TABLE a_one (x integer)")},
	}
	l, err := storage.NewLine("alpha", "a_schema_migrations", fsys, "a", storage.FileSpec{Name: "a.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	db := openSQLite(t, dir)
	if _, err := db.Migrate(t.Context(), l); err == nil || !strings.Contains(err.Error(), "0002_bad.sql") {
		t.Fatalf("migrate: %v", err)
	}
	if got := sqliteTables(t, filepath.Join(dir, "a.sqlite")); len(got) != 0 {
		t.Fatalf("tables after a failed migration: %v", got)
	}
}

// TestSQLiteEarlierVersionTable: a version table of the stream store's
// earlier design (applied_at in integer microseconds, no default) is
// rebuilt into the one design with its rows.
func TestSQLiteEarlierVersionTable(t *testing.T) {
	dir := t.TempDir()
	conn := sqliteConn(t, filepath.Join(dir, "b.sqlite"))
	for _, q := range []string{
		`CREATE TABLE b_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`,
		`INSERT INTO b_schema_migrations VALUES (1, '0001_init.sql', 1700000000000000)`,
		`CREATE TABLE b_one (x integer)`,
	} {
		if _, err := conn.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db := openSQLite(t, dir)
	res, err := db.Migrate(t.Context(), testLines(t)[1])
	if err != nil || res[0].From != 1 || res[0].To != 1 {
		t.Fatalf("migrate: %+v %v", res, err)
	}
	var name, at, typ string
	if err := conn.QueryRow(`SELECT name, applied_at FROM b_schema_migrations WHERE version = 1`).Scan(&name, &at); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(`SELECT type FROM pragma_table_info('b_schema_migrations') WHERE name = 'applied_at'`).Scan(&typ); err != nil {
		t.Fatal(err)
	}
	if name != "0001_init.sql" || at != "2023-11-14T22:13:20.000Z" || typ != "TEXT" {
		t.Fatalf("rebuilt table: %s %s %s", name, at, typ)
	}
}

func sqliteConn(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sqliteTables(t *testing.T, path string) []string {
	t.Helper()
	rows, err := sqliteConn(t, path).Query(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

func TestPostgresRunner(t *testing.T) {
	url := storagetest.PostgresURL(t)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL at %s (set MARLOWE_TEST_SKIP_POSTGRES=1 to skip): %v", url, err)
	}
	defer admin.Close(context.Background())
	schema := storagetest.NewSchema(t, url, "storagetest")
	db, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := func() []string { return storagetest.Tables(t, url, schema) }
	runnerCases(t, db, tables, func(table string, v int) {
		if _, err := admin.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema, table}.Sanitize()+` (version, name) VALUES ($1, 'newer')`, v); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPostgresConcurrentMigrate: processes migrating one schema at once
// wait for each other; each line is applied once.
func TestPostgresConcurrentMigrate(t *testing.T) {
	url := storagetest.PostgresURL(t)
	ctx := t.Context()
	schema := storagetest.NewSchema(t, url, "storagetest") // (dropped after the handles' closes)
	dbs := make([]*storage.Postgres, 3)
	for i := range dbs {
		db, err := storage.OpenPostgres(ctx, url, storage.PostgresOptions{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		dbs[i] = db
	}
	lines := testLines(t)
	errs := make(chan error, len(dbs))
	for _, db := range dbs {
		go func() {
			_, err := db.Migrate(ctx, lines...)
			errs <- err
		}()
	}
	for range dbs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := dbs[0].Pool.QueryRow(ctx, `SELECT count(*) FROM a_schema_migrations`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("versions recorded: %d %v", n, err)
	}
}
