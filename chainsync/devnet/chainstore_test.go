package devnet

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/waitfor"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// testBlock makes a block whose raw bytes are the CBOR array
// [blockNo, slot, fork, padding bytes] and whose hash is the SHA-256 of
// those bytes, so fakeHeader can recover the header from the bytes alone.
func testBlock(no, slot uint64, fork uint8) StoredBlock {
	raw := pd.AppendHead(nil, 4, 4)
	raw = pd.AppendHead(raw, 0, no)
	raw = pd.AppendHead(raw, 0, slot)
	raw = pd.AppendHead(raw, 0, uint64(fork))
	pad := int(no % 40)
	raw = pd.AppendHead(raw, 2, uint64(pad))
	raw = append(raw, bytes.Repeat([]byte{fork}, pad)...)
	return StoredBlock{Type: block.TypeConway, Header: chain.BlockHeader{Slot: slot, BlockNo: no, Hash: sha256.Sum256(raw)}, Raw: raw}
}

// fakeHeader decodes the header of a testBlock.
func fakeHeader(_ block.Type, raw []byte) (chain.BlockHeader, error) {
	r := raw
	next := func() (uint64, error) {
		if len(r) == 0 {
			return 0, errors.New("short block")
		}
		info := r[0] & 0x1f
		r = r[1:]
		if info < 24 {
			return uint64(info), nil
		}
		n := 1 << (info - 24)
		if info > 27 || len(r) < n {
			return 0, errors.New("bad CBOR head")
		}
		var v uint64
		for _, b := range r[:n] {
			v = v<<8 | uint64(b)
		}
		r = r[n:]
		return v, nil
	}
	if _, err := next(); err != nil {
		return chain.BlockHeader{}, err
	}
	no, err := next()
	if err != nil {
		return chain.BlockHeader{}, err
	}
	slot, err := next()
	if err != nil {
		return chain.BlockHeader{}, err
	}
	return chain.BlockHeader{Slot: slot, BlockNo: no, Hash: sha256.Sum256(raw)}, nil
}

// waitFor waits until cond holds; the test fails after 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitfor.Until(t, 20*time.Second, what, cond)
}

// returnsNil fails t unless done, the answer of a call to what, brings nil
// within 20 seconds.
func returnsNil(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not return", what)
	}
}

// socketPath returns a short socket path (Unix socket paths are limited to
// about 100 bytes) in a directory removed after the test.
func socketPath(t *testing.T) string {
	dir, err := os.MkdirTemp("", "dn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "node.sock")
}

// extend appends n linked blocks of the given fork to s and returns them.
func extend(t testing.TB, s *ChainStore, n int, fork uint8) []StoredBlock {
	t.Helper()
	var out []StoredBlock
	for range n {
		tip := s.Tip()
		no, slot := tip.BlockNo+1, tip.Point.Slot+1+tip.BlockNo%3
		if s.Len() == 0 {
			no, slot = 0, 1
		}
		b := testBlock(no, slot, fork)
		if err := s.Append(b); err != nil {
			t.Fatalf("append block %d: %v", no, err)
		}
		out = append(out, b)
	}
	return out
}

func TestChainStoreAppendRules(t *testing.T) {
	s := NewChainStore()
	if tip := s.Tip(); tip != (chain.Tip{}) {
		t.Fatalf("empty tip = %+v", tip)
	}
	if err := s.Append(testBlock(5, 100, 0)); err != nil {
		t.Fatalf("first block with any number: %v", err)
	}
	bad := []struct {
		name string
		b    StoredBlock
		want error
	}{
		{"number gap", testBlock(7, 200, 0), ErrNotLinked},
		{"same number", testBlock(5, 200, 1), ErrNotLinked},
		{"same slot", testBlock(6, 100, 0), ErrNotLinked},
		{"earlier slot", testBlock(6, 99, 0), ErrNotLinked},
		{"empty raw", StoredBlock{Header: testBlock(6, 101, 0).Header}, ErrBadBlock},
		{"zero hash", StoredBlock{Header: chain.BlockHeader{Slot: 101, BlockNo: 6}, Raw: []byte{0x80}}, ErrBadBlock},
		{"type too large", StoredBlock{Type: 256, Header: testBlock(6, 101, 0).Header, Raw: []byte{0x80}}, ErrBadBlock},
	}
	for _, c := range bad {
		if err := s.Append(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	b := testBlock(6, 101, 0)
	if err := s.Append(b); err != nil {
		t.Fatal(err)
	}
	want := chain.Tip{Point: b.Header.Point(), BlockNo: 6}
	if tip := s.Tip(); tip != want || s.Len() != 2 {
		t.Fatalf("tip %+v len %d, want %+v len 2", tip, s.Len(), want)
	}
	b.Raw[0] = 0xff // the store copied the bytes
	if got, _ := s.Block(1); got.Raw[0] != 0x84 {
		t.Fatal("store shares the caller's raw bytes")
	}
}

func TestChainStoreAppendUnlinked(t *testing.T) {
	s := NewChainStore()
	for _, b := range []StoredBlock{testBlock(10, 100, 0), testBlock(20, 300, 0), testBlock(20, 300, 1), testBlock(21, 301, 0)} {
		if err := s.AppendUnlinked(b); err != nil {
			t.Fatalf("append %d/%d: %v", b.Header.BlockNo, b.Header.Slot, err)
		}
	}
	for _, b := range []StoredBlock{testBlock(20, 400, 2), testBlock(30, 300, 2), testBlock(21, 301, 0)} {
		if err := s.AppendUnlinked(b); !errors.Is(err, ErrOutOfOrder) {
			t.Errorf("append %d/%d: err = %v, want ErrOutOfOrder", b.Header.BlockNo, b.Header.Slot, err)
		}
	}
	// Linked blocks may follow replayed ones.
	if err := s.Append(testBlock(22, 302, 0)); err != nil {
		t.Fatal(err)
	}
	if i, ok := s.Find(testBlock(20, 300, 1).Header.Point()); !ok || i != 2 {
		t.Fatalf("find second block of slot 300 = %d %v", i, ok)
	}
}

func TestChainStoreFindAndIntersect(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 30, 0)
	for i, b := range blocks {
		got, ok := s.Find(b.Header.Point())
		if !ok || got != i {
			t.Fatalf("find block %d = %d %v", i, got, ok)
		}
		sb, _ := s.Block(i)
		if !bytes.Equal(sb.Raw, b.Raw) || sb.Header != b.Header || sb.Type != b.Type {
			t.Fatalf("block %d differs", i)
		}
	}
	unknown := testBlock(3, 5, 9).Header.Point()
	if _, ok := s.Find(unknown); ok {
		t.Fatal("found an unknown point")
	}
	if _, ok := s.Find(chain.Origin); ok {
		t.Fatal("origin is not a block")
	}
	p, tip, ok := s.Intersect([]chain.Point{unknown, blocks[20].Header.Point(), blocks[10].Header.Point()})
	if !ok || p != blocks[20].Header.Point() || tip.BlockNo != 29 {
		t.Fatalf("intersect = %s %+v %v", p, tip, ok)
	}
	if p, _, ok := s.Intersect([]chain.Point{unknown, chain.Origin}); !ok || !p.IsOrigin() {
		t.Fatalf("intersect origin = %s %v", p, ok)
	}
	if _, _, ok := s.Intersect([]chain.Point{unknown}); ok {
		t.Fatal("intersect unknown succeeded")
	}
	if got := len(s.Headers()); got != 30 {
		t.Fatalf("headers %d", got)
	}
}

func TestChainStoreRollBack(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 20, 0)
	held := make([][]byte, len(blocks))
	for i := range blocks {
		b, _ := s.Block(i)
		held[i] = b.Raw
	}
	if err := s.RollBack(testBlock(3, 5, 9).Header.Point()); !errors.Is(err, ErrPointNotOnChain) {
		t.Fatalf("roll back to unknown point: %v", err)
	}
	if err := s.RollBack(blocks[19].Header.Point()); err != nil || s.Len() != 20 {
		t.Fatalf("roll back to tip: %v, len %d", err, s.Len())
	}
	if err := s.RollBack(blocks[9].Header.Point()); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 10 || s.Tip().Point != blocks[9].Header.Point() {
		t.Fatalf("after rollback len %d tip %s", s.Len(), s.Tip().Point)
	}
	if _, ok := s.Find(blocks[15].Header.Point()); ok {
		t.Fatal("dropped block still found")
	}
	extend(t, s, 15, 1)
	// Bytes handed out before the rollback were not overwritten.
	for i, b := range blocks {
		if !bytes.Equal(held[i], b.Raw) {
			t.Fatalf("raw bytes of block %d changed after rollback", i)
		}
	}
	var size int64
	for i := range s.Len() {
		b, _ := s.Block(i)
		size += int64(len(b.Raw))
	}
	if s.RawSize() != size {
		t.Fatalf("raw size %d, want %d", s.RawSize(), size)
	}
	p, err := s.RollBackN(3)
	if err != nil || s.Len() != 22 || p != s.Tip().Point {
		t.Fatalf("roll back 3: %s %v len %d", p, err, s.Len())
	}
	if _, err := s.RollBackN(-1); err == nil {
		t.Fatal("negative depth accepted")
	}
	if p, err := s.RollBackN(100); err != nil || !p.IsOrigin() || s.Len() != 0 || s.RawSize() != 0 {
		t.Fatalf("roll back everything: %s %v len %d", p, err, s.Len())
	}
	extend(t, s, 3, 2)
	if err := s.RollBack(chain.Origin); err != nil || s.Len() != 0 {
		t.Fatalf("roll back to origin: %v len %d", err, s.Len())
	}
}

func TestChainStoreChanged(t *testing.T) {
	s := NewChainStore()
	ch := s.Changed()
	if s.Changed() != ch {
		t.Fatal("Changed gave a new channel without a change")
	}
	extend(t, s, 1, 0)
	select {
	case <-ch:
	default:
		t.Fatal("append did not close the channel")
	}
	ch = s.Changed()
	if _, err := s.RollBackN(1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("rollback did not close the channel")
	}
}

// drain applies a cursor's steps to view until the cursor is at the tip.
func drain(t *testing.T, c *Cursor, view []chain.BlockHeader) ([]chain.BlockHeader, []Step, <-chan struct{}) {
	t.Helper()
	var steps []Step
	for {
		st, wait := c.Next()
		switch st.Kind {
		case StepAwait:
			return view, steps, wait
		case StepRollForward:
			view = append(view, st.Block.Header)
		case StepRollBackward:
			view = rollView(t, view, st.Point)
		}
		steps = append(steps, st)
	}
}

func rollView(t *testing.T, view []chain.BlockHeader, p chain.Point) []chain.BlockHeader {
	if p.IsOrigin() {
		return view[:0]
	}
	for i := len(view) - 1; i >= 0; i-- {
		if view[i].Point() == p {
			return view[:i+1]
		}
	}
	t.Errorf("roll back to %s, which the reader never had", p)
	return view
}

func TestCursorSteps(t *testing.T) {
	s := NewChainStore()
	blocks := extend(t, s, 10, 0)
	c := s.NewCursor()
	defer c.Close()
	view, steps, wait := drain(t, c, nil)
	if len(steps) != 10 || steps[0].Kind != StepRollForward || len(view) != 10 {
		t.Fatalf("fresh cursor: %d steps, first %s", len(steps), steps[0].Kind)
	}
	select {
	case <-wait:
		t.Fatal("wait channel closed without a change")
	default:
	}
	// Rollback below the cursor: roll backward to the fork point first.
	if err := s.RollBack(blocks[6].Header.Point()); err != nil {
		t.Fatal(err)
	}
	<-wait
	if c.Pos() != blocks[6].Header.Point() {
		t.Fatalf("cursor at %s after rollback", c.Pos())
	}
	extend(t, s, 5, 1)
	view, steps, _ = drain(t, c, view)
	if steps[0].Kind != StepRollBackward || steps[0].Point != blocks[6].Header.Point() || len(steps) != 6 {
		t.Fatalf("after fork: first step %s to %s, %d steps", steps[0].Kind, steps[0].Point, len(steps))
	}
	if fmt.Sprint(view) != fmt.Sprint(s.Headers()) {
		t.Fatal("view differs from the chain")
	}
	// Intersect: a roll backward to the intersection, then the blocks after it.
	p, tip, ok := c.Intersect([]chain.Point{testBlock(1, 1, 9).Header.Point(), blocks[2].Header.Point()})
	if !ok || p != blocks[2].Header.Point() || tip != s.Tip() {
		t.Fatalf("intersect %s %v", p, ok)
	}
	view, steps, _ = drain(t, c, view)
	if steps[0].Kind != StepRollBackward || steps[0].Point != p || len(steps) != 1+s.Len()-3 {
		t.Fatalf("after intersect: first %s to %s, %d steps", steps[0].Kind, steps[0].Point, len(steps))
	}
	if fmt.Sprint(view) != fmt.Sprint(s.Headers()) {
		t.Fatal("view differs from the chain")
	}
	// A rollback above the cursor's position does not concern it.
	c2 := s.NewCursor()
	defer c2.Close()
	c2.Intersect([]chain.Point{blocks[1].Header.Point()})
	if _, err := s.RollBackN(2); err != nil {
		t.Fatal(err)
	}
	_, steps, _ = drain(t, c2, s.Headers()[:2])
	for _, st := range steps[1:] {
		if st.Kind != StepRollForward {
			t.Fatalf("unexpected %s", st.Kind)
		}
	}
	if StepAwait.String() != "await" || StepKind(9).String() != "unknown" {
		t.Fatal("step kind names")
	}
}

// TestCursorConcurrent has readers follow a chain that grows and forks
// under them; each reader's view must end equal to the chain.
func TestCursorConcurrent(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 5, 0)
	const readers = 4
	done := make(chan struct{})
	views := make([][]chain.BlockHeader, readers)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := s.NewCursor()
			defer c.Close()
			var view []chain.BlockHeader
			for {
				st, wait := c.Next()
				switch st.Kind {
				case StepRollForward:
					view = append(view, st.Block.Header)
					if len(st.Block.Raw) == 0 {
						t.Error("empty raw")
					}
					continue
				case StepRollBackward:
					view = rollView(t, view, st.Point)
					continue
				}
				select {
				case <-wait:
				case <-done:
					views[r] = view
					return
				}
			}
		}()
	}
	for i := range 200 {
		extend(t, s, 1+i%3, uint8(i))
		if i%7 == 0 {
			if _, err := s.RollBackN(1 + i%4); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Let every reader reach the tip before stopping them.
	waitFor(t, "the readers at the tip", func() bool {
		s.mu.Lock() // excludes Next, which changes cursors under the read lock
		defer s.mu.Unlock()
		all := len(s.cursors) == readers
		for c := range s.cursors {
			all = all && c.pos == len(s.headers) && !c.rollBack
		}
		return all
	})
	close(done)
	wg.Wait()
	want := fmt.Sprint(s.Headers())
	for r, v := range views {
		if fmt.Sprint(v) != want {
			t.Errorf("reader %d: view of %d blocks differs from the chain of %d", r, len(v), s.Len())
		}
	}
}

// TestChainStoreMillionBlocks checks that a chain of a million small blocks
// fits in little memory and stays fast to search.
func TestChainStoreMillionBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const n = 1_000_000
	raw := make([]byte, 24)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewChainStore()
	var h chain.Hash32
	for i := range uint64(n) {
		h[0], h[1], h[2], h[3] = byte(i), byte(i>>8), byte(i>>16), 1
		raw[0], raw[1] = 0x58, 22 // a 22-byte CBOR byte string
		if err := s.Append(StoredBlock{Type: block.TypeConway, Header: chain.BlockHeader{Slot: 2 * i, BlockNo: i, Hash: h}, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d blocks: heap grew %d MB, %d raw bytes", n, grew>>20, s.RawSize())
	if grew > 200<<20 {
		t.Errorf("a million small blocks take %d MB", grew>>20)
	}
	const k = 777_777
	h[0], h[1], h[2] = k&0xff, k>>8&0xff, k>>16
	if i, ok := s.Find(chain.Point{Slot: 2 * k, Hash: h}); !ok || i != k {
		t.Fatalf("find = %d %v", i, ok)
	}
}

func BenchmarkChainStoreAppend(b *testing.B) {
	s := NewChainStore()
	raw := bytes.Repeat([]byte{0x40}, 1)
	var h chain.Hash32
	h[31] = 1
	for i := range uint64(b.N) {
		h[0], h[1], h[2], h[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		if err := s.Append(StoredBlock{Header: chain.BlockHeader{Slot: i + 1, BlockNo: i, Hash: h}, Raw: raw}); err != nil {
			b.Fatal(err)
		}
	}
}
