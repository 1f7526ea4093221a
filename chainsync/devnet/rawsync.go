package devnet

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	"github.com/blinklabs-io/gouroboros/ledger"
	gchainsync "github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"
)

// RawSync syncs the chain of the devnet node at socket from origin with a
// plain gouroboros node-to-client client (chain-sync pipeline limit
// pipeline), calling handle with every block, until tip blocks came or
// limit passed: the baseline of the follow benchmarks, what the socket and
// the client library deliver to a consumer that does nothing.
func RawSync(ctx context.Context, socket string, pipeline int, tip uint64, limit time.Duration, handle func(era uint, raw []byte) error) error {
	done := make(chan struct{})
	var n atomic.Uint64
	var failed atomic.Value
	conn, err := ouroboros.NewConnection(
		ouroboros.WithNetworkMagic(NetworkMagic),
		ouroboros.WithChainSyncConfig(gchainsync.NewConfig(
			gchainsync.WithPipelineLimit(pipeline),
			gchainsync.WithRollForwardRawFunc(func(_ gchainsync.CallbackContext, t uint, raw []byte, _ gchainsync.Tip) error {
				if err := handle(t, raw); err != nil {
					failed.Store(err)
					return err
				}
				if n.Add(1) == tip {
					close(done)
				}
				return nil
			}),
			gchainsync.WithRollBackwardFunc(func(gchainsync.CallbackContext, pcommon.Point, gchainsync.Tip) error { return nil }),
		)),
	)
	if err != nil {
		return err
	}
	go func() {
		for range conn.ErrorChan() {
		}
	}()
	if err := conn.Dial("unix", socket); err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.ChainSync().Client.Sync([]pcommon.Point{pcommon.NewPointOrigin()}); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(limit):
		return fmt.Errorf("sync timed out after %d blocks (%v)", n.Load(), failed.Load())
	}
}

// LedgerDecode is the other baseline of the follow benchmarks, a RawSync
// handler: gouroboros' ledger decodes the block and hashes each of its
// transactions, what getting the follower's data out of it takes.
func LedgerDecode(era uint, raw []byte) error {
	blk, err := ledger.NewBlockFromCbor(era, raw)
	if err != nil {
		return err
	}
	for _, tx := range blk.Transactions() {
		_ = tx.Hash()
	}
	return nil
}
