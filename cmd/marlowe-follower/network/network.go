// Package network names the networks marlowe-follower follows and
// resolves their slot clocks from the settings.
package network

import (
	"fmt"
	"time"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

// NodeSlotConfig returns the slot configuration of the configured network:
// the built-in one of mainnet, preprod, preview and the devnet (42), or
// for any network the one node.systemStart and node.slotLength, or
// node.shelleyGenesis, give (the devnet's may be replaced so too). The
// public networks' clocks cannot be replaced: their Byron epochs make
// slot 0's time the wrong origin.
func NodeSlotConfig(n *config.Node) (chain.SlotConfig, error) {
	return Slots(Settings{Magic: n.NetworkMagic, SystemStart: n.SystemStart, SlotLength: n.SlotLength, Genesis: n.Genesis},
		"node.networkMagic", "node.systemStart", "node.slotLength", "node.shelleyGenesis")
}

// Settings say which network and slot clock: a magic and, for a
// network without a built-in clock, a system start (RFC 3339) and a slot
// length, or a Shelley genesis file.
type Settings struct {
	Magic       uint32
	SystemStart string
	SlotLength  time.Duration
	Genesis     string
}

// Slots resolves network settings into a slot configuration; the
// names are those of the settings (flags or configuration keys), for the
// errors.
func Slots(s Settings, magicName, startName, lengthName, genesisName string) (chain.SlotConfig, error) {
	custom := s.SystemStart != "" || s.SlotLength != 0
	switch s.Magic {
	case chainsync.MagicMainnet, chainsync.MagicPreprod, chainsync.MagicPreview:
		if custom || s.Genesis != "" {
			return chain.SlotConfig{}, fmt.Errorf("%s %d is %s, whose slot clock is built in: %s, %s and %s are for other networks",
				magicName, s.Magic, Name(s.Magic), startName, lengthName, genesisName)
		}
		return chain.SlotConfigFor(s.Magic)
	}
	switch {
	case s.Genesis != "" && custom:
		return chain.SlotConfig{}, fmt.Errorf("%s or %s and %s, not both", genesisName, startName, lengthName)
	case s.Genesis != "":
		g, err := chain.ReadShelleyGenesis(s.Genesis)
		if err != nil {
			return chain.SlotConfig{}, fmt.Errorf("%s: %w", genesisName, err)
		}
		if g.NetworkMagic != s.Magic {
			return chain.SlotConfig{}, fmt.Errorf("%s: the genesis is of network magic %d, %s is %d", genesisName, g.NetworkMagic, magicName, s.Magic)
		}
		sc, err := g.Slots()
		if err != nil {
			return sc, fmt.Errorf("%s: %w", genesisName, err)
		}
		return sc, nil
	case custom:
		if s.SystemStart == "" || s.SlotLength == 0 {
			return chain.SlotConfig{}, fmt.Errorf("%s and %s go together", startName, lengthName)
		}
		start, err := time.Parse(time.RFC3339, s.SystemStart)
		if err != nil {
			return chain.SlotConfig{}, fmt.Errorf("%s %q: want an RFC 3339 time like 2025-01-01T00:00:00Z", startName, s.SystemStart)
		}
		sc, err := chain.SlotConfigFrom(start, s.SlotLength)
		if err != nil {
			return sc, fmt.Errorf("%s: %w", lengthName, err)
		}
		return sc, nil
	case s.Magic == devnet.NetworkMagic:
		return SlotConfig(s.Magic)
	}
	return chain.SlotConfig{}, fmt.Errorf("%s %d has no built-in slot clock (mainnet 764824073, preprod 1, preview 2, devnet 42): give %s and %s, or %s",
		magicName, s.Magic, startName, lengthName, genesisName)
}

// Name names a network magic.
func Name(magic uint32) string {
	switch magic {
	case chainsync.MagicMainnet:
		return "mainnet"
	case chainsync.MagicPreprod:
		return "preprod"
	case chainsync.MagicPreview:
		return "preview"
	case devnet.NetworkMagic:
		return "devnet"
	}
	return fmt.Sprint(magic)
}

// SlotConfig returns the slot configuration of the configured network.
func SlotConfig(magic uint32) (chain.SlotConfig, error) {
	if magic == devnet.NetworkMagic {
		return chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}, nil
	}
	sc, err := chain.SlotConfigFor(magic)
	if err != nil {
		return sc, fmt.Errorf("node.networkMagic: %w (mainnet 764824073, preprod 1, preview 2, devnet 42)", err)
	}
	return sc, nil
}
