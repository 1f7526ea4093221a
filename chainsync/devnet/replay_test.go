package devnet

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

func TestReadReplayFormat(t *testing.T) {
	b1, b2, b3 := testBlock(10, 100, 0), testBlock(20, 200, 0), testBlock(21, 250, 0)
	text := fmt.Sprintf("# a replay file\n\n  %x  \n# conway\n6:%x\n  babbage : %X\n",
		b1.Raw, b2.Raw, b3.Raw)
	detect := func(raw []byte) (block.Type, error) { return block.TypeConway, nil }
	blocks, err := ReadReplay(strings.NewReader(text), ReplayOptions{Header: fakeHeader, DetectType: detect})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("%d blocks", len(blocks))
	}
	for i, want := range []StoredBlock{b1, b2, b3} {
		want.Type = []block.Type{block.TypeConway, block.TypeBabbage, block.TypeBabbage}[i]
		got := blocks[i]
		if got.Type != want.Type || got.Header != want.Header || !bytes.Equal(got.Raw, want.Raw) {
			t.Errorf("block %d = %v %+v, want %v %+v", i, got.Type, got.Header, want.Type, want.Header)
		}
	}

	bad := []struct {
		text, want string
		opts       ReplayOptions
	}{
		{fmt.Sprintf("#\n%x\n", b1.Raw), "line 2: no block type", ReplayOptions{Header: fakeHeader}},
		{"7:zz\n", "line 1: block hex", ReplayOptions{Header: fakeHeader}},
		{"7:\n", "line 1: empty block", ReplayOptions{Header: fakeHeader}},
		{fmt.Sprintf("\n\nvolta:%x", b1.Raw), `line 3: block type "volta"`, ReplayOptions{Header: fakeHeader}},
		{fmt.Sprintf("300:%x", b1.Raw), `line 1: block type "300"`, ReplayOptions{Header: fakeHeader}},
		{"7:80\n", "line 1: conway block header", ReplayOptions{Header: fakeHeader}},
		{fmt.Sprintf("%x", b1.Raw), "line 1: detect block type: no", ReplayOptions{Header: fakeHeader,
			DetectType: func([]byte) (block.Type, error) { return 0, errors.New("no") }}},
	}
	for _, c := range bad {
		_, err := ReadReplay(strings.NewReader(c.text), c.opts)
		if !errors.Is(err, ErrReplay) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.text, err, c.want)
		}
	}
	if _, err := ReadReplay(strings.NewReader(""), ReplayOptions{}); err == nil {
		t.Error("no header function accepted")
	}
	if blocks, err := ReadReplay(strings.NewReader("# nothing\n"), ReplayOptions{Header: fakeHeader}); err != nil || len(blocks) != 0 {
		t.Errorf("empty file: %d blocks, %v", len(blocks), err)
	}
}

func TestParseBlockType(t *testing.T) {
	for s, want := range map[string]block.Type{"0": block.TypeByronEBB, "byron": block.TypeByron, "Conway": block.TypeConway, "8": 8, "byron-ebb": block.TypeByronEBB} {
		if got, err := ParseBlockType(s); err != nil || got != want {
			t.Errorf("ParseBlockType(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "-1", "256", "unknown"} {
		if _, err := ParseBlockType(s); err == nil {
			t.Errorf("ParseBlockType(%q) accepted", s)
		}
	}
}

func TestWriteReplayRoundTrip(t *testing.T) {
	s := NewChainStore()
	extend(t, s, 50, 3)
	var want []StoredBlock
	for i := range s.Len() {
		b, _ := s.Block(i)
		want = append(want, b)
	}
	path := filepath.Join(t.TempDir(), "chain.replay")
	var buf bytes.Buffer
	if err := WriteReplay(&buf, want); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReplayFile(path, ReplayOptions{Header: fakeHeader})
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReplayStore(got)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(r.Headers()) != fmt.Sprint(s.Headers()) || r.RawSize() != s.RawSize() {
		t.Fatal("replayed chain differs")
	}
	if _, err := ReadReplayFile(filepath.Join(t.TempDir(), "missing"), ReplayOptions{Header: fakeHeader}); err == nil {
		t.Fatal("missing file read")
	}
	// Blocks out of order are refused, naming the block.
	_, err = NewReplayStore([]StoredBlock{want[1], want[0]})
	if !errors.Is(err, ErrReplay) || !errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), "block 2 of 2") {
		t.Fatalf("out of order: %v", err)
	}
}

// ledgerHeader reads a real block's header with gouroboros, as
// block.DecodeHeader does for the follower.
func ledgerHeader(t block.Type, raw []byte) (chain.BlockHeader, error) {
	b, err := ledger.NewBlockFromCbor(uint(t), raw)
	if err != nil {
		return chain.BlockHeader{}, err
	}
	return chain.BlockHeader{Slot: b.SlotNumber(), BlockNo: b.BlockNumber(), Hash: chain.Hash32(b.Hash())}, nil
}

// TestReplayMainnetBlocks serves the mainnet blocks of every era from a
// replay file, then generated blocks appended after them, to a gouroboros
// client that decodes every block it gets.
func TestReplayMainnetBlocks(t *testing.T) {
	eras := []struct {
		file string
		typ  block.Type
	}{
		{"byron", block.TypeByron}, {"shelley", block.TypeShelley}, {"allegra", block.TypeAllegra},
		{"mary", block.TypeMary}, {"alonzo", block.TypeAlonzo}, {"babbage", block.TypeBabbage},
		{"conway", block.TypeConway},
	}
	var text strings.Builder
	text.WriteString("# mainnet blocks, one per era\n")
	for _, e := range eras {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", e.file+"_block.hex"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, "\n# %s\n%s:%s\n", e.file, e.typ, strings.TrimSpace(string(data)))
	}
	blocks, err := ReadReplay(strings.NewReader(text.String()), ReplayOptions{Header: ledgerHeader})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewReplayStore(blocks)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 7 || s.Tip().BlockNo != 12069665 || s.Tip().Point.Slot != 159835207 {
		t.Fatalf("replayed %d blocks, tip %+v", s.Len(), s.Tip())
	}
	n, _ := startNode(t, s)
	header := func(bt block.Type, raw []byte) (chain.BlockHeader, error) {
		if bt == block.TypeConway && raw[0] == 0x84 { // a generated test block
			return fakeHeader(bt, raw)
		}
		return ledgerHeader(bt, raw)
	}
	c := newClientReading(t, n.SocketPath(), s, 0, 0, header)
	if err := c.sync(chain.Origin); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replayed blocks", func() bool { return c.synced(s) })
	c.check(s)
	// Generated blocks continue the replayed chain.
	tip := s.Tip()
	for i := range uint64(3) {
		if err := s.Append(testBlock(tip.BlockNo+1+i, tip.Point.Slot+1+i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the generated blocks", func() bool { return c.synced(s) })
	c.check(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, e := range eras {
		b, _ := s.Block(i)
		want, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", e.file+"_block.hex"))
		if hex.EncodeToString(c.raws[i]) != strings.TrimSpace(string(want)) || b.Type != e.typ {
			t.Fatalf("%s block differs", e.file)
		}
	}
}
