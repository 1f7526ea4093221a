package devnet

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blinklabs-io/gouroboros/protocol/chainsync"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// chainFileConfig is a small chain with frequent rollbacks.
func chainFileConfig() GeneratorConfig {
	cfg := DefaultGeneratorConfig()
	cfg.Seed, cfg.MarloweShare, cfg.MeanBlockSize, cfg.RollbackEvery, cfg.MaxRollbackDepth = 7, 0.5, 800, 10, 3
	return cfg
}

// startFileDevnet starts a pregenerated devnet of blocks on a chain file.
func startFileDevnet(t *testing.T, file string, cfg GeneratorConfig, blocks uint64, journal bool, prefix int) *Devnet {
	t.Helper()
	dn, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), Generator: cfg, Blocks: blocks,
		Pregenerate: prefix == 0, Journal: journal, ChainFile: file, PrefixBlocks: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dn.Close() })
	return dn
}

// changes returns every change a generator makes until its tip reaches blocks.
func changes(t *testing.T, cfg GeneratorConfig, blocks uint64) ([]Op, *Generator) {
	t.Helper()
	g, err := NewGenerator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ops []Op
	for g.Tip().BlockNo < blocks {
		op, err := g.Next()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops, g
}

func journalOps(j *Journal) []Op {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Op, len(j.ops))
	for i, op := range j.ops {
		out[i] = Op{Block: op.block, Rollback: op.rollback}
	}
	return out
}

func sameOps(a, b []Op) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameOp(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestChainFileRestart: a devnet stopped and started again on its chain
// file serves the same chain and journal and goes on exactly as one run
// without the stop: same blocks, same rollbacks, same activity.
func TestChainFileRestart(t *testing.T) {
	cfg := chainFileConfig()
	file := filepath.Join(t.TempDir(), "devnet.chain")
	want, g := changes(t, cfg, 400)

	a := startFileDevnet(t, file, cfg, 150, true, 0)
	first := journalOps(a.journal)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Not pregenerated: the stored chain is served at once, the generator
	// catches up with it in the background before it goes on.
	b, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), Generator: cfg, Blocks: 280, Journal: true, ChainFile: file})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if got := journalOps(b.journal); len(got) < len(first) || !sameOps(got[:len(first)], first) {
		t.Fatal("the restarted devnet does not serve the first run's journal at once")
	}
	<-b.Done()
	if err := b.Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := startFileDevnet(t, file, cfg, 400, true, 0)
	got := journalOps(c.journal)
	if !sameOps(got, want) {
		t.Fatalf("after two restarts: %d changes, one run %d (or they differ)", len(got), len(want))
	}
	if c.Store().Tip() != chainTip(g) {
		t.Fatalf("tip %+v, one run %+v", c.Store().Tip(), chainTip(g))
	}
	// The activity is the same as one run's, so no transaction is made twice.
	ga, ca := g.Activity(), c.Activity()
	ids := map[chain.Hash32]bool{}
	for i := range ga {
		if ca[i].TxID != ga[i].TxID {
			t.Fatalf("activity %d: tx %s, one run %s", i, ca[i].TxID, ga[i].TxID)
		}
		if ids[ga[i].TxID] {
			t.Fatalf("tx %s twice", ga[i].TxID)
		}
		ids[ga[i].TxID] = true
	}
	rolls := 0
	for _, op := range want {
		if op.Rollback != nil {
			rolls++
		}
	}
	t.Logf("%d changes (%d rollbacks), %d activities, identical across two restarts", len(want), rolls, len(ga))
}

// TestChainFileTornTail: a record cut short by a crash is dropped, and the
// devnet makes it again.
func TestChainFileTornTail(t *testing.T) {
	cfg := chainFileConfig()
	file := filepath.Join(t.TempDir(), "devnet.chain")
	a := startFileDevnet(t, file, cfg, 100, false, 0)
	tip := a.Store().Tip()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()-7); err != nil {
		t.Fatal(err)
	}
	b := startFileDevnet(t, file, cfg, 100, false, 0)
	if b.Store().Tip() != tip {
		t.Fatalf("tip %+v after a torn record, want %+v", b.Store().Tip(), tip)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(file)
	if fi2.Size() != fi.Size() {
		t.Fatalf("file of %d bytes, %d before the tear", fi2.Size(), fi.Size())
	}
}

// TestChainFileOtherSettings: a chain file made with other settings is
// refused, naming them.
func TestChainFileOtherSettings(t *testing.T) {
	cfg := chainFileConfig()
	file := filepath.Join(t.TempDir(), "devnet.chain")
	a := startFileDevnet(t, file, cfg, 20, false, 0)
	_ = a.Close()
	other := cfg
	other.Seed = 8
	_, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), Generator: other, ChainFile: file})
	if !errors.Is(err, ErrChainFile) || !strings.Contains(err.Error(), "seed 7") || !strings.Contains(err.Error(), "seed 8") {
		t.Fatalf("other seed: %v", err)
	}
	_, err = Start(context.Background(), RunConfig{SocketPath: socketPath(t), NetworkMagic: 4242, Generator: cfg, ChainFile: file})
	if !errors.Is(err, ErrChainFile) || !strings.Contains(err.Error(), "network magic 42,") {
		t.Fatalf("other magic: %v", err)
	}
	if err := os.WriteFile(file, []byte("something else\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), Generator: cfg, ChainFile: file}); !errors.Is(err, ErrChainFile) {
		t.Fatalf("not a chain file: %v", err)
	}
}

// TestChainFileOtherGenerator: a chain the generator does not make (as
// from another version of the devnet) is served as stored, and new blocks
// follow it.
func TestChainFileOtherGenerator(t *testing.T) {
	cfg := chainFileConfig()
	file := filepath.Join(t.TempDir(), "devnet.chain")
	// Seed 9's chain, described as seed 7's.
	f, _, err := OpenChainFile(file, ChainMeta{NetworkMagic: NetworkMagic, Generator: mustValid(t, cfg)})
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Seed = 9
	ops, g := changes(t, other, 60)
	for _, op := range ops {
		if err := f.Record(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dn := startFileDevnet(t, file, cfg, 120, false, 0)
	s := dn.Store()
	if s.Tip().BlockNo != 120 {
		t.Fatalf("tip %+v", s.Tip())
	}
	ref := NewChainStore()
	for _, op := range ops {
		if err := applyOp(ref, op, true); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ref.Len() {
		b, _ := s.Block(i)
		if want, _ := ref.Block(i); b.Header != want.Header {
			t.Fatalf("block %d is not the stored one", i+1)
		}
	}
	ids := map[chain.Hash32]bool{}
	for _, a := range append(g.Activity(), dn.Activity()...) {
		if ids[a.TxID] {
			t.Fatalf("tx %s twice", a.TxID)
		}
		ids[a.TxID] = true
	}
	if len(dn.Activity()) == 0 {
		t.Fatal("nothing generated after the stored chain")
	}
}

func mustValid(t *testing.T, cfg GeneratorConfig) GeneratorConfig {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPrefixThenReveal: a devnet restarted with PrefixBlocks serves the
// first blocks of its stored chain only, so a client that has more finds
// no intersection; Reveal shows the rest, a few blocks at a time, and the
// generator then goes on.
func TestPrefixThenReveal(t *testing.T) {
	cfg := chainFileConfig()
	cfg.RollbackEvery = 0
	file := filepath.Join(t.TempDir(), "devnet.chain")
	a := startFileDevnet(t, file, cfg, 80, false, 0)
	first := a.Store()
	full := first.Headers()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	b := startFileDevnet(t, file, cfg, 100, false, 50)
	s := b.Store()
	if s.Tip().BlockNo != 50 || b.Hidden() != 30 {
		t.Fatalf("prefix: tip %d, %d hidden", s.Tip().BlockNo, b.Hidden())
	}
	c := newClientReading(t, b.Node().SocketPath(), first, 80, 0, headerOf) // it has the 80 blocks
	if err := c.sync(full[79].Point(), full[60].Point()); !errors.Is(err, chainsync.ErrIntersectNotFound) {
		t.Fatalf("a client ahead of the prefix: %v", err)
	}
	if hidden, err := b.Reveal(15); err != nil || hidden != 15 || s.Tip().BlockNo != 65 {
		t.Fatalf("reveal 15: %d hidden, tip %d, %v", hidden, s.Tip().BlockNo, err)
	}
	if err := c.sync(full[79].Point(), full[60].Point()); err != nil {
		t.Fatalf("after revealing block 61: %v", err)
	}
	if hidden, err := b.Reveal(0); err != nil || hidden != 0 {
		t.Fatalf("reveal all: %d hidden, %v", hidden, err)
	}
	<-b.Done()
	if s.Tip().BlockNo != 100 {
		t.Fatalf("tip %d after the generator went on", s.Tip().BlockNo)
	}
	for i, h := range full {
		if b, _ := s.Block(i); b.Header != h {
			t.Fatalf("block %d differs", i+1)
		}
	}
	waitFor(t, "the client at the tip", func() bool { return c.synced(s) })
}

// TestReplayPrefix: a replay served a prefix at a time, in both serving
// modes, with the network magic of the blocks' network.
func TestReplayPrefix(t *testing.T) {
	var text strings.Builder
	for _, era := range []string{"byron", "shelley", "allegra", "mary", "alonzo", "babbage", "conway"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", era+"_block.hex"))
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(strings.TrimSpace(string(data)) + "\n")
	}
	file := filepath.Join(t.TempDir(), "mainnet.replay")
	if err := os.WriteFile(file, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, journal := range []bool{false, true} {
		dn, err := Start(context.Background(), RunConfig{SocketPath: socketPath(t), NetworkMagic: MagicMainnet, Replay: file,
			Journal: journal, PrefixBlocks: 3})
		if err != nil {
			t.Fatal(err)
		}
		if dn.Store().Len() != 3 || dn.Hidden() != 4 {
			t.Fatalf("journal %v: %d blocks served, %d hidden", journal, dn.Store().Len(), dn.Hidden())
		}
		if hidden, err := dn.Reveal(0); err != nil || hidden != 0 || dn.Store().Tip().BlockNo != 12069665 {
			t.Fatalf("journal %v: reveal: %d hidden, tip %+v, %v", journal, hidden, dn.Store().Tip(), err)
		}
		if err := dn.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
