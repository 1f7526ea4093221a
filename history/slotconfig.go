package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/marlowe-follower/follower/history/record"
)

// SlotConfig turns slots into POSIX time for a network whose Shelley-based
// eras have slots of fixed length: slot ZeroSlot starts at ZeroTime (ms).
// Marlowe exists only from Alonzo on, so earlier eras' slot lengths do not
// matter.
type SlotConfig struct {
	ZeroSlot         uint64
	ZeroTimeMillis   int64
	SlotLengthMillis int64
}

// Well-known networks.
var (
	// MainnetSlots: the first Shelley slot, 4,492,800, began 2020-07-29T21:44:51Z.
	MainnetSlots = SlotConfig{ZeroSlot: 4492800, ZeroTimeMillis: 1596059091000, SlotLengthMillis: 1000}
	// PreprodSlots: the first Shelley slot, 86,400, began 2022-06-21T00:00:00Z.
	PreprodSlots = SlotConfig{ZeroSlot: 86400, ZeroTimeMillis: 1655769600000, SlotLengthMillis: 1000}
	// PreviewSlots: slot 0 began 2022-10-25T00:00:00Z.
	PreviewSlots = SlotConfig{ZeroSlot: 0, ZeroTimeMillis: 1666656000000, SlotLengthMillis: 1000}
)

// SlotConfigFor returns the slot configuration of a well-known network magic.
func SlotConfigFor(magic uint32) (SlotConfig, error) {
	switch magic {
	case 764824073:
		return MainnetSlots, nil
	case 1:
		return PreprodSlots, nil
	case 2:
		return PreviewSlots, nil
	}
	return SlotConfig{}, fmt.Errorf("no built-in slot configuration for network magic %d", magic)
}

// SlotConfigFrom is the slot configuration of a network whose slots all
// last slotLength from slot 0 at systemStart: a testnet whose Shelley-based
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

// SlotStart returns the POSIX time (ms) at which a slot begins.
func (c SlotConfig) SlotStart(slot uint64) int64 {
	if slot >= c.ZeroSlot {
		return c.ZeroTimeMillis + int64(slot-c.ZeroSlot)*c.SlotLengthMillis
	}
	return c.ZeroTimeMillis - int64(c.ZeroSlot-slot)*c.SlotLengthMillis
}

// SemanticInterval turns a transaction's validity interval in slots into the
// interval the Marlowe semantics see: [start of invalidBefore, start of
// invalidHereafter - 1] in POSIX ms. Either end is nil when open.
func (c SlotConfig) SemanticInterval(invalidBefore, invalidHereafter *uint64) record.Interval {
	iv := record.Interval{InvalidBefore: invalidBefore, InvalidHereafter: invalidHereafter}
	if invalidBefore != nil {
		from := c.SlotStart(*invalidBefore)
		iv.FromMillis = &from
	}
	if invalidHereafter != nil {
		to := c.SlotStart(*invalidHereafter) - 1
		iv.ToMillis = &to
	}
	return iv
}
