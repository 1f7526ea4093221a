package main

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/query"
)

// The tests of this file hang the writer that holds the lease, the two
// ways a writer hangs without dying: its process stopped (SIGSTOP: its
// kernel keeps its database sessions open), and its database traffic cut
// while its sessions stay open (a partition, here a TCP proxy that stops
// forwarding). Each time the standby takes over once the lease has
// expired, readers stay ready but for the gap between the expiry and the
// takeover, and the hung writer, once it runs (or reaches the database)
// again, commits nothing and exits with status 1 and one line saying it
// lost the writer lease. A subscriber on a reader reads the whole log from
// seq 0 across it: every record once, in order, as stored; and the log
// equals an uninterrupted writer's.

// hungLeaseTTL is the writer lease's TTL in these tests.
const hungLeaseTTL = 3 * time.Second

// hang is how a test hangs the holder: how it starts (on dbURL, or through
// a proxy), then stops and resumes it.
type hang struct {
	start         func(t *testing.T, bin, socket, dbURL string) *child
	pause, resume func(t *testing.T, holder *child)
}

func TestHungWriterStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	signal := func(sig syscall.Signal) func(t *testing.T, c *child) {
		return func(t *testing.T, c *child) {
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
	}
	testHungWriter(t, "stopped", hang{
		start: func(t *testing.T, bin, socket, dbURL string) *child {
			return startWriter(t, bin, socket, dbURL, "writer", "--writer-lease-ttl", hungLeaseTTL.String())
		},
		pause: signal(syscall.SIGSTOP), resume: signal(syscall.SIGCONT),
	})
}

func TestHungWriterPartitioned(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	var proxy *storagetest.Proxy
	testHungWriter(t, "partitioned", hang{
		start: func(t *testing.T, bin, socket, dbURL string) *child {
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			if proxy, err = storagetest.NewProxy(u.Host); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxy.Close() })
			via, err := proxy.URL(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			return startWriter(t, bin, socket, via, "writer", "--writer-lease-ttl", hungLeaseTTL.String())
		},
		pause:  func(*testing.T, *child) { proxy.Pause() },
		resume: func(*testing.T, *child) { proxy.Resume() },
	})
}

func testHungWriter(t *testing.T, name string, h hang) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := startHungRun(t, ctx, name, h)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.col.run(ctx, r.reader.sport, "0")
	}()
	waitUntil(t, 60*time.Second, "the reader ready", func() bool { ready, _ := r.noWriter(); return ready })

	hs, _ := r.holder.writer()
	app := "marlowe-follower " + hs.WriterLease.Holder
	app = app[:min(len(app), 63)]
	h.pause(t, r.holder)
	took, longest := r.takeover(time.Now())
	// From the takeover on the hung writer must commit nothing. (What it
	// had sent before it hung may still commit once it hangs: the
	// database runs a statement already in its socket, and the writer
	// still held the lease then; so the mark is the takeover, not the
	// moment of the signal, which a loaded machine delivers late.)
	var tookOver time.Time
	if err := r.admin.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&tookOver); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s holder: the standby's first commit %s after the hang (TTL %s); the reader's longest no_writer stretch %s",
		name, took.Round(time.Millisecond), hungLeaseTTL, longest.Round(time.Millisecond))
	if took > hungLeaseTTL+5*time.Second {
		t.Fatalf("the standby took over %s after the hang: more than the TTL %s + 5 s", took, hungLeaseTTL)
	}
	if longest > hungLeaseTTL {
		t.Fatalf("the reader answered no_writer for %s at a stretch: more than the TTL %s", longest, hungLeaseTTL)
	}
	ss := r.checkStandbyHolds(hs)
	before := r.commits(app)
	waitUntil(t, 60*time.Second, "the new holder's commits", func() bool {
		return r.standby.metric("marlowe_history_commits_total") >= 3
	})
	if dnDone(r.dn) {
		t.Fatal("the chain was complete before the hung writer resumed: it would have nothing to commit")
	}

	h.resume(t, r.holder)
	last := r.holder.lostLease(t, "the hung writer did not stop once it ran again", ss.WriterLease.Holder, hs.WriterLease.Epoch+1)
	t.Logf("the hung writer's last line: %s", last)
	if n, after := r.commits(app), commitsAfter(t, r.admin, r.haURL, app, tookOver); n != before || after != 0 {
		t.Fatalf("the hung writer committed: %d of its commits before the takeover, %d at the end, %d since the takeover", before, n, after)
	}

	r.waitAtTip()
	cancel()
	wg.Wait()
	r.checkLogs()
}

// hungRun is a hung-writer test's processes: on the chain, an
// uninterrupted writer on a schema of its own (the reference), and on the
// schema under test the holder a test hangs, a standby and a reader, with
// a subscriber on the reader.
type hungRun struct {
	t                    *testing.T
	admin                *pgx.Conn
	dn                   *devnet.Devnet
	refURL, haURL        string
	ref, holder, standby *child
	reader               *child
	col                  *wsCollector
	commits              func(app string) int // logCommits's on haURL
}

// startHungRun starts the chain and the processes, and waits until the
// holder has committed and the standby stands by.
func startHungRun(t *testing.T, ctx context.Context, name string, h hang) *hungRun {
	bin := buildBinary(t)
	r := &hungRun{t: t, admin: adminConn(t), col: &wsCollector{}}
	dn, socket := failoverDevnet(t, ctx, 1200, 40)
	r.dn = dn
	r.refURL, r.haURL = pgSchema(t, r.admin, "hung_ref_"+name), pgSchema(t, r.admin, "hung_"+name)
	r.ref = startWriter(t, bin, socket, r.refURL, "all")
	r.holder = h.start(t, bin, socket, r.haURL)
	waitUntil(t, 60*time.Second, "the holder's first commit", r.holder.firstCommit)
	r.commits = logCommits(t, r.admin, r.haURL)
	r.standby = startWriter(t, bin, socket, r.haURL, "writer", "--writer-lease-ttl", hungLeaseTTL.String())
	waitUntil(t, 60*time.Second, "the standby standing by", r.standby.standsBy)
	r.reader = startService(t, bin, "reader", r.haURL, "")
	return r
}

// noWriter is whether the reader is ready, and whether it says no_writer.
func (r *hungRun) noWriter() (ready, no bool) {
	var rd query.Readiness
	code, err := getJSON(r.reader.base+"/readyz", &rd)
	_, no = rd.NotReady["no_writer"]
	return code == http.StatusOK && err == nil, no
}

// takeover samples the reader until the standby commits and the reader
// sees the writer again, and returns how long after paused the standby
// committed and the longest stretch of the reader's no_writer.
func (r *hungRun) takeover(paused time.Time) (took, longest time.Duration) {
	var gapFrom time.Time
	sampled := poll(2*time.Minute, func() bool {
		if took == 0 && r.standby.firstCommit() {
			took = time.Since(paused)
		}
		_, no := r.noWriter()
		switch {
		case no && gapFrom.IsZero():
			gapFrom = time.Now()
		case !no && !gapFrom.IsZero():
			longest = max(longest, time.Since(gapFrom))
			gapFrom = time.Time{}
		}
		return took != 0 && gapFrom.IsZero()
	})
	if !sampled {
		r.t.Fatalf("2 min after the hang: the standby committed after %s; the reader without a writer since %v", took, gapFrom)
	}
	return took, longest
}

// checkStandbyHolds checks that the stored lease is the standby's, at the
// hung holder's epoch (hs) plus one, and returns the standby's status.
func (r *hungRun) checkStandbyHolds(hs writerStatus) writerStatus {
	ss, _ := r.standby.writer()
	if holderName, epoch, expired := storedLease(r.t, r.admin, r.haURL); holderName != ss.WriterLease.Holder || epoch != hs.WriterLease.Epoch+1 || expired {
		r.t.Fatalf("the stored lease: %s epoch %d expired %v; the standby is %s, the hung holder had epoch %d",
			holderName, epoch, expired, ss.WriterLease.Holder, hs.WriterLease.Epoch)
	}
	return ss
}

// waitAtTip waits, once the chain has ended, for the new holder and the
// reference at its tip and the reader's subscriber at the new holder's
// head.
func (r *hungRun) waitAtTip() {
	t := r.t
	<-r.dn.Done()
	tip := r.dn.Store().Tip().BlockNo
	waitUntil(t, 120*time.Second, "the new holder at the tip", func() bool { return r.standby.atTip(tip) })
	waitUntil(t, 120*time.Second, "the uninterrupted writer at the tip", func() bool { return r.ref.atTip(tip) })
	st, _ := r.standby.writer()
	waitUntil(t, 60*time.Second, "the reader's subscriber at the head", func() bool {
		last, err := r.col.lastSeq()
		if err != nil {
			t.Fatalf("the reader's subscriber: %v", err)
		}
		return last >= st.HistorySeq
	})
}

// checkLogs stops the writers and checks that the log under test equals
// the reference's and that the reader's subscriber got all of it, in
// order, as stored.
func (r *hungRun) checkLogs() {
	t := r.t
	for _, c := range []*child{r.standby, r.ref} {
		if err := c.stop(t); err != nil {
			t.Fatalf("stopping: %v", err)
		}
	}
	n := sameState(t, r.refURL, r.haURL)
	log, _, _ := pgState(t, r.haURL)
	if len(r.col.got) != n {
		t.Fatalf("the reader's subscriber from seq 0 got %d records, the log holds %d", len(r.col.got), n)
	}
	for i := range log {
		if got, want := &r.col.got[i], &log[i]; got.Seq != int64(i+1) || digest(got) != digest(want) {
			t.Fatalf("record %d through the reader: %+v, the log's %+v", i+1, got, want)
		}
	}
}

// logCommits records, from now on, the application_name of every session
// that writes the history's tip or records or the projection's head on the
// schema dbURL names (a test table and triggers): a process's sessions
// carry its lease holder name. It returns how many such writes of a name
// are committed.
func logCommits(t *testing.T, admin *pgx.Conn, dbURL string) func(app string) int {
	t.Helper()
	u, _ := url.Parse(dbURL)
	schema := pgx.Identifier{u.Query().Get("search_path")}.Sanitize()
	ctx := context.Background()
	for _, stmt := range []string{
		`CREATE TABLE ` + schema + `.test_commit_log (app text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`CREATE FUNCTION ` + schema + `.test_log_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
			INSERT INTO ` + schema + `.test_commit_log (app) VALUES (current_setting('application_name')); RETURN NULL; END $$`,
		`CREATE TRIGGER test_log_commit AFTER INSERT OR UPDATE ON ` + schema + `.tip FOR EACH STATEMENT EXECUTE FUNCTION ` + schema + `.test_log_commit()`,
		`CREATE TRIGGER test_log_commit AFTER INSERT ON ` + schema + `.records FOR EACH STATEMENT EXECUTE FUNCTION ` + schema + `.test_log_commit()`,
		`CREATE TRIGGER test_log_commit AFTER INSERT OR UPDATE ON ` + schema + `.cv_head FOR EACH STATEMENT EXECUTE FUNCTION ` + schema + `.test_log_commit()`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	return func(app string) int {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.test_commit_log WHERE app = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// commitsAfter counts the logged writes of app made after at.
func commitsAfter(t *testing.T, admin *pgx.Conn, dbURL, app string, at time.Time) int {
	t.Helper()
	u, _ := url.Parse(dbURL)
	var n int
	if err := admin.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{u.Query().Get("search_path")}.Sanitize()+
		`.test_commit_log WHERE app = $1 AND at > $2`, app, at).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
