package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// migrateFlow runs migrate --check, migrate and migrate --check again on a
// fresh database and checks what each says; tables lists what is stored.
func migrateFlow(t *testing.T, where string, args []string, tables func() []string) {
	t.Helper()
	check := append([]string{"migrate", "--check"}, args...)
	code, out, stderr := runCLI(t, "", check...)
	if code != 1 || !strings.Contains(stderr, "migrations pending") {
		t.Fatalf("check of a fresh database: exit %d, %q %q", code, out, stderr)
	}
	for _, line := range []string{"history", "contracts", "streams"} {
		if !strings.Contains(out, where+": "+line+": schema version 0, latest ") || !strings.Contains(out, "pending 0001_") {
			t.Fatalf("check of a fresh database says %q; want %s pending", out, line)
		}
	}
	if got := tables(); len(got) != 0 {
		t.Fatalf("migrate --check created %v", got)
	}
	code, out, stderr = runCLI(t, "", append([]string{"migrate"}, args...)...)
	if code != 0 {
		t.Fatalf("migrate: exit %d, %q %q", code, out, stderr)
	}
	for _, line := range []string{"history", "contracts", "streams"} {
		if !strings.Contains(out, where+": "+line+": migrated from schema version 0 to ") {
			t.Fatalf("migrate says %q; want %s migrated", out, line)
		}
	}
	code, out, stderr = runCLI(t, "", check...)
	if code != 0 || strings.Count(out, ": current\n") != 3 {
		t.Fatalf("check after migrate: exit %d, %q %q", code, out, stderr)
	}
	code, out, _ = runCLI(t, "", append([]string{"migrate"}, args...)...)
	if code != 0 || strings.Count(out, "is up to date\n") != 3 {
		t.Fatalf("migrate again: exit %d, %q", code, out)
	}
}

// TestMigrateFreshPostgres: on a fresh PostgreSQL database (an empty
// schema), migrate --check says what is missing and creates nothing,
// migrate creates every table of every store (those reset drops), and
// --check then says current.
func TestMigrateFreshPostgres(t *testing.T) {
	base := storagetest.PostgresURL(t)
	schema := storagetest.CreateSchema(t, base, "migratetest")
	dbURL := storagetest.SchemaURL(t, base, schema)
	tables := func() []string { return storagetest.Tables(t, base, schema) }
	migrateFlow(t, "postgresql", []string{"--database-url", dbURL}, tables)
	want := slices.Clone(resetTables)
	slices.Sort(want)
	if got := tables(); !slices.Equal(got, want) {
		t.Fatalf("tables after migrate:\n got %v\nwant %v", got, want)
	}
}

// TestMigrateFreshSQLite: the same on a data directory that does not exist
// yet: --check leaves no directory behind, migrate creates every store's
// file.
func TestMigrateFreshSQLite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tables := func() []string {
		var out []string
		for _, f := range resetFiles {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				out = append(out, f)
			}
		}
		if _, err := os.Stat(dir); err == nil && len(out) == 0 {
			out = append(out, dir)
		}
		return out
	}
	migrateFlow(t, "sqlite "+dir, []string{"--data-dir", dir}, tables)
	if got := tables(); !slices.Equal(got, storeFiles) {
		t.Fatalf("files after migrate: %v, want %v", got, storeFiles)
	}
}
