package devnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/chain"
)

// RunConfig configures a running devnet: a node serving a chain that a
// generator grows (or a replay file holds).
type RunConfig struct {
	SocketPath   string
	NetworkMagic uint32 // 0 means NetworkMagic (42)
	Generator    GeneratorConfig
	// Blocks stops generating once the chain holds this many blocks; the
	// node then waits at the tip like a node with nothing new. 0 generates
	// for ever.
	Blocks uint64
	// BlockRate is blocks per second; 0 generates as fast as possible.
	BlockRate float64
	// Pregenerate makes the first Blocks blocks before the node starts
	// serving, so clients measure the socket, not the generator.
	Pregenerate bool
	// Replay, when set, serves the blocks of this file (hex, one per line)
	// instead of generating.
	Replay string
	// Journal serves every client the whole history of the chain, forks
	// included, whatever its timing (see Journal), instead of the current
	// chain as a node does. Runs are then reproducible.
	Journal bool
	// ChainFile, when set, keeps the generated chain in this file (see
	// ChainFile), created if missing. Started again on it, the devnet
	// serves the stored chain (and journal), then continues generating
	// after it exactly as an uninterrupted run would have: the generator is
	// replayed from its seed over the stored changes, which must be what it
	// makes (if it makes another chain, as another version of the devnet
	// may, the stored chain is served and new contracts are generated after
	// it). The network magic and generator settings must be those the file
	// was made with. Not with Replay.
	ChainFile string
	// PrefixBlocks, when above 0, serves only the first PrefixBlocks blocks
	// of the stored chain (a chain file's or a replay file's) in the order
	// they were appended, with the rollbacks between them (blocks of forks
	// rolled back later count, so the tip may be lower), until Reveal shows
	// the rest; the generator goes on only once everything stored is shown.
	// A node restarted with it is behind its clients.
	PrefixBlocks int
	Logger       *zap.Logger
}

// Devnet is a running devnet node with its chain.
type Devnet struct {
	cfg     RunConfig
	log     *zap.Logger
	store   *ChainStore
	journal *Journal
	node    *Node
	gen     *Generator

	file    *ChainFile
	replay  []Op // stored changes the generator has not been replayed over yet
	linked  bool // blocks extend the tip (generated), or only follow it (replayed)
	pending []Op // stored changes not shown yet (PrefixBlocks)
	shown   chan struct{}

	mu       sync.Mutex
	genDone  chan struct{}
	genErr   error
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	produced uint64
	rolls    uint64
}

// Start builds the chain's beginning, starts the node and, unless replaying,
// the generator.
func Start(ctx context.Context, cfg RunConfig) (*Devnet, error) {
	if cfg.NetworkMagic == 0 {
		cfg.NetworkMagic = NetworkMagic
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	d := &Devnet{cfg: cfg, log: log.Named("devnet"), genDone: make(chan struct{}), shown: make(chan struct{})}
	if cfg.Replay != "" && cfg.ChainFile != "" {
		return nil, errors.New("devnet: a replay is not kept in a chain file")
	}
	if cfg.Replay == "" && cfg.Generator.WallClock && (cfg.Pregenerate || cfg.BlockRate <= 0) {
		return nil, errors.New("devnet: a chain on the wall clock is made at a block rate, as time passes (not pregenerated, not as fast as possible)")
	}
	d.store = NewChainStore()
	if cfg.Journal {
		d.journal = NewJournal()
	}
	var stored []Op
	if cfg.Replay != "" {
		blocks, err := ReadReplayFile(cfg.Replay, ReplayOptions{Header: headerOf, DetectType: detectType})
		if err != nil {
			return nil, err
		}
		replayed, err := NewReplayStore(blocks)
		if err != nil {
			return nil, err
		}
		if cfg.PrefixBlocks == 0 && d.journal == nil {
			d.store = replayed
		} else {
			// Checked as a whole above, so that a bad file fails at once
			// even when only a prefix is shown.
			for i := range blocks {
				stored = append(stored, Op{Block: &blocks[i]})
			}
		}
		close(d.genDone)
	} else {
		d.linked = true
		gen, err := NewGenerator(cfg.Generator)
		if err != nil {
			return nil, err
		}
		d.gen = gen
		if cfg.ChainFile != "" {
			if stored, err = d.openChainFile(); err != nil {
				return nil, err
			}
		}
	}
	if err := d.showStored(stored); err != nil {
		d.closeFile()
		return nil, err
	}
	if d.gen != nil && cfg.Pregenerate {
		if cfg.Blocks == 0 {
			d.closeFile()
			return nil, errors.New("devnet: pregenerating needs a number of blocks")
		}
		if len(d.pending) > 0 {
			d.closeFile()
			return nil, errors.New("devnet: pregenerating after a prefix of the stored chain")
		}
		if err := d.catchUp(ctx); err != nil {
			d.closeFile()
			return nil, err
		}
		start := time.Now()
		for d.store.Tip().BlockNo < cfg.Blocks {
			if err := d.step(); err != nil {
				d.closeFile()
				return nil, err
			}
		}
		d.log.Info("chain generated", zap.Uint64("blocks", cfg.Blocks), zap.Int64("bytes", d.store.RawSize()),
			zap.Duration("took", time.Since(start)))
	}
	node, err := New(d.nodeConfig())
	if err != nil {
		d.closeFile()
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
		d.closeFile()
		return nil, err
	}
	d.node = node
	runCtx, cancel := context.WithCancel(ctx)
	d.cancel = cancel
	if d.gen != nil {
		d.wg.Add(1)
		go d.produce(runCtx)
	}
	return d, nil
}

// openChainFile opens the chain file and returns the changes it holds;
// the generator is brought to their end by catchUp.
func (d *Devnet) openChainFile() ([]Op, error) {
	gcfg := d.cfg.Generator
	if err := gcfg.validate(); err != nil {
		return nil, err
	}
	f, stored, err := OpenChainFile(d.cfg.ChainFile, ChainMeta{NetworkMagic: d.cfg.NetworkMagic, Generator: gcfg})
	if err != nil {
		return nil, err
	}
	d.file = f
	if len(stored) == 0 {
		d.log.Info("devnet chain file created", zap.String("file", f.Path()))
		return nil, nil
	}
	d.replay = stored
	d.log.Info("devnet chain restored", zap.String("file", f.Path()), zap.Int("changes", len(stored)))
	return stored, nil
}

// catchUp replays the generator from its seed over the stored changes, so
// that it continues after them as one run would; the chain is served
// meanwhile. If the generator makes another chain, it is replaced by one
// generating after the stored chain from a seed of its own.
func (d *Devnet) catchUp(ctx context.Context) error {
	if len(d.replay) == 0 {
		return nil
	}
	start := time.Now()
	stored := d.replay
	d.replay = nil
	for i, op := range stored {
		if i%256 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		d.mu.Lock()
		got, err := d.nextOp(op)
		d.mu.Unlock()
		if err == nil && sameOp(got, op) {
			continue
		}
		tip, err := tipAfter(stored)
		if err != nil {
			return err
		}
		cfg := d.cfg.Generator
		cfg.After = tip
		cfg.Seed ^= int64(tip.BlockNo)*0x5851f42d4c957f2d + 1
		gen, err := NewGenerator(cfg)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.gen = gen
		d.mu.Unlock()
		d.log.Warn("the generator does not make the stored chain (another version of the devnet?): generating new contracts after it",
			zap.String("file", d.file.Path()), zap.Int("change", i+1), zap.Uint64("tipBlockNo", tip.BlockNo))
		return nil
	}
	d.log.Info("generator caught up with the stored chain", zap.Int("changes", len(stored)), zap.Duration("took", time.Since(start)))
	return nil
}

// tipAfter is the tip of the chain the changes make.
func tipAfter(ops []Op) (chain.BlockHeader, error) {
	s := NewChainStore()
	for _, op := range ops {
		if err := applyOp(s, op, true); err != nil {
			return chain.BlockHeader{}, err
		}
	}
	n := s.Len()
	if n == 0 {
		return chain.BlockHeader{}, nil
	}
	b, _ := s.Block(n - 1)
	return b.Header, nil
}

// applyOp applies a change to a store.
func applyOp(s *ChainStore, op Op, linked bool) error {
	switch {
	case op.Rollback != nil:
		return s.RollBack(*op.Rollback)
	case linked:
		return s.Append(*op.Block)
	}
	return s.AppendUnlinked(*op.Block)
}

// showStored applies the stored changes up to the prefix to the chain and
// keeps the rest for Reveal.
func (d *Devnet) showStored(stored []Op) error {
	n := len(stored)
	if k := d.cfg.PrefixBlocks; k > 0 {
		blocks := 0
		for i, op := range stored {
			if op.Block != nil {
				if blocks == k {
					n = i
					break
				}
				blocks++
			}
		}
	}
	for _, op := range stored[:n] {
		if err := d.apply(op); err != nil {
			return fmt.Errorf("devnet: stored chain: %w", err)
		}
	}
	d.pending = slices.Clone(stored[n:])
	if len(d.pending) == 0 {
		close(d.shown)
	} else {
		d.log.Info("serving a prefix of the stored chain", zap.Uint64("tipBlockNo", d.store.Tip().BlockNo),
			zap.Int("hiddenChanges", len(d.pending)))
	}
	return nil
}

// apply applies a change to the chain (and journal). The caller holds mu
// or is Start.
func (d *Devnet) apply(op Op) error {
	if err := applyOp(d.store, op, d.linked); err != nil {
		return err
	}
	if d.journal != nil {
		if op.Rollback != nil {
			d.journal.RollBack(*op.Rollback, d.store.Tip())
		} else {
			d.journal.Append(*op.Block)
		}
	}
	return nil
}

// Reveal shows up to blocks more blocks of the stored chain held back by
// PrefixBlocks (with the changes between them; all of it when blocks is 0
// or less) and returns how many stored blocks are still hidden. Once
// nothing is hidden the generator goes on.
func (d *Devnet) Reveal(blocks int) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	shown := 0
	for len(d.pending) > 0 {
		op := d.pending[0]
		if op.Block != nil && blocks > 0 && shown == blocks {
			break
		}
		if err := d.apply(op); err != nil {
			return d.hiddenLocked(), fmt.Errorf("devnet: stored chain: %w", err)
		}
		d.pending = d.pending[1:]
		if op.Block != nil {
			shown++
		}
		if len(d.pending) == 0 {
			close(d.shown)
		}
	}
	hidden := d.hiddenLocked()
	d.log.Info("revealed stored blocks", zap.Int("blocks", shown), zap.Int("hidden", hidden),
		zap.Uint64("tipBlockNo", d.store.Tip().BlockNo))
	return hidden, nil
}

// Hidden returns the number of stored blocks not shown yet.
func (d *Devnet) Hidden() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hiddenLocked()
}

func (d *Devnet) hiddenLocked() int {
	n := 0
	for _, op := range d.pending {
		if op.Block != nil {
			n++
		}
	}
	return n
}

func (d *Devnet) closeFile() {
	if d.file != nil {
		_ = d.file.Close()
	}
}

func (d *Devnet) nodeConfig() Config {
	cfg := Config{SocketPath: d.cfg.SocketPath, NetworkMagic: d.cfg.NetworkMagic, Store: d.store, Logger: d.log}
	if d.journal != nil {
		cfg.Source = d.journal
	}
	return cfg
}

// headerOf decodes a replayed block's header with the block package.
func headerOf(t block.Type, raw []byte) (chain.BlockHeader, error) {
	b, err := block.DecodeHeader(t, raw, block.Options{})
	return b.Header, err
}

// nextOp is the generator's next change. On the wall clock a new block
// is at the slot of stored's block when the generator is replayed over a
// stored chain (stored is a block), else at the slot of now. The caller
// holds mu.
func (d *Devnet) nextOp(stored Op) (Op, error) {
	if !d.cfg.Generator.WallClock {
		return d.gen.Next()
	}
	if stored.Block != nil {
		return d.gen.NextAt(stored.Block.Header.Slot)
	}
	if stored.Rollback != nil {
		// Whatever slot: the generator makes the stored rollback or
		// another chain.
		return d.gen.NextAt(0)
	}
	return d.gen.NextAt(d.cfg.Generator.Clock.SlotAt(time.Now().UnixMilli()))
}

// step applies the generator's next operation to the store, after
// writing it to the chain file.
func (d *Devnet) step() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	op, err := d.nextOp(Op{})
	if err != nil {
		return err
	}
	if d.file != nil {
		if err := d.file.Record(op); err != nil {
			return err
		}
	}
	if op.Rollback != nil {
		d.rolls++
	} else {
		d.produced++
	}
	return d.apply(op)
}

func (d *Devnet) produce(ctx context.Context) {
	defer d.wg.Done()
	defer close(d.genDone)
	if err := d.catchUp(ctx); err != nil {
		if ctx.Err() == nil {
			d.mu.Lock()
			d.genErr = err
			d.mu.Unlock()
			d.log.Error("generator failed", zap.Error(err))
		}
		return
	}
	select {
	case <-d.shown:
	case <-ctx.Done():
		return
	}
	var tick *time.Ticker
	if d.cfg.BlockRate > 0 {
		tick = time.NewTicker(time.Duration(float64(time.Second) / d.cfg.BlockRate))
		defer tick.Stop()
	}
	for d.cfg.Blocks == 0 || d.store.Tip().BlockNo < d.cfg.Blocks {
		if tick != nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		if err := d.step(); err != nil {
			d.mu.Lock()
			d.genErr = err
			d.mu.Unlock()
			d.log.Error("generator failed", zap.Error(err))
			return
		}
	}
	d.log.Info("chain complete; waiting at the tip", zap.Uint64("blocks", d.store.Tip().BlockNo))
}

// Done is closed when the generator has made the configured number of
// blocks (at once for a replay).
func (d *Devnet) Done() <-chan struct{} { return d.genDone }

// Err returns the generator's error, if it failed.
func (d *Devnet) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.genErr
}

// Node returns the node.
func (d *Devnet) Node() *Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node
}

// Store returns the chain.
func (d *Devnet) Store() *ChainStore { return d.store }

// Journal returns the journal the node serves (RunConfig.Journal), or nil.
func (d *Devnet) Journal() *Journal { return d.journal }

// Activity returns the Marlowe activity on the current chain (none for a replay).
func (d *Devnet) Activity() []Activity {
	if d.gen == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen.Activity()
}

// Restart closes the node and starts a new one on the same socket and chain,
// as a node restart looks to its clients.
func (d *Devnet) Restart(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.node.Close(); err != nil {
		return err
	}
	node, err := New(d.nodeConfig())
	if err != nil {
		return err
	}
	if err := node.Start(ctx); err != nil {
		return fmt.Errorf("devnet: restart: %w", err)
	}
	d.node = node
	return nil
}

// Close stops generating and serving, and closes the chain file.
func (d *Devnet) Close() error {
	d.cancel()
	d.wg.Wait()
	err := d.Node().Close()
	if d.file != nil {
		if ferr := d.file.Close(); err == nil {
			err = ferr
		}
	}
	return err
}
