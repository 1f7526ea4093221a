package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/record"
)

// replica is a physical streaming replica of the local server
// (scripts/pg-replica.sh), removed when the test ends.
type replica struct {
	dir  string
	port int
}

// startReplica makes the replica, or skips the test where pg_basebackup
// is missing (never under CI: there the test must run).
func startReplica(t *testing.T, base string) *replica {
	t.Helper()
	if _, err := exec.LookPath("pg_basebackup"); err != nil {
		if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_basebackup"); len(m) == 0 {
			if os.Getenv("CI") == "true" {
				t.Fatal("pg_basebackup is missing under CI: the replica test must run")
			}
			t.Skip("pg_basebackup is missing")
		}
	}
	r := &replica{port: freePort(t)}
	script := filepath.Join("..", "..", "scripts", "pg-replica.sh")
	up := exec.Command("bash", script, "up", strconv.Itoa(r.port))
	if u, err := url.Parse(base); err == nil {
		if pw, ok := u.User.Password(); ok {
			up.Env = append(os.Environ(), "PGPASSWORD="+pw)
		}
	}
	out, err := up.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("making a replica (%s up): %v\n%s", script, err, stderr)
	}
	r.dir = strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "down", r.dir).CombinedOutput(); err != nil {
			t.Errorf("removing the replica: %v\n%s", err, out)
		}
	})
	return r
}

// url returns the replica's URL of the primary's database dbURL names.
func (r *replica) url(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(r.port)
	u.User = url.User("postgres")
	return u.String()
}

func pgExec(t *testing.T, dbURL, sql string, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := pgConnect(t, ctx, dbURL)
	defer conn.Close(ctx)
	if len(dest) == 0 {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return
	}
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestReaderOnAReplica runs a writer (role all) on the local server and a
// reader that reads a streaming replica of it while listening to the
// primary. With the replica's replay paused the reader serves nothing
// beyond what the replica holds: its head and its subscribers stop at the
// replica's head, /status shows the lag in records and bytes, and minSeq
// at the writer's head waits (503 after its bound); a subscriber from
// origin joins then. Replay resumed, minSeq answers at that seq and every
// subscriber ends with exactly what the invariant promises of the writer's
// log, each record once. MARLOWE_TEST_LONG=1 follows a longer chain.
func TestReaderOnAReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	base := testDatabaseURL(t)
	rep := startReplica(t, base)
	bin := buildBinary(t)
	dbURL, _ := soakDatabase(t, base)
	repURL := rep.url(t, dbURL)
	dir := t.TempDir()
	socket := filepath.Join(dir, "node.socket")
	writer, blocks := startWriterOnDevnet(t, bin, dbURL, socket, 200, 25, 16)
	waitUntil(t, time.Minute, "the writer answers", func() bool { _, err := writer.status(); return err == nil })
	// The replica has replayed the schema.
	waitUntil(t, time.Minute, "the schema on the replica", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, repURL)
		if err != nil {
			return false
		}
		defer conn.Close(ctx)
		var n int64
		return conn.QueryRow(ctx, `SELECT count(*) FROM records`).Scan(&n) == nil
	})
	reader := startService(t, bin, "reader", dbURL, "", "--read-database-url", repURL)
	waitUntil(t, time.Minute, "the reader answers", func() bool { _, err := reader.status(); return err == nil })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	subscribe := func(from string) *wsCollector {
		c := &wsCollector{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, reader.sport, from)
		}()
		return c
	}
	fromZero := subscribe("0")
	waitUntil(t, time.Minute, "the reader serving records from the replica", func() bool {
		st, err := reader.status()
		return err == nil && st.Reader != nil && st.Reader.Head >= 30
	})

	// Replay paused: the writer goes on, the reader stops at the replica.
	pgExec(t, repURL, `SELECT pg_wal_replay_pause()`)
	waitUntil(t, time.Minute, "replay paused", func() bool {
		var state string
		pgExec(t, repURL, `SELECT pg_get_wal_replay_pause_state()`, &state)
		return state == "paused"
	})
	var replicaHead int64
	pgExec(t, repURL, `SELECT COALESCE(max(seq), 0) FROM records`, &replicaHead)
	var writerHead int64
	waitUntil(t, time.Minute, "the writer ahead of the paused replica", func() bool {
		st, err := writer.status()
		writerHead = st.HistorySeq
		return err == nil && writerHead > replicaHead+10
	})
	waitUntil(t, time.Minute, "the reader's status showing the replica's lag", func() bool {
		st, err := reader.status()
		if err != nil || st.Reader == nil || st.Reader.Replica == nil {
			return false
		}
		r := st.Reader
		if r.Head > replicaHead || r.Replica.Head > replicaHead {
			t.Fatalf("the reader serves seq %d (replica at %d) while the replica's replay is paused at %d", r.Head, r.Replica.Head, replicaHead)
		}
		return r.WriterHead >= writerHead && r.Replica.LagSeqs >= writerHead-replicaHead &&
			r.Replica.LagBytes != nil && *r.Replica.LagBytes > 0
	})
	fromOrigin := subscribe("origin")
	waitUntil(t, time.Minute, "the origin subscriber's snapshot", func() bool {
		fromOrigin.mu.Lock()
		defer fromOrigin.mu.Unlock()
		return fromOrigin.start != ""
	})
	code, _, err := getHeader(reader.base+"/contracts?minSeq="+strconv.FormatInt(writerHead, 10), "X-Marlowe-Seq")
	if err != nil || code != http.StatusServiceUnavailable {
		t.Fatalf("minSeq=%d on the reader while the replica is at %d: %d, %v (want 503)", writerHead, replicaHead, code, err)
	}
	for _, c := range []*wsCollector{fromZero, fromOrigin} {
		if last, err := c.lastSeq(); err != nil || last > replicaHead {
			t.Fatalf("a subscriber on the reader got seq %d (%v) while the replica holds up to %d", last, err, replicaHead)
		}
	}

	// Replay resumed: minSeq answers at the writer's head.
	type answer struct {
		code int
		seq  string
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		code, seq, err := getHeader(reader.base+"/contracts?minSeq="+strconv.FormatInt(writerHead, 10), "X-Marlowe-Seq")
		answered <- answer{code, seq, err}
	}()
	pgExec(t, repURL, `SELECT pg_wal_replay_resume()`)
	a := <-answered
	if seq, _ := strconv.ParseInt(a.seq, 10, 64); a.err != nil || a.code != http.StatusOK || seq < writerHead {
		t.Fatalf("minSeq=%d on the reader after replay resumed: %d at seq %q, %v", writerHead, a.code, a.seq, a.err)
	}

	head := writer.headAt(t, blocks)
	for _, c := range []*wsCollector{fromZero, fromOrigin} {
		waitUntil(t, time.Minute, "the subscribers on the reader at the writer's head", func() bool {
			last, err := c.lastSeq()
			if err != nil {
				t.Fatalf("subscriber: %v", err)
			}
			return last >= head
		})
	}
	cancel()
	wg.Wait()

	log, _ := soakLog(t, "postgres", "", dbURL)
	if int64(len(log)) != head {
		t.Fatalf("the log holds %d records, the writer's head is %d", len(log), head)
	}
	snapshot, err := cursorSnapshot(fromOrigin.start)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got []record.Record, want []record.Record) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i].Seq != want[i].Seq || digest(&got[i]) != digest(&want[i]) {
				t.Fatalf("%s: record %d is %+v, want %+v", name, i, got[i], want[i])
			}
		}
	}
	check("the subscriber from 0", fromZero.got, log)
	var want []record.Record
	for _, r := range log {
		if r.Seq > snapshot || (r.Kind != record.KindRolledBack && r.Current(snapshot)) {
			want = append(want, r)
		}
	}
	check("the subscriber from origin", fromOrigin.got, want)
	t.Logf("replica paused at seq %d while the writer reached %d; %d records, the origin subscriber's snapshot at %d",
		replicaHead, writerHead, len(log), snapshot)
}

// cursorSnapshot returns the snapshot seq of a "SNAPSHOT:SEQ" cursor (0 for
// a plain one: the log was empty).
func cursorSnapshot(c string) (int64, error) {
	cur, err := record.ParseCursor(c)
	return cur.Snapshot, err
}
