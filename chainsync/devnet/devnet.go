package devnet

import (
	"context"
	"errors"
	"fmt"
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
	Logger  *zap.Logger
}

// Devnet is a running devnet node with its chain.
type Devnet struct {
	cfg     RunConfig
	log     *zap.Logger
	store   *ChainStore
	journal *Journal
	node    *Node
	gen     *Generator

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
	d := &Devnet{cfg: cfg, log: log.Named("devnet"), genDone: make(chan struct{})}
	if cfg.Replay != "" {
		blocks, err := ReadReplayFile(cfg.Replay, ReplayOptions{Header: headerOf, DetectType: detectType})
		if err != nil {
			return nil, err
		}
		if d.store, err = NewReplayStore(blocks); err != nil {
			return nil, err
		}
		close(d.genDone)
	} else {
		gen, err := NewGenerator(cfg.Generator)
		if err != nil {
			return nil, err
		}
		d.gen, d.store = gen, NewChainStore()
		if cfg.Journal {
			d.journal = NewJournal()
		}
		if cfg.Pregenerate {
			if cfg.Blocks == 0 {
				return nil, errors.New("devnet: pregenerating needs a number of blocks")
			}
			start := time.Now()
			for d.store.Tip().BlockNo < cfg.Blocks {
				if err := d.step(); err != nil {
					return nil, err
				}
			}
			d.log.Info("chain generated", zap.Uint64("blocks", cfg.Blocks), zap.Int64("bytes", d.store.RawSize()),
				zap.Duration("took", time.Since(start)))
		}
	}
	node, err := New(d.nodeConfig())
	if err != nil {
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
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

// step applies the generator's next operation to the store.
func (d *Devnet) step() error {
	op, err := d.gen.Next()
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if op.Rollback != nil {
		d.rolls++
		if err := d.store.RollBack(*op.Rollback); err != nil {
			return err
		}
		if d.journal != nil {
			d.journal.RollBack(*op.Rollback, d.store.Tip())
		}
		return nil
	}
	d.produced++
	if err := d.store.Append(*op.Block); err != nil {
		return err
	}
	if d.journal != nil {
		d.journal.Append(*op.Block)
	}
	return nil
}

func (d *Devnet) produce(ctx context.Context) {
	defer d.wg.Done()
	defer close(d.genDone)
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

// Close stops generating and serving.
func (d *Devnet) Close() error {
	d.cancel()
	d.wg.Wait()
	return d.Node().Close()
}
