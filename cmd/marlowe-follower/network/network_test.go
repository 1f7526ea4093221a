package network

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

func TestNodeSlotConfig(t *testing.T) {
	genesis := filepath.Join(t.TempDir(), "shelley-genesis.json")
	if err := os.WriteFile(genesis, []byte(`{"networkMagic": 4242, "systemStart": "2024-06-01T00:00:00Z", "slotLength": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	own := chain.SlotConfig{ZeroTimeMillis: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), SlotLengthMillis: 1000}
	devnetSlots := chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}
	for _, c := range []struct {
		node config.Node
		want chain.SlotConfig
		err  string
	}{
		{config.Node{NetworkMagic: 764824073}, chain.MainnetSlots, ""},
		{config.Node{NetworkMagic: 1}, chain.PreprodSlots, ""},
		{config.Node{NetworkMagic: 2}, chain.PreviewSlots, ""},
		{config.Node{NetworkMagic: 42}, devnetSlots, ""},
		{config.Node{NetworkMagic: 4242, SystemStart: "2024-06-01T00:00:00Z", SlotLength: time.Second}, own, ""},
		{config.Node{NetworkMagic: 42, SystemStart: "2024-06-01T00:00:00Z", SlotLength: time.Second}, own, ""},
		{config.Node{NetworkMagic: 4242, Genesis: genesis}, own, ""},
		{config.Node{NetworkMagic: 4242}, chain.SlotConfig{}, "node.networkMagic 4242 has no built-in slot clock"},
		{config.Node{NetworkMagic: 1, SystemStart: "2024-06-01T00:00:00Z", SlotLength: time.Second}, chain.SlotConfig{}, "is preprod, whose slot clock is built in"},
		{config.Node{NetworkMagic: 764824073, Genesis: genesis}, chain.SlotConfig{}, "is mainnet"},
		{config.Node{NetworkMagic: 4242, SystemStart: "2024-06-01T00:00:00Z"}, chain.SlotConfig{}, "go together"},
		{config.Node{NetworkMagic: 4242, SystemStart: "June", SlotLength: time.Second}, chain.SlotConfig{}, "RFC 3339"},
		{config.Node{NetworkMagic: 4343, Genesis: genesis}, chain.SlotConfig{}, "the genesis is of network magic 4242"},
		{config.Node{NetworkMagic: 4242, Genesis: genesis, SlotLength: time.Second}, chain.SlotConfig{}, "not both"},
		{config.Node{NetworkMagic: 4242, Genesis: genesis + ".missing"}, chain.SlotConfig{}, "node.shelleyGenesis"},
	} {
		got, err := NodeSlotConfig(&c.node)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%+v: %+v %v, want %+v", c.node, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%+v: %v, want an error with %q", c.node, err, c.err)
		}
	}
}
