package main

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
)

// TestResetRefusedWhileServiceRuns runs reset on the data directory of a
// running service: refused with the reason, nothing deleted; with --force
// it is not refused; once the service stopped, reset deletes the store.
func TestResetRefusedWhileServiceRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "data")
	serveChain(t, ctx, filepath.Join(tmp, "node.socket"), genBlocks(t, 5, 20), 20)
	f := startFollower(t, bin, filepath.Join(tmp, "node.socket"), dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "block 20 committed", func() bool { return f.committed(t) == 20 })
	code, out, stderr := runCLI(t, "", "reset", "--yes", "--data-dir", dir)
	if code != exitError || out != "" ||
		!strings.Contains(stderr, "a running marlowe-follower service holds this store") || !strings.Contains(stderr, "--force") {
		t.Fatalf("reset beside the service: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.sqlite")); err != nil {
		t.Fatalf("the refused reset deleted the history: %v", err)
	}
	if f.exited() || f.committed(t) != 20 {
		t.Fatal("the service was disturbed")
	}
	if err := f.stop(t); err != nil {
		t.Fatalf("service: %v", err)
	}
	code, out, stderr = runCLI(t, "", "reset", "--yes", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("reset after the service stopped: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "history.sqlite")); !os.IsNotExist(err) {
		t.Fatalf("history.sqlite after reset: %v", err)
	}
}

// TestResetForce deletes the store of a held data directory with --force,
// saying what it overrode.
func TestResetForce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "history.sqlite"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := storelock.Shared(context.Background(), storelock.Store{DataDir: dir}, storelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release() //nolint:errcheck // test
	code, out, stderr := runCLI(t, "", "reset", "--yes", "--force", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "removed 1 files") || !strings.Contains(stderr, "deleting anyway (--force)") {
		t.Fatalf("reset --force: %d %q %q", code, out, stderr)
	}
}

// TestResetPostgresRefusedWhileHeld runs reset on a PostgreSQL schema whose
// lock a service holds (the lock the service takes at start): refused, the
// tables stay; after the service let go the tables are dropped.
func TestResetPostgresRefusedWhileHeld(t *testing.T) {
	base := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("MARLOWE_TEST_DATABASE_URL is not set")
	}
	ctx := context.Background()
	schema := "reset_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	sch := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+sch+"; CREATE TABLE "+sch+".records (seq bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+sch+" CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	dbURL := u.String()
	exists := func() bool {
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".records").Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	l, err := storelock.Shared(ctx, storelock.Store{DatabaseURL: dbURL}, storelock.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "", "reset", "--yes", "--database-url", dbURL)
	if code != exitError || !strings.Contains(stderr, "a running marlowe-follower service holds this store (the PostgreSQL database)") {
		t.Fatalf("reset beside the service: %d %q %q", code, out, stderr)
	}
	if !exists() {
		t.Fatal("the refused reset dropped the tables")
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	code, out, stderr = runCLI(t, "", "reset", "--yes", "--database-url", dbURL)
	if code != 0 || !strings.Contains(out, "dropped every marlowe-follower table") || exists() {
		t.Fatalf("reset after the service stopped: %d %q %q", code, out, stderr)
	}
}
