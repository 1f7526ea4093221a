package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

var scaleOutKills = flag.Int("scaleout.kills", 2, "TestScaleOut: how many times the active writer is killed")

// TestScaleOut runs the scale-out shape on one PostgreSQL database: a
// writer, its standby and two readers, following a devnet with rollbacks,
// with WebSocket subscribers on both readers that drop their connections at
// random and resume (ephemeral from seq 0, filtered by kind, and one durable
// stream with a connection on each reader). The active writer is killed
// with SIGKILL -scaleout.kills times (the standby takes over, a new standby
// joins), and one reader is killed and started again on its ports. At the
// end every subscriber holds every record of the log exactly once (the
// redelivery of a batch dropped before its ack aside), the durable stream's
// stored cursor is the head with exactly the log's records acknowledged
// (one round trip at a time across the two readers), and the records that
// stand equal those of an uninterrupted writer's on another schema.
func TestScaleOut(t *testing.T) {
	bin := buildBinary(t)
	admin := adminConn(t)
	ctx := t.Context()
	kills := *scaleOutKills
	blocks := uint64(160 + 60*kills)
	dn, socket := failoverDevnet(t, ctx, blocks, 40)
	refURL, haURL := pgSchema(t, admin, "scaleout_ref"), pgSchema(t, admin, "scaleout_ha")
	u, _ := url.Parse(haURL)
	schema := u.Query().Get("search_path")

	ref := startWriter(t, bin, socket, refURL, "all")
	active, standby := startWriterPair(t, bin, socket, haURL)
	readers := []*child{startService(t, bin, "reader", haURL, ""), startService(t, bin, "reader", haURL, "")}
	for i, r := range readers {
		waitUntil(t, 60*time.Second, fmt.Sprintf("reader %d serving", i+1), func() bool {
			st, err := r.status()
			return err == nil && st.Reader != nil && st.Reader.Listening
		})
	}

	// Subscribers on both readers.
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	row := &soakRow{}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	var subs, durables []*soakSubscriber
	kinds := protocol.Filter{Kinds: []string{string(record.KindInputsApplied), string(record.KindRolledBack)}}
	for i, r := range readers {
		for j, f := range []protocol.Filter{{All: true}, kinds, {All: true}} {
			s := &soakSubscriber{name: fmt.Sprintf("r%d-s%d", i+1, j), filter: f, durable: j == 2, row: row,
				rng: rand.New(rand.NewPCG(seed, uint64(10*i+j+2)))}
			if s.durable {
				durables = append(durables, s)
			} else {
				subs = append(subs, s)
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.run(loadCtx, r.sport) }()
		}
	}

	// Faults: the active writer killed, once a reader too.
	var took []time.Duration
	readerKilled := false
	for len(took) < kills && !dnDone(dn) {
		active.commitsMore(t, dn, uint64(20+rng.IntN(60))) // 0.5 to 2 s of the devnet's blocks
		var d time.Duration
		active, standby, d = failOver(t, bin, socket, haURL, active, standby)
		took = append(took, d)
		if !readerKilled {
			readerKilled = true
			r := readers[1]
			r.kill(t)
			readers[1] = startServiceOn(t, bin, "reader", haURL, "", r.qport, r.sport)
		}
	}
	if len(took) == 0 {
		t.Fatal("the chain ended before any failover")
	}

	// Quiet: the chain ends; the writer, the readers and the subscribers
	// catch up.
	<-dn.Done()
	tip := dn.Store().Tip().BlockNo
	waitUntil(t, 120*time.Second, "the active writer at the tip", func() bool { return active.atTip(tip) })
	waitUntil(t, 120*time.Second, "the uninterrupted writer at the tip", func() bool { return ref.atTip(tip) })
	st, _ := active.writer()
	head := st.HistorySeq
	for i, r := range readers {
		waitUntil(t, 60*time.Second, fmt.Sprintf("reader %d at the head %d", i+1, head), func() bool {
			st, err := r.status()
			return err == nil && st.Reader != nil && st.Reader.Head == head
		})
	}
	log, _, _ := pgState(t, haURL)
	if int64(len(log)) != head {
		t.Fatalf("the log holds %d records, the writer's head is %d", len(log), head)
	}
	lastOf := func(s *soakSubscriber) int64 {
		var last int64
		for _, r := range log {
			if !s.filtered() || matchesKinds(s.filter, &r) {
				last = r.Seq
			}
		}
		return last
	}
	waitUntil(t, 120*time.Second, "every subscriber at its last record", func() bool {
		for _, s := range subs {
			if s.lastSeq.Load() < lastOf(s) {
				return false
			}
		}
		return durableAcked(t, admin, schema) == int64(len(log))
	})
	stopLoad()
	wg.Wait()

	for _, s := range subs {
		lost, dup := s.check(t, log)
		if lost+dup > 0 {
			t.Errorf("subscriber %s: %d lost, %d duplicated", s.name, lost, dup)
		}
	}
	// The durable stream: its two connections (one per reader) together
	// received every record, nothing outside the log, and the store holds
	// the head with every record acknowledged exactly once.
	union := map[int64]recordDigest{}
	for _, s := range durables {
		for _, p := range s.problems {
			t.Errorf("durable subscriber %s: %s", s.name, p)
		}
		maps.Copy(union, s.received)
		if len(s.received) == 0 {
			t.Errorf("durable subscriber %s received nothing: the stream was not served by both readers", s.name)
		}
	}
	for _, r := range log {
		if d, ok := union[r.Seq]; !ok {
			t.Fatalf("the durable stream never delivered seq %d (%s)", r.Seq, brief(&r))
		} else if d != digest(&r) {
			t.Fatalf("the durable stream delivered seq %d with other contents than logged", r.Seq)
		}
	}
	if len(union) != len(log) {
		t.Fatalf("the durable stream delivered %d distinct seqs, the log holds %d", len(union), len(log))
	}
	var cursor string
	var records int64
	if err := admin.QueryRow(ctx, `SELECT cursor, records FROM `+pgx.Identifier{schema, "ws_streams"}.Sanitize()+
		` WHERE name = 'soak-durable'`).Scan(&cursor, &records); err != nil {
		t.Fatal(err)
	}
	if c, err := cursorSeq(cursor); err != nil || c != head || records != head {
		t.Fatalf("the durable stream's stored cursor %q with %d records acknowledged; want the head %d with %d", cursor, records, head, head)
	}

	for _, c := range []*child{standby, active, ref} {
		if err := c.stop(t); err != nil {
			t.Fatalf("stopping: %v", err)
		}
	}
	// The records that stand equal the uninterrupted run's (a writer that
	// takes over at a block it rolled back to is served that fork again,
	// so seqs may differ by repeated forks; docs/operations.md, "Soak").
	want, _, _ := pgState(t, refURL)
	gotLive, wantLive := standing(log), standing(want)
	if len(gotLive) != len(wantLive) {
		t.Fatalf("%d standing records with failovers (of %d), %d uninterrupted (of %d)", len(gotLive), len(log), len(wantLive), len(want))
	}
	for i := range gotLive {
		g, w := gotLive[i], wantLive[i]
		if g.Kind != w.Kind || g.Block != w.Block || g.TxID != w.TxID || g.TxIndex != w.TxIndex ||
			!reflect.DeepEqual(g.Contract, w.Contract) || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("standing record %d differs:\n failovers     seq %d %s\n uninterrupted seq %d %s", i+1, g.Seq, brief(&g), w.Seq, brief(&w))
		}
	}
	t.Logf("%d records (%d standing), %d blocks; %d writer failovers %v, a reader restarted; %d resumes, %d durable acks",
		len(log), len(gotLive), tip, len(took), took, row.resumes.Load(), row.durableAcks.Load())
}

// durableAcked is the count of records the durable stream soak-durable has
// acknowledged, as stored (0 before it exists).
func durableAcked(t *testing.T, admin *pgx.Conn, schema string) int64 {
	t.Helper()
	var n int64
	err := admin.QueryRow(context.Background(), `SELECT coalesce(max(records), 0) FROM `+
		pgx.Identifier{schema, "ws_streams"}.Sanitize()+` WHERE name = 'soak-durable'`).Scan(&n)
	if err != nil {
		return 0
	}
	return n
}
