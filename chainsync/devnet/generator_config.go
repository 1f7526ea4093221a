package devnet

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Devnet network constants. The slot configuration turns validity intervals
// in slots into POSIX time: slot s starts at ZeroTime + s*SlotLength ms. The
// devnet's slots last one millisecond, so that the validity intervals of the
// reference traces (arbitrary milliseconds, some before 1970) are exact on
// chain; blocks come every 20,000 slots (20 s) on average, like mainnet's.
// Slot 0 is a little before the Unix epoch, so that the traces' earliest
// times have a slot.
const (
	NetworkMagic     = 42
	ZeroTimeMillis   = -1_000_000_000 // 1969-12-20
	SlotLengthMillis = 1
	// MaxBlockBodySize is mainnet's limit on a block body.
	MaxBlockBodySize = 90112
)

// GeneratorConfig describes the chain a Generator makes. The same config and
// seed always give the same chain.
type GeneratorConfig struct {
	Seed int64
	// MarloweShare is the fraction of blocks with Marlowe activity (0..1).
	MarloweShare float64
	// MeanBlockSize is the mean size of a block body in bytes; sizes vary
	// around it up to MaxBlockBodySize.
	MeanBlockSize int
	// RollbackEvery is the mean number of blocks between rollbacks; 0 for none.
	RollbackEvery int
	// MaxRollbackDepth is the deepest rollback, in blocks.
	MaxRollbackDepth int
	// MaxActive bounds the contracts in progress at once.
	MaxActive int
	// MeanSlotGap is the mean number of slots between blocks.
	MeanSlotGap int
	// Clock is the slot clock of the network the chain is made for. The
	// zero value is the devnet's own (DevnetClock, network magic 42), on
	// which the lifecycles are played at the reference traces' times. On
	// any other clock (UseClock) each contract is scheduled on the chain's
	// time when it is created, so that the semantics accept its steps at
	// that network's slots and every step is valid at its block's slot
	// (see scheduleLifecycle).
	Clock chain.SlotConfig
	// After is the block the chain continues: the first block has its
	// block number plus one, its hash as previous hash and a later slot.
	// The zero value starts at the origin, slot 0; a header with only a
	// slot starts at the origin with blocks after that slot.
	After chain.BlockHeader
	// WallClock: the slot of every block is given with it (NextAt): the
	// time it is made, on a chain that follows the real time. The
	// generator then draws no gaps between blocks; MeanSlotGap only sizes
	// the scheduled steps' windows, so it should be the real gap (the
	// slots of a second over the block rate). Needs a Clock.
	WallClock bool `json:",omitempty"`
	// Mainnet: the chain is mainnet's, and so are its addresses (wallets,
	// scripts, the contracts' address parties); on any other network they
	// are testnet addresses.
	Mainnet bool `json:",omitempty"`
}

// BlockInterval is the mean time between generated blocks, mainnet's.
const BlockInterval = 20 * time.Second

// UseClock makes the chain for a network of that clock: blocks after the
// slot of startMillis (POSIX ms), every BlockInterval on average.
func (c *GeneratorConfig) UseClock(clock chain.SlotConfig, startMillis int64) {
	c.Clock = clock
	c.After = chain.BlockHeader{Slot: clock.SlotAt(startMillis)}
	if clock.SlotLengthMillis > 0 {
		c.MeanSlotGap = max(1, int(BlockInterval.Milliseconds()/clock.SlotLengthMillis))
	}
}

// UseWallClock makes the chain follow the real time on clock, from now on:
// every block at the time it is made (NextAt), blocks at rate a second,
// each contract scheduled from its creation on that clock (its deadlines
// minutes ahead at run --devnet's rate).
func (c *GeneratorConfig) UseWallClock(clock chain.SlotConfig, now time.Time, rate float64) {
	c.UseClock(clock, now.UnixMilli())
	c.WallClock = true
	if clock.SlotLengthMillis > 0 && rate > 0 {
		c.MeanSlotGap = max(1, int(math.Round(1000/rate/float64(clock.SlotLengthMillis))))
	}
}

// KeepClockOf takes the clock a stored chain was made on (its clock, its
// start, whether it follows the wall clock and then the gap its windows
// were sized for, which came from the block rate of its first run), so
// that a devnet started again on it, maybe at another rate, continues it
// as it was made.
func (c *GeneratorConfig) KeepClockOf(stored GeneratorConfig) {
	c.Clock, c.After, c.WallClock = stored.Clock, stored.After, stored.WallClock
	if stored.WallClock {
		c.MeanSlotGap = stored.MeanSlotGap
	}
}

// EndingBy is when a chain of blocks made at once (not on the wall clock,
// BlockInterval apart on average) starts so that its tip comes before end:
// the mean length of the chain before it, and three standard deviations of
// the sum of its drawn gaps (uniform on 1..2 intervals) more. For 1,000
// blocks that is 5.6 h and 18 min before end; the tip then comes about
// 18 min (12 to 24) before end.
func EndingBy(end time.Time, blocks uint64) time.Time {
	n := float64(blocks)
	mean := n * BlockInterval.Seconds()
	spread := 3 * BlockInterval.Seconds() * math.Sqrt(n/3)
	return end.Add(-time.Duration((mean + spread) * float64(time.Second)))
}

// DefaultGeneratorConfig returns a mainnet-like configuration with 10%
// Marlowe blocks and occasional shallow rollbacks.
func DefaultGeneratorConfig() GeneratorConfig {
	return GeneratorConfig{
		Seed: 1, MarloweShare: 0.1, MeanBlockSize: 7700, RollbackEvery: 50, MaxRollbackDepth: 3,
		MaxActive: 24, MeanSlotGap: 20000,
	}
}

func (c *GeneratorConfig) validate() error {
	switch {
	case c.MarloweShare < 0 || c.MarloweShare > 1:
		return fmt.Errorf("marlowe share %v: want 0..1", c.MarloweShare)
	case c.MeanBlockSize < 0 || c.MeanBlockSize > MaxBlockBodySize:
		return fmt.Errorf("mean block size %d: want 0..%d", c.MeanBlockSize, MaxBlockBodySize)
	case c.RollbackEvery < 0 || c.MaxRollbackDepth < 0:
		return errors.New("rollback settings must not be negative")
	case c.RollbackEvery > 0 && c.MaxRollbackDepth == 0:
		return errors.New("rollbacks need a maximum depth of at least 1")
	}
	if c.MaxActive <= 0 {
		c.MaxActive = 24
	}
	if c.MeanSlotGap <= 0 {
		c.MeanSlotGap = 20000
	}
	if !c.Clock.IsZero() {
		if err := c.Clock.Validate(); err != nil {
			return fmt.Errorf("clock: %w", err)
		}
	} else if c.WallClock {
		return errors.New("a chain on the wall clock needs a slot clock to schedule its contracts on")
	}
	return nil
}

// network is the network of the chain's addresses.
func (c *GeneratorConfig) network() marlowe.Network {
	if c.Mainnet {
		return marlowe.Mainnet
	}
	return marlowe.Testnet
}
