package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

func newDevnetCommand() *cobra.Command {
	def := devnet.DefaultGeneratorConfig()
	var (
		socket    string
		gen       = def
		blocks    uint64
		rate      float64
		replay    string
		activity  string
		pregen    bool
		journal   bool
		logFormat string
		logLevel  string
	)
	cmd := &cobra.Command{
		Use:   "devnet --socket PATH",
		Short: "Run the built-in devnet node: a chain-sync server on a Unix socket serving a generated Marlowe chain",
		Long: "Run the built-in devnet node: a node-to-client chain-sync server on a Unix socket that behaves like\n" +
			"cardano-node towards local clients. It serves a deterministic Conway-era chain (from --seed) with Marlowe\n" +
			"contract lifecycles on all five script versions, filler transactions and rollbacks, or a file of real\n" +
			"blocks (--replay). Its network magic is 42.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if socket == "" {
				return usageErrorf("--socket is required")
			}
			log, err := config.NewLogger(config.Log{Level: logLevel, Format: logFormat})
			if err != nil {
				return usageError{err}
			}
			defer func() { _ = log.Sync() }()
			ctx, stop := signalContext(cmd.Context(), cmd.ErrOrStderr())
			defer stop()
			dn, err := devnet.Start(ctx, devnet.RunConfig{
				SocketPath: socket, Generator: gen, Blocks: blocks, BlockRate: rate,
				Pregenerate: pregen, Replay: replay, Journal: journal, Logger: log,
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "devnet node on %s (network magic %d); follow it with:\n  marlowe-follower follow --node-socket %s --network-magic %d\n",
				socket, devnet.NetworkMagic, socket, devnet.NetworkMagic)
			writeActivity := func() error {
				if activity == "" {
					return nil
				}
				f, err := os.Create(activity)
				if err != nil {
					return err
				}
				if err := devnet.WriteActivity(f, dn.Activity()); err != nil {
					f.Close()
					return err
				}
				return f.Close()
			}
			select {
			case <-dn.Done():
				if err := dn.Err(); err != nil {
					_ = dn.Close()
					return err
				}
				if err := writeActivity(); err != nil {
					return err
				}
				log.Info("chain complete, serving it until stopped", zap.Uint64("blocks", dn.Store().Tip().BlockNo))
				<-ctx.Done()
			case <-ctx.Done():
				if err := writeActivity(); err != nil {
					return err
				}
			}
			return dn.Close()
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "socket", "", "Unix socket to serve on")
	f.Int64Var(&gen.Seed, "seed", def.Seed, "seed of the generated chain: the same seed gives the same chain")
	f.Uint64Var(&blocks, "blocks", 0, "stop after this many blocks and wait at the tip (0: never stop)")
	f.Float64Var(&rate, "block-rate", 20, "blocks per second (0: as fast as possible)")
	f.BoolVar(&pregen, "pregenerate", false, "generate all --blocks before serving (for benchmarks)")
	f.Float64Var(&gen.MarloweShare, "marlowe-share", def.MarloweShare, "fraction of blocks with Marlowe activity (0..1)")
	f.IntVar(&gen.MeanBlockSize, "block-size", def.MeanBlockSize, "mean block body size in bytes (sizes vary up to 90,112)")
	f.IntVar(&gen.RollbackEvery, "rollback-every", def.RollbackEvery, "mean blocks between rollbacks (0: none)")
	f.IntVar(&gen.MaxRollbackDepth, "rollback-depth", def.MaxRollbackDepth, "deepest rollback in blocks")
	f.BoolVar(&journal, "journal", false, "serve every client the chain's whole history, forks included, whatever its timing (reproducible runs)")
	f.StringVar(&replay, "replay", "", "serve the blocks of this file (hex, one block per line, optionally TYPE:HEX) instead of generating")
	f.StringVar(&activity, "activity", "", "write the generated Marlowe activity (the expected result) to this file as JSON lines")
	f.StringVar(&logLevel, "log-level", config.DefaultLogLevel, "log level")
	f.StringVar(&logFormat, "log-format", "console", "log format: json or console")
	return cmd
}
