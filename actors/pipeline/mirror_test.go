package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// pollingSource is a commit source without notices (its Listen waits for
// the end): the mirror learns of commits by polling only.
type pollingSource struct{ b history.Backend }

func (s pollingSource) Listen(ctx context.Context, _ func(uint32), _ func(history.CommitNotice, error)) error {
	<-ctx.Done()
	return ctx.Err()
}

func (s pollingSource) CommitProgress(ctx context.Context) (history.CommitProgress, error) {
	cp, err := s.b.CheckpointGet(ctx)
	if err != nil {
		return history.CommitProgress{}, err
	}
	p := history.CommitProgress{Head: cp.Head, Tip: cp.Tip}
	if len(cp.Breadcrumbs) > 0 {
		p.Committed = cp.Breadcrumbs[0]
	}
	return p, nil
}

// TestMirrorRestartsUnderTheRule: a reader's pipeline runs the mirror as
// its history store; when the mirror fails it is restarted from where it
// left off, and a subscription on the reader waits for the new one and
// receives every record once.
func TestMirrorRestartsUnderTheRule(t *testing.T) {
	ctx := context.Background()
	hb := devnetHistory(t)
	// The writer, in an actor system of its own.
	cfg := history.DefaultStoreConfig()
	cfg.NearTip = 1 << 20 // every block committed at once
	st, err := history.NewStore(ctx, hb, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	wsys := NewSystem(zap.NewNop())
	wpid := wsys.Root.Spawn(st.Props())
	t.Cleanup(func() {
		_ = wsys.Root.PoisonFuture(wpid).Wait()
		wsys.Shutdown()
	})
	var pending atomic.Int64
	var n uint64
	send := func(blocks int) {
		for range blocks {
			n++
			var hash chain.Hash32
			hash[0], hash[1] = byte(n), byte(n>>8)
			h := chain.BlockHeader{Slot: n, BlockNo: n, Hash: hash}
			payload, _ := json.Marshal(map[string]uint64{"n": n})
			pending.Add(1)
			wsys.Root.Send(wpid, &history.Step{Release: func() { pending.Add(-1) }, Forward: &history.ForwardStep{
				Header: h, Tip: chain.Tip{Point: h.Point(), BlockNo: n},
				Records: []record.Record{{Kind: record.KindPayoutWithdrawn, Block: h, Payload: payload}}}})
		}
		waitfor.Until(t, time.Minute, "the writer's commits", func() bool { return pending.Load() == 0 })
	}

	// The reader's pipeline; its mirror fails once, at a wake-up after
	// the test arms it (with a live subscriber).
	var armed atomic.Bool
	var failed atomic.Bool
	failOnce := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if fmt.Sprintf("%T", env.Message) == "*history.mirrorWake" && armed.Load() && failed.CompareAndSwap(false, true) {
				panic("the mirror fails")
			}
			next(c, env)
		}
	}
	p, err := Start(ctx, Config{Logger: zaptest.NewLogger(t), History: hb, MaxRestarts: 3, RestartWindow: time.Hour,
		Mirror:     &Mirror{Source: pollingSource{hb}, Config: history.MirrorConfig{DownPollInterval: 10 * time.Millisecond}},
		Middleware: []actor.ReceiverMiddleware{failOnce}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Minute) })
	if p.Mirror == nil || p.Store != p.Mirror.Store() || p.Child(Follower) != nil || p.Child(Processor) != nil {
		t.Fatal("a reader's pipeline runs the mirror alone")
	}
	sub := p.Handle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip})
	defer sub.Close()
	// The subscriber reads all along, so that it is live (waiting in
	// Next) when the mirror fails.
	var got []int64
	var lives int
	done := make(chan error, 1)
	go func() {
		for len(got) < 50 {
			nctx, cancel := context.WithTimeout(ctx, time.Minute)
			b, err := sub.Next(nctx)
			cancel()
			if err != nil {
				done <- err
				return
			}
			if b.Live {
				lives++
			}
			for _, r := range b.Records {
				got = append(got, r.Seq)
			}
		}
		done <- nil
	}()
	for i := range 5 {
		send(10)
		if i == 1 {
			armed.Store(true)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("the subscription on the reader: %v", err)
	}
	if lives == 0 {
		t.Fatal("no batch came live")
	}
	if !failed.Load() || p.Restarts(Store) != 1 {
		t.Fatalf("failed %v, %d restarts of the mirror", failed.Load(), p.Restarts(Store))
	}
	for i, seq := range got {
		if seq != int64(i)+1 {
			t.Fatalf("the subscription got %v", got)
		}
	}
	if len(got) != 50 {
		t.Fatalf("the subscription got %d records, want 50", len(got))
	}
}
