package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/history/record"
)

// TestRecordCacheEncodesOnce: the copies of a committed record that the
// history store hands each subscription get one shared encoding, equal to
// appendRecord's; the same seq undone by a rollback is another record; a
// frame built from the cache is the frame built without it; records far
// behind the head are not cached; the cache stays bounded.
func TestRecordCacheEncodesOnce(t *testing.T) {
	var c RecordCache
	head := int64(5000)
	r := record.Record{Seq: head, Kind: record.KindInputsApplied, Payload: json.RawMessage(`{"x":1}`)}
	a, b := r, r // two subscriptions' copies
	ea, eb := c.Encoded(&a), c.Encoded(&b)
	if &ea[0] != &eb[0] {
		t.Fatal("two copies of one record were encoded twice")
	}
	if string(ea) != string(AppendRecord(nil, &r)) {
		t.Fatalf("cached %s, want %s", ea, AppendRecord(nil, &r))
	}
	rb := head + 3
	undone := r
	undone.RolledBackBy = &rb
	if eu := c.Encoded(&undone); string(eu) != string(AppendRecord(nil, &undone)) || string(eu) == string(ea) {
		t.Fatalf("a rolled-back copy encoded as %s", eu)
	}
	recs := []record.Record{r, undone, {Seq: head - 1, Kind: record.KindRolledBack}}
	tip := []byte(`{"seq":5003}`)
	want := BatchFrame("s", 7, record.Cursor{Seq: head}, tip, true, recs)
	for range 2 {
		if got := c.BatchFrame("s", 7, record.Cursor{Seq: head}, tip, true, recs, nil, head); string(got) != string(want) {
			t.Fatalf("cached frame %s\nwant %s", got, want)
		}
	}
	old := record.Record{Seq: head - CacheWindow, Kind: record.KindInputsApplied}
	if got := c.AppendRecord(nil, &old, head); string(got) != string(AppendRecord(nil, &old)) {
		t.Fatalf("%s", got)
	}
	sh := &c.shards[uint64(old.Seq)%cacheShards]
	if _, ok := sh.cur[keyOf(&old)]; ok {
		t.Fatal("a record far behind the head was cached")
	}
	for seq := range int64(100_000) {
		c.Encoded(&record.Record{Seq: seq, Kind: record.KindInputsApplied})
	}
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].cur) + len(c.shards[i].old)
	}
	if n > 2*cacheShards*cacheShardEntries {
		t.Fatalf("%d cached records", n)
	}
}

// BenchmarkCommitFrames builds the frames of one commit (3 records with
// 1 KB payloads) for 1,000 subscriptions: with the record cache (each
// record encoded once, the bytes shared) and without (each frame encodes
// its records).
func BenchmarkCommitFrames(b *testing.B) {
	payload := json.RawMessage(`{"contract":` + strings.Repeat(`{"when":[{"case":{"deposits":1000000,"into_account":{"role_token":"Buyer"}}}]},`, 12) + `null}`)
	head := int64(1_000_000)
	recs := []record.Record{
		{Seq: head - 2, Kind: record.KindInputsApplied, Payload: payload},
		{Seq: head - 1, Kind: record.KindInputsApplied, Payload: payload},
		{Seq: head, Kind: record.KindContractCreated, Payload: payload},
	}
	tip := []byte(`{"slot":412345,"blockNo":20611,"hash":"9c1e00000000000000000000000000000000000000000000000000000000ab12","seq":1000000}`)
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			for range b.N {
				var c *RecordCache
				if cached {
					c = new(RecordCache) // a fresh cache: the commit is encoded once here
				}
				for i := range 1000 {
					f := c.BatchFrame("s", int64(i), record.Cursor{Seq: head}, tip, false, recs, nil, head)
					PutFrameBuf(f)
				}
			}
		})
	}
}
