package devnet

import (
	"errors"
	"fmt"
	"math"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// DevnetClock is the clock of network magic 42: slots of 1 ms, slot 0 at
// ZeroTimeMillis (1969-12-20). A devnet chain made for another network is
// made on that network's clock (chain.SlotConfig): the follower turns a
// transaction's validity interval into POSIX time with it.
var DevnetClock = chain.SlotConfig{ZeroSlot: 0, ZeroTimeMillis: ZeroTimeMillis, SlotLengthMillis: SlotLengthMillis}

// intervalSlots turns a semantic interval [from, to] in POSIX ms into the
// validity interval of a transaction: the first valid slot and the first
// slot no longer valid. The follower then sees [start of the first slot,
// start of the first invalid slot - 1], which is [from, to] exactly when
// from is a slot's start and to a slot's last millisecond (always so with
// 1 ms slots).
func intervalSlots(c chain.SlotConfig, iv marlowe.TimeInterval) (start, ttl uint64) {
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
// devnet's (42), or mainnet's, preprod's or preview's (chain.SlotConfigFor).
func NetworkClock(magic uint32) (chain.SlotConfig, error) {
	if magic == NetworkMagic {
		return DevnetClock, nil
	}
	c, err := chain.SlotConfigFor(magic)
	if err != nil {
		return chain.SlotConfig{}, fmt.Errorf("network magic %d: %w", magic, ErrNoClock)
	}
	return c, nil
}

// maxTimeMillis bounds the times the generator puts on chain.
const maxTimeMillis = math.MaxInt64 / 4
