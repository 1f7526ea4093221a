package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	ouroboros "github.com/blinklabs-io/gouroboros"
	gchainsync "github.com/blinklabs-io/gouroboros/protocol/chainsync"
	pcommon "github.com/blinklabs-io/gouroboros/protocol/common"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// blockObserver follows a live node from its tip, as the service's follower
// does, and notes when each block reached it: the node sends a new block
// to every follower at once, so this is when the service's follower got it
// too. Latencies measured from it include the service's work on the block
// (classifying, committing) besides the delivery to subscribers.
type blockObserver struct {
	conn *ouroboros.Connection

	mu       sync.Mutex
	arrivals map[uint64]time.Time
	err      error
}

// observeBlocks connects to the node at socket and follows it from its tip.
func observeBlocks(ctx context.Context, socket string) (*blockObserver, error) {
	o := &blockObserver{arrivals: map[uint64]time.Time{}}
	conn, err := ouroboros.NewConnection(
		ouroboros.WithNetworkMagic(devnet.NetworkMagic),
		ouroboros.WithChainSyncConfig(gchainsync.NewConfig(
			gchainsync.WithRollForwardRawFunc(func(_ gchainsync.CallbackContext, t uint, raw []byte, _ gchainsync.Tip) error {
				now := time.Now()
				b, err := block.DecodeHeader(block.Type(t), raw, block.Options{})
				o.mu.Lock()
				defer o.mu.Unlock()
				if err != nil {
					o.err = err
					return nil
				}
				o.arrivals[b.Header.BlockNo] = now
				return nil
			}),
			gchainsync.WithRollBackwardFunc(func(gchainsync.CallbackContext, pcommon.Point, gchainsync.Tip) error { return nil }),
		)),
	)
	if err != nil {
		return nil, err
	}
	go func() {
		for range conn.ErrorChan() {
		}
	}()
	if err := conn.Dial("unix", socket); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	o.conn = conn
	tip, err := conn.ChainSync().Client.GetCurrentTip()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("observer: the node's tip: %w", err)
	}
	if err := conn.ChainSync().Client.Sync([]pcommon.Point{tip.Point}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("observer: %w", err)
	}
	return o, nil
}

// arrival returns when block n reached the observer.
func (o *blockObserver) arrival(n uint64) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	t, ok := o.arrivals[n]
	return t, ok
}

// between returns the lowest and highest number of the blocks that
// arrived within [from, to], and how many did (0: none).
func (o *blockObserver) between(from, to time.Time) (lo, hi uint64, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for b, t := range o.arrivals {
		if t.Before(from) || t.After(to) {
			continue
		}
		if n == 0 || b < lo {
			lo = b
		}
		hi = max(hi, b)
		n++
	}
	return lo, hi, n
}

// close ends the observer's connection; it returns a header it could not
// decode, if any.
func (o *blockObserver) close() error {
	o.conn.Close()
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
