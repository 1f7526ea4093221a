package history

import (
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
