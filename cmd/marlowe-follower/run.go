package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/progress"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/service"
)

func newRunCommand() *cobra.Command {
	var (
		useDevnet   bool
		devnetRate  float64
		devnetSeed  int64
		devnetShare float64
		devnetStop  uint64
		journal     bool
		devnetClock string
	)
	cmd := &cobra.Command{
		Use:   "run [--devnet]",
		Short: "Run the service: follow the node, store the Marlowe history, serve queries and streams",
		Long: "Run the service: follow the node, store the Marlowe history, serve queries and streams.\n\n" +
			"With --devnet it starts the built-in devnet node in the same process and keeps the history in an\n" +
			"embedded store in a temporary directory (unless --data-dir is given): one command, nothing to set up.\n" +
			"With --data-dir (or a database URL) the devnet's chain is kept in the data directory too\n" +
			"(devnet.chain), so a restart serves the same chain and the service resumes where it stopped.",
		Args: exactArgs(0),
		RunE: withConfig(func(cmd *cobra.Command, l *config.Loaded) error {
			cfg := l.Config
			ctx, log, done, err := startCommand(cmd, l)
			if err != nil {
				return err
			}
			defer done()

			devnetChain := ""
			if useDevnet && cfg.Role == config.RoleReader {
				return usageErrorf("--devnet runs a node to follow; role reader follows none: run the devnet with `marlowe-follower devnet` and a writer on it")
			}
			if useDevnet {
				opts := runDevnetOptions{rate: devnetRate, seed: devnetSeed, share: devnetShare, blocks: devnetStop, journal: journal, clock: devnetClock}
				// The node outlives the signal: it stops after the service
				// (cleanup, deferred), or the follower would see it go first
				// and warn that it lost the node.
				_, chainFile, cleanup, err := startRunDevnet(context.WithoutCancel(ctx), l, &cfg, opts, log)
				if err != nil {
					return err
				}
				defer cleanup()
				devnetChain = chainFile
			} else if cfg.Node.Socket == "" && cfg.Role != config.RoleReader {
				return usageErrorf("node.socket (MARLOWE_RT_NODE_SOCKET, --node-socket) is required; or try --devnet")
			}

			svc, err := service.Start(ctx, &cfg, log, service.Options{Version: version})
			if err != nil && ctx.Err() != nil {
				// Asked to stop while starting (a service manager stopping
				// it early): what start-up opened is closed, and stopping
				// on request is no failure.
				log.Info("stopped during start-up", zap.NamedError("interrupted", err))
				return nil
			}
			if err != nil {
				return err
			}
			// A service that failed for good while it started is not
			// announced as running.
			select {
			case err := <-svc.Fatal():
				return stopOnFatal(svc, log, err)
			default:
			}
			printEndpoints(cmd, &cfg, svc, useDevnet, devnetChain)
			return serveUntilStopped(ctx, cmd, &cfg, svc, log)
		}),
	}
	config.RegisterFlags(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&useDevnet, "devnet", false, "run the built-in devnet node in the same process (network magic 42) with an embedded store")
	f.Float64Var(&devnetRate, "devnet-block-rate", 2, "with --devnet: blocks per second")
	f.Int64Var(&devnetSeed, "devnet-seed", 1, "with --devnet: seed of the generated chain")
	f.Float64Var(&devnetShare, "devnet-marlowe-share", 0.3, "with --devnet: fraction of blocks with Marlowe activity")
	f.Uint64Var(&devnetStop, "devnet-blocks", 0, "with --devnet: stop the chain at this many blocks and wait at its tip, a chain at rest (0: grow for ever)")
	f.BoolVar(&journal, "devnet-journal", false, "with --devnet: serve the chain's whole history, forks included (reproducible runs)")
	f.StringVar(&devnetClock, "devnet-clock", "", "with --devnet: wall (the default: blocks at the time they are made, contract deadlines minutes ahead; "+
		"at --devnet-block-rate 0 a chain ending before now) or traces (the reference traces' exact times, from 1969); a kept chain keeps its clock")
	return cmd
}

// serveUntilStopped reports the service's progress until it is asked to
// stop (then it stops it, within the shutdown grace) or fails for good.
func serveUntilStopped(ctx context.Context, cmd *cobra.Command, cfg *config.Config, svc *service.Service, log *zap.Logger) error {
	switch {
	case cfg.Role == config.RoleReader:
		// A reader follows no node: nothing to report progress of
		// (its /status shows the writer's and its own).
	case progress.WantBar(cfg.Progress.Bar):
		go progress.ShowBar(ctx, cmd.ErrOrStderr(), svc.Progress())
	default:
		go progress.Report(ctx, log, svc.Progress(), cfg.Progress.Period)
	}
	select {
	case <-ctx.Done():
	case err := <-svc.Fatal():
		return stopOnFatal(svc, log, err)
	}
	log.Info("shutting down")
	if err := svc.Stop(config.DefaultShutdownGrace); err != nil {
		log.Error("shutdown", zap.Error(err))
		return err
	}
	log.Info("stopped")
	return nil
}

// stopOnFatal stops a service that cannot go on and returns why, said so
// that the last line printed contradicts the banner ("marlowe-follower:
// stopped: ...").
func stopOnFatal(svc interface{ Stop(time.Duration) error }, log *zap.Logger, err error) error {
	log.Error("stopping: the service cannot go on", zap.Error(err))
	if serr := svc.Stop(config.DefaultShutdownGrace); serr != nil {
		log.Error("shutdown", zap.Error(serr))
	}
	return fmt.Errorf("stopped: the service cannot go on: %w", err)
}

// printEndpoints says where to point clients.
func printEndpoints(cmd *cobra.Command, cfg *config.Config, svc *service.Service, devnetMode bool, devnetChain string) {
	w := cmd.ErrOrStderr()
	fmt.Fprintln(w, "marlowe-follower is running.")
	if addr := svc.QueryAddr(); addr != "" {
		base := "http://" + localAddr(addr)
		if cfg.Query.UI {
			fmt.Fprintf(w, "  explorer:      %s/ (open it in a browser: contracts, their steps, sync status, live)\n", base)
		}
		fmt.Fprintf(w, "  query API:     curl %s/contracts\n", base)
		fmt.Fprintf(w, "                 curl %s/status\n", base)
		fmt.Fprintf(w, "  described at:  %s/openapi.json (OpenAPI), metrics at %s/metrics\n", base, base)
		fmt.Fprintf(w, "  events:        curl -N '%s/events?all=true&from=origin' (server-sent events)\n", base)
	}
	if addr := svc.StreamingAddr(); addr != "" {
		fmt.Fprintf(w, "  WebSocket:     ws://%s/ (try: marlowe-follower tail --all --url ws://%s/)\n", localAddr(addr), localAddr(addr))
	}
	if devnetMode {
		fmt.Fprintf(w, "  devnet node:   %s (network magic %d)\n", cfg.Node.Socket, devnet.NetworkMagic)
		if devnetChain != "" {
			fmt.Fprintf(w, "  devnet chain:  %s (kept: a restart continues it)\n", devnetChain)
		}
	}
	if cfg.Store.DatabaseURL == "" {
		fmt.Fprintf(w, "  history store: %s\n", filepath.Join(cfg.Store.DataDir, "history.sqlite"))
	} else {
		fmt.Fprintln(w, "  history store: PostgreSQL")
	}
	fmt.Fprintln(w, "Stop it with Ctrl-C.")
}

// localAddr turns a listening address into one to connect to.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || host == "0.0.0.0" || host == "::" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}
