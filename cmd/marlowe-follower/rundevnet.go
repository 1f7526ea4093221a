package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

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
	clock   string // ClockWall or ClockTraces; "" for the default
}

// run --devnet's clocks (--devnet-clock).
const (
	// ClockWall: the chain follows the real time: every block at the time
	// it is made, every contract scheduled from its creation (deadlines
	// minutes ahead). At --devnet-block-rate 0 the chain is made at once,
	// blocks 20 s apart, ending before the time it is started.
	ClockWall = "wall"
	// ClockTraces: the reference traces' own times on the devnet's 1 ms
	// slots from 1969-12-20, exact to the millisecond (for tests that
	// compare with them).
	ClockTraces = "traces"
)

// runDevnetGenerator is run --devnet's generator: o's settings on the
// clock o.clock asks for (by default the wall clock), or, for a kept chain,
// the clock it was made on (asking for another is refused).
func runDevnetGenerator(o runDevnetOptions, chainFile string, now time.Time, log *zap.Logger) (devnet.GeneratorConfig, error) {
	gen := devnet.DefaultGeneratorConfig()
	gen.Seed, gen.MarloweShare = o.seed, o.share
	mode := o.clock
	switch mode {
	case "", ClockWall, ClockTraces:
	default:
		return gen, usageErrorf("--devnet-clock %q: want %s or %s", mode, ClockWall, ClockTraces)
	}
	if chainFile != "" {
		meta, err := devnet.ReadChainMeta(chainFile)
		switch {
		case err == nil:
			kept := ClockWall
			if meta.Generator.Clock.IsZero() {
				kept = ClockTraces
			}
			if mode != "" && mode != kept {
				return gen, usageErrorf("--devnet-clock %s, but the devnet chain kept in %s was made on the %s clock: "+
					"leave --devnet-clock out to continue it, or start afresh with `marlowe-follower reset --yes` on this data directory", mode, chainFile, kept)
			}
			gen.KeepClockOf(meta.Generator)
			if kept == ClockTraces && mode == "" {
				log.Warn("the devnet chain kept in the data directory is on the reference traces' clock (1969; made by an earlier version, or with --devnet-clock traces): "+
					"it goes on so; for a chain on the wall clock, start afresh with `marlowe-follower reset --yes`", zap.String("chain", chainFile))
			}
			return gen, nil
		case !errors.Is(err, fs.ErrNotExist):
			return gen, err
		}
	}
	switch {
	case mode == ClockTraces:
	case o.rate > 0:
		gen.UseWallClock(devnet.DevnetClock, now, o.rate)
	default:
		gen.UseClock(devnet.DevnetClock, devnet.EndingBy(now, o.blocks).UnixMilli())
	}
	return gen, nil
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
	if err := runDevnetNetwork(l, cfg); err != nil {
		return nil, "", nil, err
	}
	tmp, err := os.MkdirTemp("", "marlowe-follower-devnet-")
	if err != nil {
		return nil, "", nil, err
	}
	// Removed however the process ends: a second Ctrl-C skips the
	// deferred cleanups.
	forget := onForcedExit(func() { _ = os.RemoveAll(tmp) })
	defer func() {
		if err != nil {
			forget()
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
	gen, err := runDevnetGenerator(o, chainFile, time.Now(), log)
	if err != nil {
		return nil, "", nil, err
	}
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
		forget()
	}, nil
}

// runDevnetNetwork refuses a network setting that run --devnet would drop:
// its node serves magic 42 on the devnet's own clock, so another magic, a
// system start, a slot length or a genesis file (from a flag, the
// environment or the file) would otherwise be ignored without a word. A
// devnet of another network is the devnet command's.
func runDevnetNetwork(l *config.Loaded, cfg *config.Config) error {
	// where says where a setting's value comes from.
	where := func(path string) string {
		for _, s := range config.Settings() {
			if s.Path != path {
				continue
			}
			switch l.Sources[path] {
			case config.FromFlag:
				return "--" + s.Flag
			case config.FromEnv:
				return s.Env
			}
		}
		return "the configuration file"
	}
	var set []string
	if l.Sources["node.networkMagic"] != config.FromDefault && cfg.Node.NetworkMagic != devnet.NetworkMagic {
		set = append(set, fmt.Sprintf("node.networkMagic %d (%s)", cfg.Node.NetworkMagic, where("node.networkMagic")))
	}
	for _, s := range []struct {
		path string
		set  bool
	}{{"node.systemStart", cfg.Node.SystemStart != ""}, {"node.slotLength", cfg.Node.SlotLength != 0}, {"node.shelleyGenesis", cfg.Node.Genesis != ""}} {
		if s.set {
			set = append(set, fmt.Sprintf("%s (%s)", s.path, where(s.path)))
		}
	}
	if len(set) == 0 {
		return nil
	}
	return usageErrorf("--devnet serves network magic %d on the devnet's own slot clock, but the configuration sets %s; for a devnet of another network run "+
		"`marlowe-follower devnet --socket PATH --network-magic N` and follow it with `marlowe-follower run --node-socket PATH --network-magic N`",
		devnet.NetworkMagic, strings.Join(set, ", "))
}
