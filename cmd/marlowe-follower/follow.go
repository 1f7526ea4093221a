package main

import (
	"bufio"
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/progress"
)

func newFollowCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "follow --node-socket PATH --network-magic N [--from origin|tip|SLOT.HASH]",
		Short: "Follow a node and print classified Marlowe events as JSON lines (nothing is stored)",
		Long: "Follow a node's chain and print its Marlowe activity as JSON lines on stdout: one line per block\n" +
			"with Marlowe transactions, per rollback and per block that cannot be decoded. Progress goes to the log\n" +
			"on stderr. Nothing is stored: contracts created before the start point are not known.",
		Args: exactArgs(0),
		RunE: withConfig(func(cmd *cobra.Command, l *config.Loaded) error {
			cfg := l.Config
			if cfg.Node.Socket == "" {
				return usageErrorf("--node-socket (MARLOWE_RT_NODE_SOCKET) is required")
			}
			start, err := chainsync.ParseStart(cfg.Node.Start)
			if err != nil {
				return usageError{fmt.Errorf("--from: %w", err)}
			}
			ctx, log, done, err := startCommand(cmd, l)
			if err != nil {
				return err
			}
			defer done()

			out := bufio.NewWriter(cmd.OutOrStdout())
			sink := chainsync.SinkFunc(func(_ context.Context, ev classify.Event) error {
				if rf, ok := ev.(*classify.RollForward); ok && !all && len(rf.Txs) == 0 && len(rf.Failures) == 0 {
					return nil
				}
				js, err := chainsync.MarshalEvent(ev)
				if err != nil {
					return err
				}
				out.Write(js)
				out.WriteByte('\n')
				return out.Flush()
			})
			p, err := pipeline.Start(ctx, pipeline.Config{Logger: log, Sink: sink, Follower: &chainsync.Config{
				SocketPath: cfg.Node.Socket, NetworkMagic: cfg.Node.NetworkMagic, Start: start,
				MinBackoff: cfg.Node.MinBackoff, MaxBackoff: cfg.Node.MaxBackoff,
			}})
			if err != nil {
				return usageError{err}
			}
			go progress.Report(ctx, log, p.Progress, cfg.Progress.Period)
			select {
			case <-ctx.Done():
			case <-p.Done():
			}
			if err := p.Stop(config.DefaultShutdownGrace); err != nil {
				return err
			}
			return p.Err()
		}),
	}
	config.RegisterFlags(cmd.Flags(), "node", "log", "progress")
	cmd.Flags().BoolVar(&all, "all", false, "print every block, not only those with Marlowe activity")
	return cmd
}
