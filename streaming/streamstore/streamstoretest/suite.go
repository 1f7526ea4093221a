// Package streamstoretest is the conformance suite of streamstore.Store:
// every implementation runs it from a small _test.go file, so that the
// SQLite and PostgreSQL stores behave alike.
package streamstoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// Opener opens the store under test at one fixed location (a directory, a
// schema): each call opens it again, seeing what earlier ones stored. The
// suite closes every store it opens.
type Opener func() (streamstore.Store, error)

// Run runs the suite. newOpener returns an Opener for a fresh, empty
// location for each subtest.
func Run(t *testing.T, newOpener func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"CreateGet", testCreateGet},
		{"CreateDuplicate", testCreateDuplicate},
		{"ListPages", testListPages},
		{"AckMovesForward", testAckMovesForward},
		{"AckMissing", testAckMissing},
		{"Delete", testDelete},
		{"SurvivesReopen", testSurvivesReopen},
		{"ConcurrentAcks", testConcurrentAcks},
		{"Closed", testClosed},
		{"HistoryIdentity", testHistoryIdentity},
		{"CheckHistory", testCheckHistory},
		{"Owners", testOwners},
		{"LeaseExclusive", testLeaseExclusive},
		{"LeaseAckFenced", testLeaseAckFenced},
		{"LeaseTakeTurns", testLeaseTakeTurns},
		{"LeaseLapses", testLeaseLapses},
		{"LeaseConcurrent", testLeaseConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newOpener(t)) })
	}
}

func mustOpen(t *testing.T, open Opener) streamstore.Store {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func sample(name string) *streamstore.Stream {
	return &streamstore.Stream{
		Name: name,
		Filter: protocol.Filter{Contracts: []string{
			"ab00000000000000000000000000000000000000000000000000000000000000#1"},
			Kinds: []string{"inputs_applied", "rolled_back"}},
		Mode: protocol.ModeAck, BatchSize: 50, BatchTimeout: 250 * time.Millisecond, Cursor: "120:0",
	}
}

func testCreateGet(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	in := sample("orders")
	before := time.Now().Add(-time.Second)
	if err := s.StreamCreate(ctx, in); err != nil {
		t.Fatal(err)
	}
	if in.CreatedAt.Before(before) || !in.CreatedAt.Equal(in.UpdatedAt) {
		t.Fatalf("timestamps %v %v", in.CreatedAt, in.UpdatedAt)
	}
	got, err := s.StreamGet(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != in.Name || !got.Filter.Equal(&in.Filter) || got.Mode != in.Mode || got.BatchSize != 50 ||
		got.BatchTimeout != in.BatchTimeout || got.Cursor != "120:0" || got.Batch != 0 || got.Records != 0 {
		t.Fatalf("got %+v, want %+v", got, in)
	}
	if !got.CreatedAt.Equal(in.CreatedAt) {
		t.Fatalf("created %v, stored %v", in.CreatedAt, got.CreatedAt)
	}
	if _, err := s.StreamGet(ctx, "nope"); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}
}

func testCreateDuplicate(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("a")); err != nil {
		t.Fatal(err)
	}
	other := sample("a")
	other.Mode = protocol.ModeBroadcast
	if err := s.StreamCreate(ctx, other); !errors.Is(err, streamstore.ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	got, err := s.StreamGet(ctx, "a")
	if err != nil || got.Mode != protocol.ModeAck {
		t.Fatalf("the first stream changed: %+v %v", got, err)
	}
}

func testListPages(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	names := []string{"b", "A", "a", "c-1", "c.0", "Z_9"}
	for _, n := range names {
		if err := s.StreamCreate(ctx, sample(n)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"A", "Z_9", "a", "b", "c-1", "c.0"} // byte order
	var got []string
	after := ""
	for {
		page, err := s.StreamList(ctx, &streamstore.StreamListParams{After: after, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range page {
			got = append(got, st.Name)
		}
		if len(page) < 4 {
			break
		}
		after = page[len(page)-1].Name
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list %v, want %v", got, want)
	}
	all, err := s.StreamList(ctx, nil)
	if err != nil || len(all) != len(names) {
		t.Fatalf("list all: %d %v", len(all), err)
	}
}

func testAckMovesForward(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	created, _ := s.StreamGet(ctx, "s")
	time.Sleep(2 * time.Millisecond) // updated_at must move
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "120:40", Batch: 1, Records: 40}); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "133", Batch: 3, Records: 13}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []int64{3, 2} {
		err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "90", Batch: b, Records: 1})
		if !errors.Is(err, streamstore.ErrStale) {
			t.Fatalf("ack of batch %d after 3: %v", b, err)
		}
	}
	got, err := s.StreamGet(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cursor != "133" || got.Batch != 3 || got.Records != 53 {
		t.Fatalf("after acks: %+v", got)
	}
	if !got.UpdatedAt.After(created.UpdatedAt) || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("timestamps: created %v updated %v, before %v", got.CreatedAt, got.UpdatedAt, created.UpdatedAt)
	}
}

func testAckMissing(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	err := s.StreamAck(context.Background(), &streamstore.StreamAckParams{Name: "ghost", Cursor: "1", Batch: 1})
	if !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("ack of a missing stream: %v", err)
	}
}

func testDelete(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	for _, n := range []string{"x", "y"} {
		if err := s.StreamCreate(ctx, sample(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.StreamDelete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamDelete(ctx, "x"); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.StreamGet(ctx, "x"); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	all, _ := s.StreamList(ctx, nil)
	if len(all) != 1 || all[0].Name != "y" {
		t.Fatalf("list after delete: %+v", all)
	}
	// The name can be used again, from scratch.
	if err := s.StreamCreate(ctx, sample("x")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.StreamGet(ctx, "x"); got == nil || got.Batch != 0 {
		t.Fatalf("recreated: %+v", got)
	}
}

func testSurvivesReopen(t *testing.T, open Opener) {
	ctx := context.Background()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StreamCreate(ctx, sample("keep")); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "keep", Cursor: "777", Batch: 9, Records: 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := mustOpen(t, open) // migrations run again: nothing to do
	got, err := s2.StreamGet(ctx, "keep")
	if err != nil || got.Cursor != "777" || got.Batch != 9 || got.Records != 5 {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
}

func testConcurrentAcks(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	const streams, acks = 4, 25
	for i := range streams {
		if err := s.StreamCreate(ctx, sample(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := int64(1); b <= acks; b++ {
				if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: fmt.Sprintf("s%d", i),
					Cursor: fmt.Sprint(b * 10), Batch: b, Records: 10}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range streams {
		got, err := s.StreamGet(ctx, fmt.Sprintf("s%d", i))
		if err != nil || got.Batch != acks || got.Records != 10*acks || got.Cursor != fmt.Sprint(10*acks) {
			t.Fatalf("s%d: %+v %v", i, got, err)
		}
	}
}

func testClosed(t *testing.T, open Opener) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := s.StreamGet(context.Background(), "x"); !errors.Is(err, streamstore.ErrClosed) {
		t.Fatalf("get after close: %v", err)
	}
}

func testHistoryIdentity(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if _, err := s.HistoryGet(ctx); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("HistoryGet of a new store: %v", err)
	}
	in := &streamstore.HistoryIdentity{NetworkMagic: 764824073, FirstSlot: 1 << 40, FirstHash: chain.Hash32{1, 2},
		HeadSeq: 1 << 33, HeadHash: chain.Hash32{31: 9}}
	before := time.Now().Add(-time.Second)
	if err := s.HistorySet(ctx, in); err != nil {
		t.Fatal(err)
	}
	if in.UpdatedAt.Before(before) {
		t.Fatalf("UpdatedAt %v", in.UpdatedAt)
	}
	_ = s.Close()
	s = mustOpen(t, open)
	got, err := s.HistoryGet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *in {
		t.Fatalf("got %+v, want %+v", got, in)
	}
	in2 := &streamstore.HistoryIdentity{NetworkMagic: 2, HeadSeq: 5, HeadHash: chain.Hash32{7}}
	if err := s.HistorySet(ctx, in2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.HistoryGet(ctx); err != nil || *got != *in2 {
		t.Fatalf("after a second HistorySet: %+v %v", got, err)
	}
}

// fakeLog is a history log of head records whose blocks are named by
// variant: two logs of one variant are copies of one history.
type fakeLog struct {
	head    int64
	variant byte
	// from: records from this seq on are in other blocks (the log was
	// followed again from there); 0: none.
	from int64
}

func (l *fakeLog) Head() int64 { return l.head }

func (l *fakeLog) RecordGet(_ context.Context, seq int64) (*record.Record, error) {
	if seq < 1 || seq > l.head {
		return nil, record.ErrNotFound
	}
	v := l.variant
	if l.from > 0 && seq >= l.from {
		v += 100
	}
	return &record.Record{Seq: seq, Block: chain.BlockHeader{Slot: uint64(seq) * 10, BlockNo: uint64(seq), //nolint:gosec // test
		Hash: chain.Hash32{v, byte(seq), byte(seq >> 8)}}}, nil
}

// movingLog is a fakeLog another process commits to: its head, read
// again, is now.
type movingLog struct {
	fakeLog
	now int64
}

func (l *movingLog) CurrentHead(context.Context) (int64, error) { return l.now, nil }

func testCheckHistory(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	const magic = 42
	// Streams from before the identity was kept: their cursors decide.
	for name, cursor := range map[string]string{"a": "0", "b": "3000", "c": "200:150"} {
		st := sample(name)
		st.Cursor = cursor
		if err := s.StreamCreate(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	// A history restored from an older backup than the streams (head 1344,
	// one stream acknowledged up to 3000): refused, the stream named.
	older := &fakeLog{head: 1344, variant: 1}
	err := streamstore.CheckHistory(ctx, s, magic, older)
	if !errors.Is(err, streamstore.ErrHistoryMismatch) || !strings.Contains(err.Error(), "b at 3000") ||
		!strings.Contains(err.Error(), "beyond the history's head 1344") || strings.Contains(err.Error(), "a at") ||
		!strings.Contains(err.Error(), "reset --streams --yes") || !strings.Contains(err.Error(), "restore backups") {
		t.Fatalf("older history: %v", err)
	}
	if _, err := s.HistoryGet(ctx); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("a refused check recorded an identity: %v", err)
	}
	// The history the streams were recorded against: accepted and recorded.
	full := &fakeLog{head: 3000, variant: 1}
	if err := streamstore.CheckHistory(ctx, s, magic, full); err != nil {
		t.Fatal(err)
	}
	id, err := s.HistoryGet(ctx)
	if err != nil || id.NetworkMagic != magic || id.HeadSeq != 3000 || id.FirstSlot != 10 ||
		id.FirstHash != (chain.Hash32{1, 1}) || id.HeadHash != (chain.Hash32{1, 3000 & 0xff, 3000 >> 8}) {
		t.Fatalf("recorded %+v %v", id, err)
	}
	// The same history grown: accepted.
	if err := streamstore.CheckHistory(ctx, s, magic, &fakeLog{head: 3500, variant: 1}); err != nil {
		t.Fatal(err)
	}
	// Another process commits while this one checks: a stream acknowledged
	// past the head this process read at start (3500) is within the head
	// read after the cursors; beyond that one too, it is refused.
	ahead := sample("ahead")
	ahead.Cursor = "3600"
	if err := s.StreamCreate(ctx, ahead); err != nil {
		t.Fatal(err)
	}
	if err := streamstore.CheckHistory(ctx, s, magic, &movingLog{fakeLog{head: 3500, variant: 1}, 3600}); err != nil {
		t.Fatalf("a cursor acknowledged while the check ran: %v", err)
	}
	err = streamstore.CheckHistory(ctx, s, magic, &movingLog{fakeLog{head: 3500, variant: 1}, 3550})
	if !errors.Is(err, streamstore.ErrHistoryMismatch) || !strings.Contains(err.Error(), "ahead at 3600") ||
		!strings.Contains(err.Error(), "beyond the history's head 3550") {
		t.Fatalf("a cursor beyond the moving head too: %v", err)
	}
	if err := s.StreamDelete(ctx, "ahead"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		magic uint32
		log   *fakeLog
		want  string
	}{
		{"another network", 1, &fakeLog{head: 4000, variant: 1}, "network magic 42, the history is of network magic 1"},
		{"another history", magic, &fakeLog{head: 4000, variant: 2}, "it is another history"},
		{"followed again", magic, &fakeLog{head: 4000, variant: 1, from: 3200}, "the log was followed again or replaced"},
		{"older backup", magic, older, "b at 3000"},
	} {
		err := streamstore.CheckHistory(ctx, s, tc.magic, tc.log)
		if !errors.Is(err, streamstore.ErrHistoryMismatch) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "reset --streams --yes") {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if id, err := s.HistoryGet(ctx); err != nil || id.HeadSeq != 3500 {
			t.Fatalf("%s: the refused check changed the identity: %+v %v", tc.name, id, err)
		}
	}
	// Once the streams beyond it are gone, an older copy of the same
	// history is accepted: the remaining cursors are within it.
	if err := s.StreamDelete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := streamstore.CheckHistory(ctx, s, magic, older); err != nil {
		t.Fatalf("older copy, cursors within: %v", err)
	}
}

func testOwners(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	for i, owner := range []string{"alice", "bob", "", "alice", "bob", "alice"} {
		st := sample(fmt.Sprintf("s%d", i))
		st.Owner = owner
		if err := s.StreamCreate(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	s = mustOpen(t, open)
	if got, err := s.StreamGet(ctx, "s1"); err != nil || got.Owner != "bob" {
		t.Fatalf("StreamGet: %+v %v", got, err)
	}
	names := func(p *streamstore.StreamListParams) string {
		t.Helper()
		list, err := s.StreamList(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range list {
			out = append(out, st.Owner+"/"+st.Name)
		}
		return strings.Join(out, " ")
	}
	alice, nobody, carol := "alice", "", "carol"
	for _, tc := range []struct {
		p    *streamstore.StreamListParams
		want string
	}{
		{&streamstore.StreamListParams{}, "alice/s0 bob/s1 /s2 alice/s3 bob/s4 alice/s5"},
		{&streamstore.StreamListParams{Owner: &alice}, "alice/s0 alice/s3 alice/s5"},
		{&streamstore.StreamListParams{Owner: &alice, After: "s0", Limit: 1}, "alice/s3"},
		{&streamstore.StreamListParams{Owner: &nobody}, "/s2"},
		{&streamstore.StreamListParams{Owner: &carol}, ""},
	} {
		if got := names(tc.p); got != tc.want {
			t.Fatalf("list %+v: %q, want %q", tc.p, got, tc.want)
		}
	}
}

func lease(name, holder string) *streamstore.StreamLeaseParams {
	return &streamstore.StreamLeaseParams{Name: name, Holder: holder, TTL: time.Minute}
}

// testLeaseExclusive: one holder at a time; the holder renews; a release
// frees it; the lease returns the stored cursor, moved by another holder's
// acknowledgement.
func testLeaseExclusive(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if _, err := s.StreamLease(ctx, lease("ghost", "a")); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("lease of a missing stream: %v", err)
	}
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	got, err := s.StreamLease(ctx, lease("s", "a"))
	if err != nil || got.Cursor != "120:0" || got.Batch != 0 {
		t.Fatalf("first lease: %+v %v", got, err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "b")); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("lease while a holds it: %v", err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	// Another holder's release changes nothing.
	if err := s.StreamRelease(ctx, lease("s", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "b")); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("lease after another holder's release: %v", err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "150", Batch: 1, Records: 30, Holder: "a"}); err != nil {
		t.Fatalf("ack under the lease: %v", err)
	}
	// The ack ended a's round trip: b (which asked) takes the next one and
	// sees the cursor a acknowledged.
	got, err = s.StreamLease(ctx, lease("s", "b"))
	if err != nil || got.Cursor != "150" || got.Batch != 1 || got.Records != 30 {
		t.Fatalf("b's lease after a's ack: %+v %v", got, err)
	}
	if err := s.StreamRelease(ctx, lease("s", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatalf("lease after b's release: %v", err)
	}
}

// testLeaseAckFenced: an acknowledgement made under a lease the holder no
// longer has changes nothing; a stale one stays ErrStale.
func testLeaseAckFenced(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 1, Records: 5, Holder: "b"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack by a process without the lease: %v", err)
	}
	if err := s.StreamRelease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 1, Records: 5, Holder: "a"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack after the lease was released: %v", err)
	}
	if got, _ := s.StreamGet(ctx, "s"); got.Cursor != "120:0" || got.Batch != 0 || got.Records != 0 {
		t.Fatalf("fenced acks moved the stream: %+v", got)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "200", Batch: 2, Records: 5, Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
		t.Fatal(err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "190", Batch: 2, Records: 5, Holder: "a"})
	if !errors.Is(err, streamstore.ErrStale) {
		t.Fatalf("second ack of batch 2: %v", err)
	}
	if _, err := s.StreamLease(ctx, lease("ghost", "a")); !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("lease of a missing stream: %v", err)
	}
	err = s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "ghost", Cursor: "1", Batch: 1, Holder: "a"})
	if !errors.Is(err, streamstore.ErrNotFound) {
		t.Fatalf("ack of a missing stream under a lease: %v", err)
	}
}

// testLeaseTakeTurns: two holders that both want the stream alternate;
// one alone keeps it.
func testLeaseTakeTurns(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	// Alone, a takes round trip after round trip.
	for b := int64(1); b <= 3; b++ {
		if _, err := s.StreamLease(ctx, lease("s", "a")); err != nil {
			t.Fatalf("a alone, round trip %d: %v", b, err)
		}
		if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(b), Batch: b, Records: 1, Holder: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	// Both want it: b asks while a has a batch in flight; once a's round
	// trip ends, a yields the next one to b even when a asks first, and
	// so on: the batches alternate.
	holder := "a"
	if _, err := s.StreamLease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	for b := int64(4); b <= 9; b++ {
		other := map[string]string{"a": "b", "b": "a"}[holder]
		if _, err := s.StreamLease(ctx, lease("s", other)); !errors.Is(err, streamstore.ErrLeased) {
			t.Fatalf("round trip %d: %s's lease while %s holds it: %v", b, other, holder, err)
		}
		if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(b), Batch: b, Records: 1, Holder: holder}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.StreamLease(ctx, lease("s", holder)); !errors.Is(err, streamstore.ErrLeased) {
			t.Fatalf("round trip %d: %s took the stream again although %s asked for it: %v", b+1, holder, other, err)
		}
		if _, err := s.StreamLease(ctx, lease("s", other)); err != nil {
			t.Fatalf("round trip %d: %s, which asked, did not get the stream: %v", b+1, other, err)
		}
		holder = other
	}
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	// An ask lapses: the last holder, alone again, is not kept waiting for
	// a process that asked once and went away.
	if _, err := s.StreamLease(ctx, &streamstore.StreamLeaseParams{Name: "s", Holder: holder, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	gone := map[string]string{"a": "b", "b": "a"}[holder]
	if _, err := s.StreamLease(ctx, &streamstore.StreamLeaseParams{Name: "s", Holder: gone, TTL: 30 * time.Millisecond}); !errors.Is(err, streamstore.ErrLeased) {
		t.Fatal(err)
	}
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.StreamLease(ctx, lease("s", holder))
		if err == nil {
			break
		}
		if !errors.Is(err, streamstore.ErrLeased) || time.Now().After(deadline) {
			t.Fatalf("%s alone after %s's ask lapsed: %v", holder, gone, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.StreamRelease(ctx, lease("s", holder)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.StreamGet(ctx, "s"); got.Batch != 9 || got.Records != 9 || got.Cursor != "9" {
		t.Fatalf("after the turns: %+v", got)
	}
}

// testLeaseLapses: a lease not renewed lapses, and the next holder takes
// it; the lapsed holder can no longer acknowledge.
func testLeaseLapses(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	short := &streamstore.StreamLeaseParams{Name: "s", Holder: "a", TTL: 50 * time.Millisecond}
	if _, err := s.StreamLease(ctx, short); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.StreamLease(ctx, lease("s", "b"))
		if err == nil {
			break
		}
		if !errors.Is(err, streamstore.ErrLeased) || time.Now().After(deadline) {
			t.Fatalf("b's lease after a's lapsed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: "300", Batch: 1, Records: 1, Holder: "a"})
	if !errors.Is(err, streamstore.ErrLeased) {
		t.Fatalf("ack by the lapsed holder: %v", err)
	}
}

// testLeaseConcurrent: holders racing for one stream never hold it at
// once, and every acknowledged batch counts exactly once.
func testLeaseConcurrent(t *testing.T, open Opener) {
	ctx := context.Background()
	s := mustOpen(t, open)
	if err := s.StreamCreate(ctx, sample("s")); err != nil {
		t.Fatal(err)
	}
	const holders, rounds = 4, 15
	var inFlight, overlaps, acked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, holders)
	for h := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("h%d", h)
			for done := 0; done < rounds; {
				st, err := s.StreamLease(ctx, lease("s", me))
				if errors.Is(err, streamstore.ErrLeased) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if inFlight.Add(1) != 1 {
					overlaps.Add(1)
				}
				next := st.Batch + 1
				inFlight.Add(-1)
				if err := s.StreamAck(ctx, &streamstore.StreamAckParams{Name: "s", Cursor: fmt.Sprint(next), Batch: next, Records: 1, Holder: me}); err != nil {
					errs <- fmt.Errorf("%s: ack of batch %d under its lease: %w", me, next, err)
					return
				}
				acked.Add(1)
				done++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if overlaps.Load() != 0 {
		t.Fatalf("%d round trips overlapped another holder's", overlaps.Load())
	}
	got, err := s.StreamGet(ctx, "s")
	if err != nil || got.Batch != holders*rounds || got.Records != holders*rounds || acked.Load() != holders*rounds {
		t.Fatalf("after %d leased round trips: %+v %v (acked %d)", holders*rounds, got, err, acked.Load())
	}
}
