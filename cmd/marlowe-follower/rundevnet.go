package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

// runDevnetOptions are run's --devnet-* flags.
type runDevnetOptions struct {
	rate    float64
	seed    int64
	share   float64
	blocks  uint64
	journal bool
}

// startRunDevnet starts run --devnet's node and points cfg at it. Its
// socket is in a temporary directory, and so is the history unless a data
// directory or a database is given. When the history is kept (--data-dir,
// or a database URL: then in the data directory, by default
// ./marlowe-follower-data), the devnet's chain is kept beside it in
// devnet.chain, so that a restart serves the same chain and the follower
// resumes where it stopped. cleanup closes the node and removes the
// temporary directory.
func startRunDevnet(ctx context.Context, l *config.Loaded, cfg *config.Config, o runDevnetOptions, log *zap.Logger) (dn *devnet.Devnet, chainFile string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "marlowe-follower-devnet-")
	if err != nil {
		return nil, "", nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	kept := l.Sources["store.dataDir"] != config.FromDefault || cfg.Store.DatabaseURL != ""
	if !kept {
		cfg.Store.DataDir = filepath.Join(tmp, "data")
	} else {
		if err := os.MkdirAll(cfg.Store.DataDir, 0o750); err != nil {
			return nil, "", nil, fmt.Errorf("store.dataDir %s: %w", cfg.Store.DataDir, err)
		}
		chainFile = filepath.Join(cfg.Store.DataDir, DevnetChainFile)
		_, chainErr := os.Stat(chainFile)
		if _, histErr := os.Stat(filepath.Join(cfg.Store.DataDir, "history.sqlite")); os.IsNotExist(chainErr) && histErr == nil && cfg.Store.DatabaseURL == "" {
			log.Warn("the data directory holds a history but no devnet chain (kept since this version): a new chain starts, "+
				"which the stored history is not on; run `marlowe-follower reset --yes` with this data directory, or use another one",
				zap.String("dataDir", cfg.Store.DataDir))
		}
	}
	cfg.Node.Socket = filepath.Join(tmp, "node.socket")
	l.ApplyDevnetDefaults(cfg) // browser pages of any origin, unless cors.origins is set
	cfg.Node.NetworkMagic = devnet.NetworkMagic
	cfg.Node.SystemStart, cfg.Node.SlotLength, cfg.Node.Genesis = "", 0, ""
	gen := devnet.DefaultGeneratorConfig()
	gen.Seed, gen.MarloweShare = o.seed, o.share
	dn, err = devnet.Start(ctx, devnet.RunConfig{
		SocketPath: cfg.Node.Socket, Generator: gen, Blocks: o.blocks, BlockRate: o.rate, Journal: o.journal,
		ChainFile: chainFile, Logger: log,
	})
	if err != nil {
		return nil, "", nil, fmt.Errorf("devnet: %w", err)
	}
	return dn, chainFile, func() {
		_ = dn.Close()
		_ = os.RemoveAll(tmp)
	}, nil
}
