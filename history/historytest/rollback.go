package historytest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/marlowe-follower/follower/history/record"
)

// testRollback is the suite's main job: apply blocks, roll back, apply a
// fork, and check the log, the snapshots at every commit, the checkpoint,
// and a second backend that only ever saw the surviving blocks.
func (s *suite) testRollback(t *testing.T) {
	for _, c := range []struct {
		name   string
		seed   uint64
		script []int // (writer.play)
	}{
		// Six commits of ten blocks, a rollback across the last two, and
		// the fork in the same batch as the rollback.
		{"fork", 21, []int{10, 0, 10, 0, 10, 0, 10, 0, 10, 0, 10, 0, -15, 40, 0}},
		// The second rollback deeper than the first: below the batch's
		// first block.
		{"within one batch", 22, []int{10, 0, 10, -3, 4, -6, 2, -1, 0}},
		{"deeper rollback after a shallow one", 23, []int{20, 0, -2, 0, 3, 0, -8, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWriter(t, s.backend(t), c.seed, 0)
			w.play(c.script...)
			s.checkAgainstModel(t, w)
			s.checkAgainstFresh(t, w)
		})
	}
	for _, seed := range []uint64{31, 32, 33} {
		t.Run(fmt.Sprintf("random %d", seed), func(t *testing.T) {
			w := newWriter(t, s.backend(t), seed, 0)
			w.walk(rand.New(rand.NewPCG(seed, 7)), 160, 5, func() {})
			w.flush()
			s.checkAgainstModel(t, w)
			s.checkAgainstFresh(t, w)
		})
	}
}

// checkAgainstModel compares the backend with the writer's model: the whole
// log (rollback marks included), the snapshots at committed heads (ten of
// them at most, spread over the log), what a rollback marks, and the
// checkpoint.
func (s *suite) checkAgainstModel(t *testing.T, w *writer) {
	t.Helper()
	b := w.b
	log := readAll(t, b, record.RecordListParams{}, 1000)
	checkRecords(t, "log", log, w.log)
	rolledBack := 0
	for _, r := range log {
		if r.RolledBackBy == nil {
			continue
		}
		rolledBack++
		m := *r.RolledBackBy
		if r.Kind == record.KindRolledBack {
			t.Fatalf("marker %s is marked rolled back", show(&r))
		}
		if m <= r.Seq || log[m-1].Kind != record.KindRolledBack || log[m-1].Block.Slot >= r.Block.Slot {
			t.Fatalf("record %s rolled back by %s", show(&r), show(&log[m-1]))
		}
	}
	if rolledBack == 0 {
		t.Fatalf("the scenario rolled nothing back")
	}
	step := max(1, len(w.heads)/10)
	for i := len(w.heads) - 1; i >= 0; i -= step {
		h := w.heads[i]
		checkRecords(t, fmt.Sprintf("snapshot at %d", h),
			readAll(t, b, record.RecordListParams{Mode: record.ModeSnapshot, Snapshot: h}, 1000), w.current(h))
	}
	// A snapshot between commits, read from a cursor inside it.
	mid := w.head / 2
	cur := w.current(mid)
	checkRecords(t, fmt.Sprintf("snapshot at %d after %d", mid, cur[len(cur)/2].Seq),
		readAll(t, b, record.RecordListParams{Mode: record.ModeSnapshot, Snapshot: mid, After: cur[len(cur)/2].Seq}, 10),
		cur[len(cur)/2+1:])
	checkCheckpoint(t, b, w.checkpoint())
}

// checkAgainstFresh feeds a new backend the surviving blocks only and
// compares what is current: the same records (modulo seq) unfiltered and
// under every filter the rolled-back blocks cannot have changed, the same
// UTxO set and undo log.
func (s *suite) checkAgainstFresh(t *testing.T, w *writer) {
	t.Helper()
	fresh := w.replay(t, s.backend(t), 7)
	if !slices.ContainsFunc(fresh.log, func(r record.Record) bool { return r.Kind == record.KindContractCreated }) {
		t.Fatalf("the surviving chain has no contract")
	}
	filters := modelFilters(w)
	for i, f := range filters {
		if slices.ContainsFunc(f.PartyAddress, func(a string) bool { return a >= address(100) }) {
			// Party additions of rolled-back steps stay in the index.
			continue
		}
		got := readAll(t, w.b, record.RecordListParams{Filter: f, Mode: record.ModeSnapshot, Snapshot: w.head}, 1000)
		want := readAll(t, fresh.b, record.RecordListParams{Filter: f, Mode: record.ModeSnapshot, Snapshot: fresh.head}, 1000)
		if len(got) != len(want) {
			t.Fatalf("filter %d %+v: %d current records, %d in the fresh backend", i, f, len(got), len(want))
		}
		for j := range got {
			if !sameContent(&got[j], &want[j]) {
				t.Fatalf("filter %d %+v: current record %d: %s, fresh backend %s", i, f, j, show(&got[j]), show(&want[j]))
			}
		}
	}
	want := fresh.checkpoint()
	want.Head, want.Tip = w.head, w.tip
	checkCheckpoint(t, w.b, want)
}
