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
	"testing"
	"time"

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

// withStream opens the store and creates the stream name (sample) in it.
func withStream(t *testing.T, open Opener, name string) streamstore.Store {
	t.Helper()
	s := mustOpen(t, open)
	if err := s.StreamCreate(context.Background(), sample(name)); err != nil {
		t.Fatal(err)
	}
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
	s := withStream(t, open, "a")
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
	s := withStream(t, open, "s")
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
	stores, names := make([]streamstore.Store, streams), make([]string, streams)
	for i := range streams {
		stores[i], names[i] = s, fmt.Sprintf("s%d", i)
	}
	if err := AckInParallel(ctx, stores, names, acks); err != nil {
		t.Fatal(err)
	}
	for i := range streams {
		got, err := s.StreamGet(ctx, fmt.Sprintf("s%d", i))
		if err != nil || got.Batch != acks || got.Records != 10*acks || got.Cursor != fmt.Sprint(10*acks) {
			t.Fatalf("s%d: %+v %v", i, got, err)
		}
	}
}

// AckInParallel acknowledges the stream names[i] on stores[i], one
// goroutine a stream, acks batches each (batch b: cursor b*10, 10
// records), and returns the first error.
func AckInParallel(ctx context.Context, stores []streamstore.Store, names []string, acks int64) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := int64(1); b <= acks; b++ {
				if err := stores[i].StreamAck(ctx, &streamstore.StreamAckParams{Name: name,
					Cursor: fmt.Sprint(b * 10), Batch: b, Records: 10}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
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
