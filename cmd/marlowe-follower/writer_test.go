package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// TestRoleRefusals runs the binary with roles it must refuse before it
// opens anything: writer and reader on the embedded SQLite store (no
// database URL) and an unknown role. Each exits non-zero with a message
// naming the setting.
func TestRoleRefusals(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"run", "--data-dir", dir, "--query-port", "0", "--streaming-port", "0",
			"--node-socket", dir + "/none.socket"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%v: exited with %v (%s)", args, err, out)
		}
		return exit.ExitCode(), string(out)
	}
	for _, role := range []string{"writer", "reader"} {
		for _, how := range [][]string{{"--role", role}, {"MARLOWE_RT_ROLE=" + role}} {
			var code int
			var out string
			if strings.HasPrefix(how[0], "--") {
				code, out = run([]string{"MARLOWE_RT_DATABASE_URL="}, how...)
			} else {
				code, out = run(append([]string{"MARLOWE_RT_DATABASE_URL="}, how...))
			}
			want := "role (MARLOWE_RT_ROLE) " + role + " needs PostgreSQL: set store.databaseURL (MARLOWE_RT_DATABASE_URL)"
			if code == 0 || !strings.Contains(out, want) {
				t.Errorf("%s on SQLite (%v): exit %d, output %s", role, how, code, out)
			}
		}
	}
	if code, out := run(nil, "--role", "standby"); code == 0 || !strings.Contains(out, `"standby" is not all, writer or reader`) {
		t.Errorf("unknown role: exit %d, output %s", code, out)
	}
}

// The tests below run writers (role writer, and all) as processes of the
// built binary on one PostgreSQL schema, following one devnet that serves
// a Unix socket from the test process: its journal mode gives every
// client the same chain, forks included, whatever its timing, so the log
// of any run that reaches the tip equals an uninterrupted run's.

var writerKills = flag.Int("writer-kills", 3, "TestWriterFailover: how many times the active writer is killed (20 for docs/benchmarks.md)")

// pgSchema makes a schema of the test database, dropped when the test ends,
// and returns a URL whose sessions use it.
func pgSchema(t *testing.T, admin *pgx.Conn, name string) string {
	t.Helper()
	base := testDatabaseURL(t)
	schema := storagetest.NewSchema(t, base, name)
	if _, err := admin.Exec(context.Background(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return storagetest.SchemaURL(t, base, schema)
}

// adminConn is a connection to the test database, closed when the test
// ends.
func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	conn := pgConnect(t, context.Background(), testDatabaseURL(t))
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// pgConnect connects to the database url names (the test database, or one
// or a schema of it); the test fails when it cannot. The caller closes it.
func pgConnect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("PostgreSQL at MARLOWE_TEST_DATABASE_URL: %v", err)
	}
	return conn
}

// testLeaseTTL is the writer lease's TTL in these tests: a failover after a
// writer died or hung waits for it.
const testLeaseTTL = 2 * time.Second

// startWriter runs `marlowe-follower run --role ROLE` on socket and the
// database at dbURL, with the query API on a free port.
func startWriter(t *testing.T, bin, socket, dbURL, role string, extra ...string) *child {
	t.Helper()
	qport := freePort(t)
	args := append([]string{"run", "--role", role, "--node-socket", socket, "--network-magic", strconv.Itoa(devnet.NetworkMagic),
		"--database-url", dbURL, "--data-dir", t.TempDir(), "--query-host", "127.0.0.1", "--query-port", strconv.Itoa(qport),
		"--streaming-port", "0", "--min-backoff", "50ms", "--max-backoff", "300ms", "--log-level", "info",
		"--progress-bar", "never", "--progress-period", "0s", "--writer-lease-ttl", testLeaseTTL.String()}, extra...)
	return startChild(t, bin, qport, args...)
}

// writerStatus is what the tests read of /status on a writer.
type writerStatus struct {
	Role       string            `json:"role"`
	HistorySeq int64             `json:"historySeq"`
	Committed  chain.BlockHeader `json:"committedPoint"`
	Projection struct {
		Lag int64 `json:"lag"`
	} `json:"projection"`
	WriterLease *leaseAnswer `json:"writerLease"`
}

// leaseAnswer is /status's writerLease.
type leaseAnswer struct {
	Held      *bool   `json:"held"`
	Lapsed    bool    `json:"lapsed"`
	Holder    string  `json:"holder"`
	Epoch     int64   `json:"epoch"`
	ExpiresIn float64 `json:"expiresInSeconds"`
	Expired   *bool   `json:"expired"`
	// SessionWatched: the holder names its session (a standby takes over
	// when it ends); SessionEnded: that session has ended.
	SessionWatched bool `json:"sessionWatched"`
	SessionEnded   bool `json:"sessionEnded"`
}

// writer returns the process's /status (ok false when it does not answer).
func (c *child) writer() (writerStatus, bool) {
	var st writerStatus
	code, err := getJSON(c.base+"/status", &st)
	return st, err == nil && code == http.StatusOK && st.WriterLease != nil && st.WriterLease.Held != nil
}

// holds reports whether the process answers that it holds the writer lease.
func (c *child) holds() bool {
	st, ok := c.writer()
	return ok && *st.WriterLease.Held
}

// standsBy reports whether the process answers as a standby: not holding
// the lock, /readyz 503 writer_standby.
func (c *child) standsBy() bool {
	st, ok := c.writer()
	return ok && !*st.WriterLease.Held && c.reasonHolds("writer_standby")
}

// metric returns a metric's value from /metrics (-1 when absent).
func (c *child) metric(name string) float64 { return c.metricsOf(name)[0] }

// metricsOf returns metrics' values from one scrape of /metrics (-1 for
// each absent one).
func (c *child) metricsOf(names ...string) []float64 {
	out := make([]float64, len(names))
	for i := range out {
		out[i] = -1
	}
	body, err := scrape(c.base)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(body, "\n") {
		for i, name := range names {
			if rest, ok := strings.CutPrefix(line, name+" "); ok {
				if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
					out[i] = v
				}
			}
		}
	}
	return out
}

// firstCommit reports whether the process holds the writer lease and has
// committed (one scrape: a standby's reader serves /metrics too).
func (c *child) firstCommit() bool {
	v := c.metricsOf("marlowe_writer_lease_held", "marlowe_history_commits_total")
	return v[0] == 1 && v[1] >= 1
}

// storedLease reads the writer lease of the schema dbURL names, as the
// database holds it: its holder, its epoch, and whether it has expired.
func storedLease(t *testing.T, admin *pgx.Conn, dbURL string) (holder string, epoch int64, expired bool) {
	t.Helper()
	u, _ := url.Parse(dbURL)
	err := admin.QueryRow(context.Background(), `SELECT holder, epoch, coalesce(expires_at <= clock_timestamp(), true) FROM `+
		pgx.Identifier{u.Query().Get("search_path"), "writer_lease"}.Sanitize()).Scan(&holder, &epoch, &expired)
	if err != nil {
		t.Fatal(err)
	}
	return holder, epoch, expired
}

// holdsTheStoredLease checks that the database's writer lease is c's.
func holdsTheStoredLease(t *testing.T, admin *pgx.Conn, dbURL string, c *child) {
	t.Helper()
	st, ok := c.writer()
	holder, epoch, expired := storedLease(t, admin, dbURL)
	if !ok || !*st.WriterLease.Held || holder != st.WriterLease.Holder || epoch != st.WriterLease.Epoch || expired {
		t.Fatalf("the stored lease (%s, epoch %d, expired %v) is not the holder's %+v", holder, epoch, expired, st.WriterLease)
	}
}

// pgState reads a schema's whole history log, its checkpoint and the
// contract projection's rows (each table's rows as JSON, in key order).
func pgState(t *testing.T, dbURL string) ([]record.Record, *history.Checkpoint, []string) {
	t.Helper()
	ctx := context.Background()
	b, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, cp := backendState(t, b)
	conn := pgConnect(t, ctx, dbURL)
	defer conn.Close(ctx)
	var proj []string
	for _, table := range []string{"cv_head", "cv_contracts", "cv_contract_tags", "cv_contract_parties", "cv_transactions",
		"cv_payouts", "cv_withdrawals"} {
		rows, err := conn.Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range got {
			proj = append(proj, table+" "+r)
		}
	}
	return log, cp, proj
}

// sameState compares a run's state with the uninterrupted run's: the log
// record by record (dense seqs, none missing, none twice), the checkpoint
// and the projection.
func sameState(t *testing.T, refURL, gotURL string) int {
	t.Helper()
	logA, cpA, projA := pgState(t, refURL)
	logB, cpB, projB := pgState(t, gotURL)
	if len(logA) == 0 {
		t.Fatal("nothing recorded")
	}
	for i, r := range logB {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d: a gap or a duplicate", i+1, r.Seq)
		}
	}
	sameLog(t, "the one with failovers", logA, logB, cpA, cpB)
	if !slices.Equal(projA, projB) {
		t.Fatalf("the projections differ: %d rows uninterrupted, %d with failovers", len(projA), len(projB))
	}
	return len(logA)
}

// failoverDevnet serves a journaled chain of blocks growing at rate blocks
// per second, with rollbacks.
func failoverDevnet(t *testing.T, ctx context.Context, blocks uint64, rate float64) (*devnet.Devnet, string) {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.MarloweShare, gcfg.MeanBlockSize = 15, 0.4, 2000
	gcfg.RollbackEvery, gcfg.MaxRollbackDepth = 15, 4
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, Blocks: blocks, BlockRate: rate, Journal: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dn.Close() })
	return dn, socket
}

// commitsMore waits until the writer c has committed n blocks past where
// it stands, or the devnet's chain is complete: faults come at moments of
// its progress.
func (c *child) commitsMore(t *testing.T, dn *devnet.Devnet, n uint64) {
	t.Helper()
	from := c.committed(t)
	waitUntil(t, 2*time.Minute, fmt.Sprintf("%d blocks committed past block %d", n, from), func() bool {
		return dnDone(dn) || c.committed(t) >= from+n
	})
}

// atTip reports whether the writer committed block tip and its projection
// caught up.
func (c *child) atTip(tip uint64) bool {
	st, ok := c.writer()
	return ok && *st.WriterLease.Held && st.Committed.BlockNo == tip && st.Projection.Lag == 0
}

// TestWriterFailover runs two writers on one database following one devnet:
// exactly one holds the writer lease, the other stands by (not ready,
// serving the query API from the database), and reset is refused.
// The active one is killed with SIGKILL at random moments (-writer-kills
// times, 3 by default); each time the standby takes over and a new process
// takes its place as the standby. The failover time, from the kill to the
// first commit of the new holder, is reported (p50 and max). At the end the
// log, checkpoint and projection equal those of an uninterrupted writer's
// on another schema.
func TestWriterFailover(t *testing.T) {
	bin := buildBinary(t)
	admin := adminConn(t)
	ctx := t.Context()
	kills := *writerKills
	blocks := uint64(200 + 120*kills) // a failover waits for the lease (testLeaseTTL) besides the start
	dn, socket := failoverDevnet(t, ctx, blocks, 40)
	refURL, haURL := pgSchema(t, admin, "failover_ref"), pgSchema(t, admin, "failover_ha")

	ref := startWriter(t, bin, socket, refURL, "all")
	active, standby := startWriterPair(t, bin, socket, haURL)
	holdsTheStoredLease(t, admin, haURL, active)
	if st, _ := active.writer(); !st.WriterLease.SessionWatched {
		t.Fatalf("the holder does not name its session: %+v", *st.WriterLease)
	}
	if a, s := active.metric("marlowe_writer_lease_held"), standby.metric("marlowe_writer_lease_held"); a != 1 || s != 0 {
		t.Fatalf("marlowe_writer_lease_held: active %v, standby %v", a, s)
	}
	if v := standby.metric(`marlowe_role{role="writer"}`); v != 1 {
		t.Fatalf("marlowe_role on the standby: %v", v)
	}
	// reset is refused while a writer and a standby run.
	if out, err := exec.Command(bin, "reset", "--yes", "--database-url", haURL).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "a running marlowe-follower service holds this store") {
		t.Fatalf("reset beside a writer and a standby: %v\n%s", err, out)
	}
	// The standby serves the query API from the database meanwhile.
	waitUntil(t, 30*time.Second, "the standby serving the committed history", func() bool {
		st, ok := standby.writer()
		var page struct {
			Results []json.RawMessage `json:"results"`
		}
		code, err := getJSON(standby.base+"/contracts", &page)
		return ok && st.Role == "writer" && st.HistorySeq > 0 && err == nil && code == http.StatusOK
	})

	rng := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 7))
	var took []time.Duration
	for len(took) < kills {
		active.commitsMore(t, dn, uint64(12+rng.IntN(48))) // 0.3 to 1.5 s of the devnet's blocks
		if dnDone(dn) {
			t.Logf("the chain is complete after %d kills", len(took))
			break
		}
		before, _ := active.writer()
		var d time.Duration
		active, standby, d = failOver(t, bin, socket, haURL, active, standby)
		took = append(took, d)
		st, _ := active.writer()
		if !*st.WriterLease.Held || st.WriterLease.Epoch <= before.WriterLease.Epoch {
			t.Fatalf("after the failover: %+v (the killed one had epoch %d)", *st.WriterLease, before.WriterLease.Epoch)
		}
		holdsTheStoredLease(t, admin, haURL, active)
	}
	<-dn.Done()
	tip := dn.Store().Tip().BlockNo
	waitUntil(t, 120*time.Second, "the active writer at the tip", func() bool { return active.atTip(tip) })
	waitUntil(t, 120*time.Second, "the uninterrupted writer at the tip", func() bool { return ref.atTip(tip) })
	if !active.isReady() || standby.isReady() {
		t.Fatalf("at the tip: the holder ready %v, the standby ready %v", active.isReady(), standby.isReady())
	}
	for _, c := range []*child{standby, active, ref} {
		if err := c.stop(t); err != nil {
			t.Fatalf("stopping: %v", err)
		}
	}
	n := sameState(t, refURL, haURL)
	if len(took) == 0 {
		t.Fatal("no failover happened")
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("failover (kill to the new holder's first commit) over %d kills: p50 %s, max %s (all: %v); %d records, %d blocks",
		len(sorted), sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond), sorted, n, tip)
}

// startWriterPair starts two writers on dbURL: the first once it holds
// the writer lease, the second once it stands by.
func startWriterPair(t *testing.T, bin, socket, dbURL string) (active, standby *child) {
	t.Helper()
	active = startWriter(t, bin, socket, dbURL, "writer")
	waitUntil(t, 60*time.Second, "the first writer holding the lock", active.holds)
	standby = startWriter(t, bin, socket, dbURL, "writer")
	waitUntil(t, 60*time.Second, "the second writer standing by", standby.standsBy)
	return active, standby
}

// failOver kills the active writer with SIGKILL, waits for the standby's
// first commit (its commit counter starts at 0) and starts a new standby
// in the killed one's place. It returns the new pair and the failover
// time, from the kill to that first commit.
func failOver(t *testing.T, bin, socket, dbURL string, active, standby *child) (*child, *child, time.Duration) {
	t.Helper()
	if err := active.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-active.done
	waitUntil(t, 60*time.Second, "the standby's first commit", standby.firstCommit)
	took := time.Since(killed)
	next := startWriter(t, bin, socket, dbURL, "writer")
	waitUntil(t, 60*time.Second, "a new standby", next.standsBy)
	return standby, next, took
}

func dnDone(dn *devnet.Devnet) bool {
	select {
	case <-dn.Done():
		return true
	default:
		return false
	}
}

// TestReaderWithoutWriter: a reader beside a writer is ready and sees the
// writer's lease (holder, epoch, running, its session named); once the
// only writer is killed (SIGKILL, no standby: nobody takes or lets go the
// lease) the reader answers /readyz 503 no_writer at its next read of the
// lease, the holder's session having ended (/status writerLease.sessionEnded,
// the marlowe_not_ready series 1, marlowe_reader_writer_present 0), and
// is ready again once a new writer holds the lease.
func TestReaderWithoutWriter(t *testing.T) {
	bin := buildBinary(t)
	admin := adminConn(t)
	ctx := t.Context()
	_, socket := failoverDevnet(t, ctx, 100000, 10)
	dbURL := pgSchema(t, admin, "nowriter")
	writer := startWriter(t, bin, socket, dbURL, "writer")
	waitUntil(t, time.Minute, "the writer's first commit", writer.firstCommit)
	reader := startWriter(t, bin, "", dbURL, "reader")
	lease := func() *leaseAnswer {
		var st struct {
			Lease *leaseAnswer `json:"writerLease"`
		}
		if code, err := getJSON(reader.base+"/status", &st); err != nil || code != http.StatusOK || st.Lease == nil || st.Lease.Expired == nil {
			return nil
		}
		return st.Lease
	}
	readyWith := func(w *child) func() bool {
		return func() bool {
			ws, ok := w.writer()
			l := lease()
			return ok && l != nil && !*l.Expired && l.Held == nil && l.Holder == ws.WriterLease.Holder && l.Epoch == ws.WriterLease.Epoch &&
				l.SessionWatched && !l.SessionEnded && reader.isReady()
		}
	}
	waitUntil(t, time.Minute, "the reader ready beside the writer", readyWith(writer))
	if v := reader.metricsOf(`marlowe_not_ready{reason="no_writer"}`, "marlowe_reader_writer_present"); v[0] != 0 || v[1] != 1 {
		t.Fatalf("marlowe_not_ready{no_writer}, marlowe_reader_writer_present beside a writer: %v", v)
	}

	writer.kill(t)
	killed := time.Now()
	waitUntil(t, 30*time.Second, "the reader's /readyz 503 no_writer", func() bool { return reader.reasonHolds("no_writer") })
	t.Logf("the reader answered no_writer %s after the kill (TTL %s)", time.Since(killed).Round(time.Millisecond), testLeaseTTL)
	if l := lease(); l == nil || !l.SessionEnded {
		t.Fatalf("/status writerLease without a writer: %+v", l)
	}
	waitUntil(t, 30*time.Second, "the lease expired", func() bool { l := lease(); return l != nil && *l.Expired && l.ExpiresIn <= 0 })
	if v := reader.metricsOf(`marlowe_not_ready{reason="no_writer"}`, "marlowe_reader_writer_present"); v[0] != 1 || v[1] != 0 {
		t.Fatalf("marlowe_not_ready{no_writer}, marlowe_reader_writer_present without a writer: %v", v)
	}

	writer = startWriter(t, bin, socket, dbURL, "writer")
	waitUntil(t, time.Minute, "the reader ready again beside a new writer", readyWith(writer))
	for _, c := range []*child{reader, writer} {
		if err := c.stop(t); err != nil {
			t.Fatalf("stopping: %v", err)
		}
	}
}
