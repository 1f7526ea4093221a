package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// SlotConfig is a network's slot clock, for its Shelley-based eras, whose
// slots are of fixed length: slot ZeroSlot begins at ZeroTimeMillis (POSIX
// milliseconds) and every slot lasts SlotLengthMillis. Marlowe exists only
// from Alonzo on, so earlier eras' slot lengths do not matter. The follower
// turns validity intervals into POSIX time with it, and the devnet makes
// its chains with it.
type SlotConfig struct {
	ZeroSlot         uint64
	ZeroTimeMillis   int64
	SlotLengthMillis int64
}

// The public networks' clocks.
var (
	// MainnetSlots: the first Shelley slot, 4,492,800, began 2020-07-29T21:44:51Z.
	MainnetSlots = SlotConfig{ZeroSlot: 4492800, ZeroTimeMillis: 1596059091000, SlotLengthMillis: 1000}
	// PreprodSlots: the first Shelley slot, 86,400, began 2022-06-21T00:00:00Z.
	PreprodSlots = SlotConfig{ZeroSlot: 86400, ZeroTimeMillis: 1655769600000, SlotLengthMillis: 1000}
	// PreviewSlots: slot 0 began 2022-10-25T00:00:00Z.
	PreviewSlots = SlotConfig{ZeroSlot: 0, ZeroTimeMillis: 1666656000000, SlotLengthMillis: 1000}
)

// ErrNoSlotConfig is returned by SlotConfigFor for a network magic without
// a built-in clock.
var ErrNoSlotConfig = errors.New("no built-in slot configuration")

// SlotConfigFor returns the clock of a public network: mainnet
// (764824073), preprod (1) or preview (2).
func SlotConfigFor(magic uint32) (SlotConfig, error) {
	switch magic {
	case 764824073:
		return MainnetSlots, nil
	case 1:
		return PreprodSlots, nil
	case 2:
		return PreviewSlots, nil
	}
	return SlotConfig{}, fmt.Errorf("network magic %d: %w", magic, ErrNoSlotConfig)
}

// SlotConfigFrom is the clock of a network whose slots all last
// slotLength from slot 0 at systemStart: a testnet whose Shelley-based
// eras start at its first epoch, as testnets made with cardano-testnet or
// yaci-devkit do. (Preprod and mainnet began with Byron epochs of 20 s
// slots; use their built-in configurations.)
func SlotConfigFrom(systemStart time.Time, slotLength time.Duration) (SlotConfig, error) {
	if slotLength < time.Millisecond || slotLength%time.Millisecond != 0 {
		return SlotConfig{}, fmt.Errorf("slot length %s: want a whole number of milliseconds, at least 1ms", slotLength)
	}
	if systemStart.IsZero() {
		return SlotConfig{}, errors.New("no system start")
	}
	return SlotConfig{ZeroSlot: 0, ZeroTimeMillis: systemStart.UnixMilli(), SlotLengthMillis: slotLength.Milliseconds()}, nil
}

// IsZero reports whether c is the zero value (no clock given).
func (c SlotConfig) IsZero() bool { return c == SlotConfig{} }

// Validate checks that slots have a positive length.
func (c SlotConfig) Validate() error {
	if c.SlotLengthMillis <= 0 {
		return fmt.Errorf("slot length %d ms: want at least 1 ms", c.SlotLengthMillis)
	}
	return nil
}

// SlotStart returns the POSIX time (ms) at which a slot begins.
func (c SlotConfig) SlotStart(slot uint64) int64 {
	if slot >= c.ZeroSlot {
		return c.ZeroTimeMillis + int64(slot-c.ZeroSlot)*c.SlotLengthMillis
	}
	return c.ZeroTimeMillis - int64(c.ZeroSlot-slot)*c.SlotLengthMillis
}

// SlotAt returns the slot in which the POSIX time ms falls; times before
// slot 0 give slot 0.
func (c SlotConfig) SlotAt(ms int64) uint64 {
	zero := c.SlotStart(0)
	if ms <= zero {
		return 0
	}
	return uint64((ms - zero) / c.SlotLengthMillis)
}

// ShelleyGenesis is what a Shelley genesis file says about a network's
// identity and clock.
type ShelleyGenesis struct {
	NetworkMagic uint32
	SystemStart  time.Time
	SlotLength   time.Duration
}

// Slots is the genesis's slot configuration (see SlotConfigFrom).
func (g ShelleyGenesis) Slots() (SlotConfig, error) {
	return SlotConfigFrom(g.SystemStart, g.SlotLength)
}

// ReadShelleyGenesis reads networkMagic, systemStart (RFC 3339) and
// slotLength (seconds, possibly fractional) from a Shelley genesis file.
func ReadShelleyGenesis(path string) (ShelleyGenesis, error) {
	f, err := os.Open(path)
	if err != nil {
		return ShelleyGenesis{}, err
	}
	defer func() { _ = f.Close() }()
	g, err := ParseShelleyGenesis(f)
	if err != nil {
		return g, fmt.Errorf("shelley genesis %s: %w", path, err)
	}
	return g, nil
}

// ParseShelleyGenesis is ReadShelleyGenesis on a reader.
func ParseShelleyGenesis(r io.Reader) (ShelleyGenesis, error) {
	var raw struct {
		NetworkMagic *uint32     `json:"networkMagic"`
		SystemStart  *time.Time  `json:"systemStart"`
		SlotLength   json.Number `json:"slotLength"`
	}
	if err := json.NewDecoder(r).Decode(&raw); err != nil {
		return ShelleyGenesis{}, err
	}
	if raw.NetworkMagic == nil || raw.SystemStart == nil || raw.SlotLength == "" {
		return ShelleyGenesis{}, errors.New("networkMagic, systemStart and slotLength are required")
	}
	secs, err := raw.SlotLength.Float64()
	if err != nil || secs <= 0 || secs > 3600 {
		return ShelleyGenesis{}, fmt.Errorf("slotLength %s: want seconds", raw.SlotLength)
	}
	ms := secs * 1000
	if ms != math.Round(ms) {
		return ShelleyGenesis{}, fmt.Errorf("slotLength %s: not a whole number of milliseconds", raw.SlotLength)
	}
	return ShelleyGenesis{NetworkMagic: *raw.NetworkMagic, SystemStart: raw.SystemStart.UTC(), SlotLength: time.Duration(ms) * time.Millisecond}, nil
}
