package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// TestResetRefusedWhileServiceRuns runs reset on the data directory of a
// running service: refused with the reason, nothing deleted; with --force
// it is not refused; once the service stopped, reset deletes the store.
func TestResetRefusedWhileServiceRuns(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
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
	base := storagetest.DatabaseURL(t)
	ctx := context.Background()
	schema := "reset_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	admin := pgConnect(t, ctx, base)
	defer admin.Close(ctx)
	sch := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+sch+"; CREATE TABLE "+sch+".records (seq bigint)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP SCHEMA "+sch+" CASCADE") })
	dbURL := storagetest.SchemaURL(t, base, schema)
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

// TestOlderHistoryThanStreamsRefused restores history.sqlite (and the
// projection) from a backup older than streams.sqlite, whose durable
// stream is acknowledged beyond the restored head: the service refuses to
// start, naming the stream and the operator's choices; after reset
// --streams it starts and follows on from the restored head.
func TestOlderHistoryThanStreamsRefused(t *testing.T) {
	bin := buildBinary(t)
	ctx := t.Context()
	tmp := t.TempDir()
	dir, backup, socket := filepath.Join(tmp, "data"), filepath.Join(tmp, "backup"), filepath.Join(tmp, "node.socket")
	node := serveChain(t, ctx, socket, genBlocks(t, 7, 40), 10)
	f := startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "block 10 committed", func() bool { return f.committed(t) == 10 })
	older := f.mustStatus(t).HistorySeq
	if err := f.stop(t); err != nil {
		t.Fatal(err)
	}
	copyStore(t, dir, backup, "history.sqlite", "contracts.sqlite")
	if err := node.Grow(40); err != nil {
		t.Fatal(err)
	}
	f = startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "block 40 committed", func() bool { return f.committed(t) == 40 })
	head := f.mustStatus(t).HistorySeq
	if err := f.stop(t); err != nil {
		t.Fatal(err)
	}
	if head <= older {
		t.Fatalf("blocks 11 to 40 made no records (head %d)", head)
	}
	// A consumer acknowledged everything up to the head.
	st, err := sqlstreams.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.StreamCreate(ctx, &streamstore.Stream{Name: "orders", Mode: protocol.ModeAck, BatchSize: 10,
		Cursor: strconv.FormatInt(head, 10)}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	// The history and the projection come back from the older backup.
	for _, base := range []string{"history.sqlite", "contracts.sqlite"} {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			_ = os.Remove(filepath.Join(dir, base+suffix))
		}
	}
	copyStore(t, backup, dir, "history.sqlite", "contracts.sqlite")
	f = startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	_, out := f.exit(t, 60*time.Second, "the service started on a history older than its streams")
	for _, want := range []string{
		"the durable streams do not match the history log",
		"orders at " + strconv.FormatInt(head, 10), "beyond the history's head " + strconv.FormatInt(older, 10),
		"marlowe-follower reset --streams --yes", "restore backups of the history and the streams taken together",
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("stderr lacks %q:\n%s", want, out)
		}
	}
	if code, out, stderr := runCLI(t, "", "reset", "--yes", "--streams", "--data-dir", dir); code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("reset --streams: %d %q %q", code, out, stderr)
	}
	f = startFollower(t, bin, socket, dir, devnet.NetworkMagic)
	waitUntil(t, 60*time.Second, "block 40 committed again", func() bool { return f.committed(t) == 40 })
	if got := f.mustStatus(t).HistorySeq; got != head {
		t.Fatalf("head %d after following on from the backup, %d before", got, head)
	}
}

// copyStore copies the SQLite files named by bases (with their WAL) from
// one data directory to another.
func copyStore(t *testing.T, from, to string, bases ...string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, base := range bases {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(filepath.Join(from, base+suffix))
			if os.IsNotExist(err) && suffix != "" {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, base+suffix), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestResetMissingDataDir: reset on a data directory that does not exist
// says there is nothing to delete and leaves it so (it used to create it
// to take its lock).
func TestResetMissingDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "never-made")
	code, out, stderr := runCLI(t, "", "reset", "--yes", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "nothing to reset: the data directory "+dir+" does not exist") {
		t.Fatalf("reset of a missing data directory: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("reset made the data directory: %v", err)
	}
}

// TestResetRemovesTheDevnetChain: reset deletes the chain run --devnet
// keeps in the data directory with the store, so that the next run
// --devnet makes a new one (on the wall clock) instead of following the
// old chain again; --streams leaves it.
func TestResetRemovesTheDevnetChain(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"history.sqlite", "streams.sqlite", DevnetChainFile} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, stderr := runCLI(t, "", "reset", "--yes", "--streams", "--data-dir", dir); code != 0 || !strings.Contains(out, "removed 1 files") {
		t.Fatalf("reset --streams: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, DevnetChainFile)); err != nil {
		t.Fatalf("reset --streams removed the devnet chain: %v", err)
	}
	if code, out, stderr := runCLI(t, "", "reset", "--yes", "--data-dir", dir); code != 0 || !strings.Contains(out, "removed 2 files") {
		t.Fatalf("reset: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, DevnetChainFile)); !os.IsNotExist(err) {
		t.Fatalf("the devnet chain after reset: %v", err)
	}
}
