package devnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// SlotClock says when each slot of a chain begins: slot ZeroSlot begins at
// ZeroTimeMillis (POSIX milliseconds) and every slot lasts SlotLengthMillis.
// It is the history.SlotConfig of the same network (this package cannot
// import history): the follower turns a transaction's validity interval
// into POSIX time with it, so a devnet chain made for a network must be
// made with that network's clock.
type SlotClock struct {
	ZeroSlot         uint64
	ZeroTimeMillis   int64
	SlotLengthMillis int64
}

// DevnetClock is the clock of network magic 42: slots of 1 ms, slot 0 at
// ZeroTimeMillis (1969-12-20).
var DevnetClock = SlotClock{ZeroSlot: 0, ZeroTimeMillis: ZeroTimeMillis, SlotLengthMillis: SlotLengthMillis}

// IsZero reports whether c is the zero value (no clock given).
func (c SlotClock) IsZero() bool { return c == SlotClock{} }

// Validate checks that slots have a positive length.
func (c SlotClock) Validate() error {
	if c.SlotLengthMillis <= 0 {
		return fmt.Errorf("slot length %d ms: want at least 1 ms", c.SlotLengthMillis)
	}
	return nil
}

// SlotStart returns the POSIX time (ms) at which a slot begins.
func (c SlotClock) SlotStart(slot uint64) int64 {
	if slot >= c.ZeroSlot {
		return c.ZeroTimeMillis + int64(slot-c.ZeroSlot)*c.SlotLengthMillis
	}
	return c.ZeroTimeMillis - int64(c.ZeroSlot-slot)*c.SlotLengthMillis
}

// SlotAt returns the slot in which the POSIX time ms falls; times before
// slot 0 give slot 0.
func (c SlotClock) SlotAt(ms int64) uint64 {
	zero := c.SlotStart(0)
	if ms <= zero {
		return 0
	}
	return uint64((ms - zero) / c.SlotLengthMillis)
}

// intervalSlots turns a semantic interval [from, to] in POSIX ms into the
// validity interval of a transaction: the first valid slot and the first
// slot no longer valid. The follower then sees [start of the first slot,
// start of the first invalid slot - 1], which is [from, to] exactly when
// from is a slot's start and to a slot's last millisecond (always so with
// 1 ms slots).
func (c SlotClock) intervalSlots(iv marlowe.TimeInterval) (start, ttl uint64) {
	from, to := int64(0), int64(0)
	if iv.From.IsInt64() {
		from = iv.From.Int64()
	}
	if iv.To.IsInt64() {
		to = iv.To.Int64()
	}
	start = c.SlotAt(from)
	ttl = max(c.SlotAt(to)+1, start+1)
	return start, ttl
}

// ErrNoClock is returned by NetworkClock for a network magic without a
// built-in clock.
var ErrNoClock = errors.New("no built-in slot clock")

// Public network magics.
const (
	MagicMainnet = 764824073
	MagicPreprod = 1
	MagicPreview = 2
)

// NetworkClock returns the clock of a network magic with a built-in one: the
// devnet's (42), mainnet, preprod or preview (the same values as
// history.MainnetSlots, PreprodSlots and PreviewSlots).
func NetworkClock(magic uint32) (SlotClock, error) {
	switch magic {
	case NetworkMagic:
		return DevnetClock, nil
	case MagicMainnet:
		return SlotClock{ZeroSlot: 4492800, ZeroTimeMillis: 1596059091000, SlotLengthMillis: 1000}, nil
	case MagicPreprod:
		return SlotClock{ZeroSlot: 86400, ZeroTimeMillis: 1655769600000, SlotLengthMillis: 1000}, nil
	case MagicPreview:
		return SlotClock{ZeroSlot: 0, ZeroTimeMillis: 1666656000000, SlotLengthMillis: 1000}, nil
	}
	return SlotClock{}, fmt.Errorf("network magic %d: %w", magic, ErrNoClock)
}

// maxTimeMillis bounds the times the generator puts on chain.
const maxTimeMillis = math.MaxInt64 / 4
