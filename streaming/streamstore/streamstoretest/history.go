package streamstoretest

// The history identity a store keeps (HistoryGet, HistorySet) and the
// check of a history log against the store's streams (CheckHistory).

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

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
