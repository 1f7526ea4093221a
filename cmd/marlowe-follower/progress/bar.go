package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/marlowe-follower/follower/chainsync"
)

// WantBar reports whether a progress bar goes to stderr: mode is "always",
// "never" or "auto" (when stderr is a terminal).
func WantBar(mode string) bool {
	switch mode {
	case "always":
		return true
	case "never":
		return false
	}
	return term.IsTerminal(int(os.Stderr.Fd()))
}

// ShowBar draws the sync progress (followed slot over the node's
// tip slot) on w until ctx is done, then clears it. It shows the rate in
// blocks per second and the time left.
func ShowBar(ctx context.Context, w io.Writer, p *chainsync.Progress) {
	const scale = 10000 // the bar counts ten-thousandths of the chain
	bar := progressbar.NewOptions(scale,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("syncing"),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(true),
	)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	last, lastAt := p.Snapshot(), time.Now()
	for {
		select {
		case <-ctx.Done():
			_ = bar.Clear()
			return
		case now := <-tick.C:
			s := p.Snapshot()
			rate := float64(s.Blocks-last.Blocks) / now.Sub(lastAt).Seconds()
			last, lastAt = s, now
			state := "syncing"
			if !s.Connected {
				state = "waiting for the node"
			} else if s.BlocksBehind() == 0 {
				state = "at the tip"
			}
			bar.Describe(fmt.Sprintf("%s: slot %d of %d, block %d, %.0f blocks/s, %d Marlowe txs",
				state, s.Point.Slot, s.Tip.Point.Slot, s.Point.BlockNo, rate, s.MarloweTxs))
			_ = bar.Set(int(s.Fraction() * scale))
		}
	}
}
