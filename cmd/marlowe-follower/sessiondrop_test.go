package main

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/storage"
)

// TestWriterSessionDropped: the holder's lease connection is ended
// (pg_terminate_backend, as an administrator, a restarted proxy or a
// network reset do) while its process runs on, with a TTL of a minute:
// only the session can explain a takeover within it. The standby, which
// waits on the holder's session, takes over at once; the old holder sees
// its connection end, reconnects, finds the lease taken and exits 1 with
// the one line, having committed nothing since the takeover (its epoch is
// fenced); the log equals an uninterrupted writer's.
func TestWriterSessionDropped(t *testing.T) {
	bin := buildBinary(t)
	admin := adminConn(t)
	ctx := t.Context()
	dn, socket := failoverDevnet(t, ctx, 600, 40)
	refURL, haURL := pgSchema(t, admin, "dropped_ref"), pgSchema(t, admin, "dropped")
	u, _ := url.Parse(haURL)
	schema := u.Query().Get("search_path")
	lease := pgx.Identifier{schema, "writer_lease"}.Sanitize()
	const ttl = time.Minute
	ref := startWriter(t, bin, socket, refURL, "all")
	holder := startWriter(t, bin, socket, haURL, "writer", "--writer-lease-ttl", ttl.String())
	waitUntil(t, 60*time.Second, "the holder's first commit", holder.firstCommit)
	commits := logCommits(t, admin, haURL)
	standby := startWriter(t, bin, socket, haURL, "writer", "--writer-lease-ttl", ttl.String())
	waitUntil(t, 60*time.Second, "the standby standing by", standby.standsBy)
	hs, _ := holder.writer()
	if !hs.WriterLease.SessionWatched {
		t.Fatalf("the holder does not name its session: %+v", *hs.WriterLease)
	}
	app := "marlowe-follower " + hs.WriterLease.Holder
	app = app[:min(len(app), 63)]
	// The standby's first wait on the holder's session lasts until the
	// lease's expiry, 40 s or more away: it is still waiting when the
	// session ends.
	key := uint64(storage.LeaseLockKey(schema))
	waitUntil(t, 60*time.Second, "the standby waiting on the holder's session", func() bool {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1`, int64(key>>32), int64(key&0xffffffff)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})

	var pid int32
	if err := admin.QueryRow(ctx, `SELECT session_pid FROM `+lease).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	waitUntil(t, 30*time.Second, "the standby's first commit", standby.firstCommit)
	took := time.Since(cut)
	ss, _ := standby.writer()
	if holderName, epoch, expired := storedLease(t, admin, haURL); holderName != ss.WriterLease.Holder || epoch != hs.WriterLease.Epoch+1 || expired {
		t.Fatalf("the stored lease: %s epoch %d expired %v; the standby is %s, the holder had epoch %d",
			holderName, epoch, expired, ss.WriterLease.Holder, hs.WriterLease.Epoch)
	}
	if !strings.Contains(standby.stderr.String(), `"taken":"the holder's session ended"`) {
		t.Fatal("the standby does not say it took the lease because the holder's session ended")
	}
	last := holder.lostLease(t, "the holder whose session ended did not stop", ss.WriterLease.Holder, hs.WriterLease.Epoch+1)
	var after int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "test_commit_log"}.Sanitize()+
		` WHERE app = $1 AND at >= (SELECT acquired_at FROM `+lease+`)`, app).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != 0 || commits(app) == 0 {
		t.Fatalf("the old holder committed %d times after the takeover (%d in all)", after, commits(app))
	}
	t.Logf("the holder's lease session ended: the standby's first commit %s later (TTL %s); the old holder's last line: %s",
		took.Round(time.Millisecond), ttl, last)

	<-dn.Done()
	tip := dn.Store().Tip().BlockNo
	waitUntil(t, 120*time.Second, "the new holder at the tip", func() bool { return standby.atTip(tip) })
	waitUntil(t, 120*time.Second, "the uninterrupted writer at the tip", func() bool { return ref.atTip(tip) })
	for _, c := range []*child{standby, ref} {
		if err := c.stop(t); err != nil {
			t.Fatalf("stopping: %v", err)
		}
	}
	sameState(t, refURL, haURL)
}
