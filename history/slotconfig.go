package history

import (
	"fmt"
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
func (c SlotConfig) SemanticInterval(invalidBefore, invalidHereafter *uint64) Interval {
	iv := Interval{InvalidBefore: invalidBefore, InvalidHereafter: invalidHereafter}
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
