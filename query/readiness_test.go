package query_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/query"
)

// newStatusFixture is a fixture whose Status is the service's as changed
// by the function set last (none at first).
func newStatusFixture(t *testing.T) (*fixture, func(func(*query.Status))) {
	var (
		mu     sync.Mutex
		change func(*query.Status)
	)
	f := newFixture(t, projectiontest.SQLite, 16, 60, func(c *query.Config) {
		base := c.Status
		c.Status = func() query.Status {
			st := base()
			mu.Lock()
			defer mu.Unlock()
			if change != nil {
				change(&st)
			}
			return st
		}
	})
	return f, func(fn func(*query.Status)) {
		mu.Lock()
		change = fn
		mu.Unlock()
	}
}

// TestReadiness drives /readyz, /status and the readiness metrics through
// each condition (answers checked against the OpenAPI document): every
// reason is a named field of the 503 body, a line of reasons and a
// marlowe_not_ready series, and /status shows the state behind it.
func TestReadiness(t *testing.T) {
	f, set := newStatusFixture(t)
	ready := func(want int) query.Readiness {
		t.Helper()
		var r query.Readiness
		f.get("/readyz", want).decode(t, &r)
		return r
	}
	metrics := func() string {
		t.Helper()
		return string(f.get("/metrics", http.StatusOK).body)
	}
	if r := ready(http.StatusOK); !r.Ready || len(r.Reasons) != 0 || len(r.NotReady) != 0 {
		t.Fatalf("ready: %+v", r)
	}
	if m := metrics(); !strings.Contains(m, "marlowe_ready 1") || !strings.Contains(m, `marlowe_not_ready{reason="node_disconnected"} 0`) {
		t.Fatal("readiness metrics missing while ready")
	}
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tip := f.p.Tip()
	for _, c := range []struct {
		reason string
		change func(*query.Status)
		text   string
		status string // in /status
	}{
		{query.NotReadyNodeDisconnected, func(s *query.Status) {
			s.Connected, s.NodeError = false, "dial unix /ipc/node.socket: connect: no such file or directory"
		}, "not connected to the node: dial unix", `"nodeError":"dial unix`},
		{query.NotReadyHandshake, func(s *query.Status) {
			s.Connected = false
			s.Handshake = &query.HandshakeFailure{Reason: "network_magic", Message: "handshake refused: network magic 764824073 does not match the node's (1, preprod)"}
		}, "network magic 764824073 does not match the node's (1, preprod)", `"handshakeFailure":{"reason":"network_magic"`},
		{query.NotReadyWaitingForNode, func(s *query.Status) {
			s.Connected = false
			s.Waiting = &query.NodeWait{NodeTip: chain.Tip{BlockNo: 500}, Point: chain.BlockHeader{BlockNo: 3000}, Since: since}
			s.NodeTip = s.Waiting.NodeTip
		}, "2500 blocks behind the follower's point", `"blocksBehind":2500,"since":"2026-01-02T03:04:05Z"}`},
		{query.NotReadyDiverged, func(s *query.Status) {
			s.Connected = false
			s.Diverged = &query.Divergence{Reason: "no intersection with the node's chain: ...", Action: "marlowe-follower reset --yes", Since: since}
		}, "following stopped: no intersection", `"action":"marlowe-follower reset --yes"`},
		{query.NotReadyCommitFailing, func(s *query.Status) {
			s.CommitError, s.CommitFailingSince, s.CommitFailures = "sqlitestore: commit: database or disk is full", since, 24
		}, "database or disk is full", `"commitError":{"message":"sqlitestore: commit: database or disk is full"`},
		{query.NotReadyBehindTip, func(s *query.Status) {
			s.Committed = chain.BlockHeader{BlockNo: tip.BlockNo - 40}
		}, "40 blocks behind the node's tip (at most 10)", `"committedBlocksBehind":40`},
		{query.NotReadyProjectionLagging, func(s *query.Status) { s.HistorySeq += 288 }, "288 records behind the history (at most 100)", `"lag":288`},
		{query.NotReadyProjectionFailing, func(s *query.Status) { s.ProjectionError = "contract store: commit: disk full" }, "disk full", `"error":"contract store: commit: disk full"`},
	} {
		set(c.change)
		r := ready(http.StatusServiceUnavailable)
		d, ok := r.NotReady[c.reason]
		if r.Ready || len(r.NotReady) != 1 || !ok || len(r.Reasons) != 1 || r.Reasons[0] != d.Message || !strings.Contains(d.Message, c.text) {
			t.Fatalf("%s: %+v", c.reason, r)
		}
		switch c.reason {
		case query.NotReadyProjectionLagging:
			if *d.Value != 288 || *d.Limit != 100 {
				t.Fatalf("lag %d of %d", *d.Value, *d.Limit)
			}
		case query.NotReadyCommitFailing, query.NotReadyWaitingForNode:
			if d.Since == nil || !d.Since.Equal(since) {
				t.Fatalf("%s since %v", c.reason, d.Since)
			}
		case query.NotReadyDiverged:
			if d.Action != "marlowe-follower reset --yes" {
				t.Fatalf("action %q", d.Action)
			}
		}
		if m := metrics(); !strings.Contains(m, "marlowe_ready 0") || !strings.Contains(m, `marlowe_not_ready{reason="`+c.reason+`"} 1`) {
			t.Fatalf("%s: metrics do not say it", c.reason)
		}
		if body := string(f.get("/status", http.StatusOK).body); !strings.Contains(body, c.status) {
			t.Fatalf("%s: /status %s lacks %s", c.reason, body, c.status)
		}
	}
	// Several at once: each its own field.
	set(func(s *query.Status) {
		s.Connected, s.CommitError, s.HistorySeq = false, "disk full", s.HistorySeq+1000
	})
	r := ready(http.StatusServiceUnavailable)
	for _, reason := range []string{query.NotReadyNodeDisconnected, query.NotReadyCommitFailing, query.NotReadyProjectionLagging} {
		if _, ok := r.NotReady[reason]; !ok {
			t.Fatalf("%s missing: %+v", reason, r)
		}
	}
	if len(r.Reasons) != 3 {
		t.Fatalf("reasons %q", r.Reasons)
	}
	set(nil)
	ready(http.StatusOK)
}

// TestReadinessWriterLease: a reader is ready while the writer lease it
// last read runs (or before it read it) and answers 503 no_writer once the
// lease has expired (with since: the expiry; the marlowe_not_ready series;
// /status's writerLease) or its holder's session has ended, and is ready
// again once a writer holds it. A
// writer that does not hold the lease is 503 writer_standby, one whose
// lease lapsed 503 writer_lease_lapsed.
func TestReadinessWriterLease(t *testing.T) {
	f, setStatus := newStatusFixture(t)
	set := func(asReader bool, l *query.WriterLease) {
		setStatus(func(st *query.Status) {
			st.WriterLease = l
			if asReader {
				st.Role = "reader"
				st.Reader = &query.ReaderStatus{Head: st.HistorySeq, WriterHead: st.HistorySeq, Listening: true}
			} else {
				st.Role = "writer"
			}
		})
	}
	set(false, nil)
	ready := func(want int) (r query.Readiness) {
		t.Helper()
		f.get("/readyz", want).decode(t, &r)
		return r
	}
	taken := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	held := query.WriterLease{Known: true, Holder: "host-a/1/0a0b0c0d", Epoch: 3, TTL: 10 * time.Second,
		RenewedAt: time.Now().Add(-2 * time.Second), RenewalAge: 2 * time.Second, ExpiresIn: 8 * time.Second, Since: taken}
	// A reader that has not read the lease yet, and one that sees it held:
	// ready.
	for _, l := range []*query.WriterLease{nil, {}, &held} {
		set(true, l)
		if r := ready(http.StatusOK); !r.Ready {
			t.Fatalf("lease %+v: %+v", l, r)
		}
	}
	body := string(f.get("/status", http.StatusOK).body)
	if !strings.Contains(body, `"writerLease":{"holder":"host-a/1/0a0b0c0d","epoch":3,"ttlSeconds":10,"renewedAt":`) ||
		!strings.Contains(body, `"renewalAgeSeconds":2,"expiresInSeconds":8,"expired":false,"since":"2026-01-02T03:00:00Z"}`) {
		t.Fatalf("/status %s lacks the lease", body)
	}
	// The lease expired: nobody writes.
	expired := held
	expired.ExpiresIn, expired.RenewalAge = -2*time.Second, 12*time.Second
	expired.Since = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	set(true, &expired)
	r := ready(http.StatusServiceUnavailable)
	d, ok := r.NotReady[query.NotReadyNoWriter]
	if r.Ready || len(r.NotReady) != 1 || !ok || len(r.Reasons) != 1 ||
		!strings.Contains(d.Message, "the writer lease expired 2s ago (its last holder host-a/1/0a0b0c0d, epoch 3)") ||
		d.Since == nil || !d.Since.Equal(expired.Since) {
		t.Fatalf("no writer: %+v", r)
	}
	if m := string(f.get("/metrics", http.StatusOK).body); !strings.Contains(m, "marlowe_ready 0") ||
		!strings.Contains(m, `marlowe_not_ready{reason="no_writer"} 1`) {
		t.Fatal("metrics do not say no_writer")
	}
	if body := string(f.get("/status", http.StatusOK).body); !strings.Contains(body, `"expiresInSeconds":-2,"expired":true`) {
		t.Fatalf("/status %s lacks the expiry", body)
	}
	// The holder's session ended before its lease expired: nobody writes.
	gone := held
	gone.SessionWatched, gone.SessionEnded = true, true
	set(true, &gone)
	r = ready(http.StatusServiceUnavailable)
	if d, ok := r.NotReady[query.NotReadyNoWriter]; !ok || len(r.NotReady) != 1 || d.Since != nil ||
		!strings.Contains(d.Message, "the writer lease's holder host-a/1/0a0b0c0d (epoch 3) is gone, its database session ended") {
		t.Fatalf("no writer, its session ended: %+v", r)
	}
	if body := string(f.get("/status", http.StatusOK).body); !strings.Contains(body, `"expired":false,"sessionWatched":true,"sessionEnded":true`) {
		t.Fatalf("/status %s lacks the ended session", body)
	}
	// A writer holds it again.
	set(true, &held)
	if r := ready(http.StatusOK); !r.Ready {
		t.Fatalf("writer back: %+v", r)
	}
	if m := string(f.get("/metrics", http.StatusOK).body); !strings.Contains(m, `marlowe_not_ready{reason="no_writer"} 0`) {
		t.Fatal("no_writer metric not 0 once a writer holds the lease")
	}

	// Writers: the holder is ready; a standby and a holder whose lease
	// lapsed are not.
	mine := held
	mine.Writer, mine.Held = true, true
	set(false, &mine)
	if r := ready(http.StatusOK); !r.Ready {
		t.Fatalf("the holder: %+v", r)
	}
	if body := string(f.get("/status", http.StatusOK).body); !strings.Contains(body, `"writerLease":{"held":true,"holder":`) {
		t.Fatalf("/status %s: the holder's lease", body)
	}
	standby := held
	standby.Writer, standby.Since = true, time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC)
	set(false, &standby)
	r = ready(http.StatusServiceUnavailable)
	if d, ok := r.NotReady[query.NotReadyWriterStandby]; !ok || len(r.NotReady) != 1 || d.Since == nil || !d.Since.Equal(standby.Since) {
		t.Fatalf("the standby: %+v", r)
	}
	lapsed := mine
	lapsed.Held, lapsed.Lapsed, lapsed.RenewalAge = false, true, 8*time.Second
	set(false, &lapsed)
	r = ready(http.StatusServiceUnavailable)
	if d, ok := r.NotReady[query.NotReadyLeaseLapsed]; !ok || len(r.NotReady) != 1 ||
		!strings.Contains(d.Message, "has not renewed the writer lease for 8s (TTL 10s): it commits nothing") {
		t.Fatalf("the lapsed holder: %+v", r)
	}
	if body := string(f.get("/status", http.StatusOK).body); !strings.Contains(body, `"writerLease":{"held":false,"lapsed":true,`) {
		t.Fatalf("/status %s: the lapsed holder's lease", body)
	}
}
