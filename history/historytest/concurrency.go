package historytest

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// snapshotRead is what a reader saw of a snapshot taken while the writer ran.
type snapshotRead struct {
	at   int64
	recs []record.Record
}

// testConcurrency runs readers against a writer: log readers page from the
// start until they reach the final head, snapshot readers read a whole
// snapshot at a head they saw, checkpoint readers check that a checkpoint
// is one commit's (its head and tip belong together). Afterwards every read
// is compared with the model: what a reader saw of a record never changes
// except its rollback mark, and a snapshot is stable.
func (s *suite) testConcurrency(t *testing.T) {
	b := s.backend(t)
	w := newWriter(t, b, 71, 16)
	var (
		mu      sync.Mutex
		tipsOf  = map[int64]map[uint64]bool{0: {0: true}} // committed head -> tip block numbers
		done    = make(chan struct{})
		readers sync.WaitGroup
	)
	w.onCommit = func(p *history.CommitParams, head int64) {
		mu.Lock()
		if tipsOf[head] == nil {
			tipsOf[head] = make(map[uint64]bool)
		}
		tipsOf[head][p.Checkpoint.Tip.BlockNo] = true
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done) }) }
	// Should the writer fail, the readers stop before the test ends.
	defer func() {
		stop()
		cancel()
		readers.Wait()
	}()
	logs := make([][]record.Record, 3)
	snaps := make([][]snapshotRead, 2)
	for i := range logs {
		readers.Add(1)
		go func() {
			defer readers.Done()
			logs[i] = followLog(ctx, t, b, done, 37+i*30)
		}()
	}
	for i := range snaps {
		readers.Add(1)
		go func() {
			defer readers.Done()
			snaps[i] = readSnapshots(ctx, t, b, done)
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		readCheckpoints(ctx, t, b, done, func(cp *history.Checkpoint) bool {
			mu.Lock()
			defer mu.Unlock()
			return tipsOf[cp.Head][cp.Tip.BlockNo]
		})
	}()

	rng := rand.New(rand.NewPCG(71, 1))
	for range 150 {
		w.grow(1 + rng.IntN(6))
		if rng.IntN(4) == 0 {
			w.rollBack(1 + rng.IntN(5))
		}
		w.flush()
	}
	stop()
	readers.Wait()
	if t.Failed() {
		return
	}
	checkLogReads(t, logs, w.log)
	checkSnapshotReads(t, snaps, w)
}

// followLog pages through the log from the start, as a subscriber catching
// up does, until the writer is done and the log read to its end, checking
// that seqs follow each other without gaps.
func followLog(ctx context.Context, t *testing.T, b history.Backend, done <-chan struct{}, page int) []record.Record {
	var out []record.Record
	p := record.RecordListParams{Limit: page}
	finished := false
	for ctx.Err() == nil {
		if !finished {
			select {
			case <-done:
				finished = true // one more pass reads what the last commit wrote
			default:
			}
		}
		recs, err := b.RecordList(ctx, &p)
		if err != nil {
			t.Errorf("log page after %d: %v", p.After, err)
			return out
		}
		for _, r := range recs {
			if r.Seq != p.After+1 {
				t.Errorf("log page: seq %d after %d", r.Seq, p.After)
				return out
			}
			p.After = r.Seq
			out = append(out, r)
		}
		if len(recs) < page && finished {
			return out
		}
	}
	return out
}

// readSnapshots reads whole snapshots at the head, one after the other,
// until done.
func readSnapshots(ctx context.Context, t *testing.T, b history.Backend, done <-chan struct{}) []snapshotRead {
	var reads []snapshotRead
	for ctx.Err() == nil {
		select {
		case <-done:
			return reads
		default:
		}
		head, err := b.Head(ctx)
		if err != nil {
			t.Errorf("head: %v", err)
			return reads
		}
		p := record.RecordListParams{Mode: record.ModeSnapshot, Snapshot: head, Limit: 50}
		var recs []record.Record
		for {
			page, err := b.RecordList(ctx, &p)
			if err != nil {
				t.Errorf("snapshot page: %v", err)
				return reads
			}
			recs = append(recs, page...)
			if len(page) < p.Limit {
				break
			}
			p.After = page[len(page)-1].Seq
		}
		reads = append(reads, snapshotRead{at: head, recs: recs})
	}
	return reads
}

// readCheckpoints reads the checkpoint until done, each one a commit
// wrote (written).
func readCheckpoints(ctx context.Context, t *testing.T, b history.Backend, done <-chan struct{}, written func(*history.Checkpoint) bool) {
	for ctx.Err() == nil {
		select {
		case <-done:
			return
		default:
		}
		cp, err := b.CheckpointGet(ctx)
		if err != nil {
			t.Errorf("checkpoint: %v", err)
			return
		}
		if !written(cp) {
			t.Errorf("checkpoint with head %d and tip block %d: no commit wrote that", cp.Head, cp.Tip.BlockNo)
			return
		}
	}
}

// checkLogReads checks what the log readers read against the final log:
// every record as appended, and a mark only the one it got.
func checkLogReads(t *testing.T, logs [][]record.Record, log []record.Record) {
	t.Helper()
	for i, got := range logs {
		if len(got) != len(log) {
			t.Fatalf("log reader %d read %d records, want %d", i, len(got), len(log))
		}
		for j := range got {
			if !sameImmutable(&got[j], &log[j]) {
				t.Fatalf("log reader %d: %s, want %s", i, show(&got[j]), show(&log[j]))
			}
			if m := got[j].RolledBackBy; m != nil && !ptrEqual(m, log[j].RolledBackBy) {
				t.Fatalf("log reader %d: %s, finally %s", i, show(&got[j]), show(&log[j]))
			}
		}
	}
}

// checkSnapshotReads checks each snapshot read against the log as it was
// at its head.
func checkSnapshotReads(t *testing.T, snaps [][]snapshotRead, w *writer) {
	t.Helper()
	n := 0
	for i, reads := range snaps {
		for _, r := range reads {
			// A record rolled back after the snapshot was read may carry
			// its mark now: a snapshot's records are otherwise stable.
			want := w.current(r.at)
			if len(r.recs) != len(want) {
				t.Fatalf("snapshot reader %d at %d: %d records, want %d", i, r.at, len(r.recs), len(want))
			}
			for j := range want {
				got := &r.recs[j]
				if !sameImmutable(got, &want[j]) || (got.RolledBackBy != nil && !ptrEqual(got.RolledBackBy, want[j].RolledBackBy)) {
					t.Fatalf("snapshot reader %d at %d: %s, want %s", i, r.at, show(got), show(&want[j]))
				}
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no snapshot was read while the writer ran")
	}
}
