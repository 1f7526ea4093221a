// Package progress shows the follower's sync progress: log lines, or a
// bar on a terminal.
package progress

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync"
)

// Report logs the follower's position every period while it is
// behind the node's tip or disconnected: slot, tip, percent, blocks/s, ETA.
func Report(ctx context.Context, log *zap.Logger, p *chainsync.Progress, period time.Duration) {
	if period <= 0 {
		return
	}
	log = log.Named("progress")
	tick := time.NewTicker(period)
	defer tick.Stop()
	last, lastAt := p.Snapshot(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			s := p.Snapshot()
			rate := float64(s.Blocks-last.Blocks) / now.Sub(lastAt).Seconds()
			last, lastAt = s, now
			behind := s.BlocksBehind()
			if behind == 0 && s.Connected {
				continue
			}
			fields := []zap.Field{
				zap.Uint64("slot", s.Point.Slot), zap.Uint64("tipSlot", s.Tip.Point.Slot),
				zap.String("percent", fmt.Sprintf("%.2f", 100*s.Fraction())), zap.Float64("blocksPerSecond", rate),
				zap.Uint64("blocksBehind", behind), zap.Uint64("marloweTxs", s.MarloweTxs), zap.Bool("connected", s.Connected),
			}
			if rate > 0 {
				fields = append(fields, zap.Duration("eta", time.Duration(float64(behind)/rate*float64(time.Second)).Round(time.Second)))
			}
			if !s.Connected && s.LastError != "" {
				fields = append(fields, zap.String("lastError", s.LastError))
			}
			log.Info("syncing", fields...)
		}
	}
}
