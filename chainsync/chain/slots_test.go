package chain

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseShelleyGenesis(t *testing.T) {
	// The fields a cardano-testnet genesis has (others left out).
	g, err := ParseShelleyGenesis(strings.NewReader(`{"activeSlotsCoeff": 0.05, "epochLength": 500, "networkMagic": 4242,
		"networkId": "Testnet", "securityParam": 10, "slotLength": 0.2, "systemStart": "2024-06-01T12:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	if g.NetworkMagic != 4242 || !g.SystemStart.Equal(start) || g.SlotLength != 200*time.Millisecond {
		t.Fatalf("%+v", g)
	}
	sc, err := g.Slots()
	if err != nil || sc != (SlotConfig{ZeroSlot: 0, ZeroTimeMillis: start.UnixMilli(), SlotLengthMillis: 200}) {
		t.Fatalf("%+v %v", sc, err)
	}
	if got := sc.SlotStart(5); got != start.UnixMilli()+1000 {
		t.Fatalf("slot 5 at %d", got)
	}
	for _, bad := range []string{
		`{"networkMagic": 1, "systemStart": "2024-06-01T12:00:00Z"}`,
		`{"networkMagic": 1, "slotLength": 1}`,
		`{"systemStart": "2024-06-01T12:00:00Z", "slotLength": 1}`,
		`{"networkMagic": 1, "systemStart": "2024-06-01T12:00:00Z", "slotLength": 0.0005}`,
		`{"networkMagic": 1, "systemStart": "2024-06-01T12:00:00Z", "slotLength": -1}`,
		`{"networkMagic": 1, "systemStart": "June", "slotLength": 1}`,
		`not json`,
	} {
		if _, err := ParseShelleyGenesis(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	if _, err := SlotConfigFrom(start, 1500*time.Microsecond); err == nil {
		t.Error("a slot length of 1.5 ms accepted")
	}
}

func TestSlotAtInvertsSlotStart(t *testing.T) {
	for _, c := range []SlotConfig{MainnetSlots, PreprodSlots, PreviewSlots, {ZeroTimeMillis: -1_000_000, SlotLengthMillis: 1}, {ZeroSlot: 7, ZeroTimeMillis: 5000, SlotLengthMillis: 200}} {
		for _, slot := range []uint64{0, 1, c.ZeroSlot, c.ZeroSlot + 12345, 160_000_000} {
			if slot >= c.ZeroSlot && c.SlotAt(c.SlotStart(slot)) != slot {
				t.Errorf("%+v: slot %d starts at %d, which SlotAt puts in slot %d", c, slot, c.SlotStart(slot), c.SlotAt(c.SlotStart(slot)))
			}
			if c.SlotAt(c.SlotStart(slot+1)-1) != slot {
				t.Errorf("%+v: the last millisecond of slot %d is in slot %d", c, slot, c.SlotAt(c.SlotStart(slot+1)-1))
			}
		}
		if c.SlotAt(c.SlotStart(0)-5) != 0 {
			t.Errorf("%+v: a time before slot 0 is not in slot 0", c)
		}
	}
	if _, err := SlotConfigFor(4242); !errors.Is(err, ErrNoSlotConfig) {
		t.Errorf("magic 4242: %v", err)
	}
}
