package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// timedBackend notes when each commit returned, by its newest seq.
type timedBackend struct {
	history.Backend
	mu sync.Mutex
	at map[int64]time.Time
}

func (b *timedBackend) Commit(ctx context.Context, p *history.CommitParams) error {
	err := b.Backend.Commit(ctx, p)
	if err == nil && len(p.Records) > 0 {
		now := time.Now()
		b.mu.Lock()
		b.at[p.Records[len(p.Records)-1].Seq] = now
		b.mu.Unlock()
	}
	return err
}

// receiver reads a subscription and notes when each record arrived.
type receiver struct {
	mu  sync.Mutex
	at  map[int64]time.Time
	got chan int64
}

func receive(ctx context.Context, sub *history.Subscription) *receiver {
	r := &receiver{at: map[int64]time.Time{}, got: make(chan int64, 1024)}
	go func() {
		defer sub.Close()
		for {
			b, err := sub.Next(ctx)
			if err != nil {
				return
			}
			now := time.Now()
			for _, rec := range b.Records {
				r.mu.Lock()
				r.at[rec.Seq] = now
				r.mu.Unlock()
				r.got <- rec.Seq
			}
		}
	}()
	return r
}

// BenchmarkCommitToClient measures how long a committed record takes to
// reach a live subscriber in the writer's process (the store's fan-out
// right after the commit returns) and in a reader process (the commit's
// notice, then a read of the new records by the Mirror), from the moment
// the writer's commit returned. One record per block, each block
// committed at once; both subscribers live. Reported: p50 and p99 of each
// in microseconds and the reader's p50 over the writer's.
//
//	go test -run '^$' -bench CommitToClient -benchtime 2000x ./history/pgstore/
func BenchmarkCommitToClient(b *testing.B) {
	db := openTest(b)
	ctx := context.Background()
	if err := db.Init(ctx, &history.InitParams{NetworkMagic: 42}); err != nil {
		b.Fatal(err)
	}
	timed := &timedBackend{Backend: db.Store, at: map[int64]time.Time{}}
	cfg := history.DefaultStoreConfig()
	st, err := history.NewStore(ctx, timed, cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	wsys := newSystem()
	wpid := wsys.Root.Spawn(st.Props())
	whandle := history.NewHandle(st, wsys, wpid)
	read := db.open(b)
	m, err := history.NewMirror(ctx, read, read, history.MirrorConfig{PollInterval: time.Hour}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	rsys := newSystem()
	rpid := rsys.Root.Spawn(m.Props())
	rhandle := history.NewHandle(m.Store(), rsys, rpid)
	defer func() {
		_ = rsys.Root.PoisonFuture(rpid).Wait()
		m.Store().Retire()
		rsys.Shutdown()
		_ = read.Close()
		_ = wsys.Root.PoisonFuture(wpid).Wait()
		wsys.Shutdown()
		_ = db.Close()
	}()
	checkFor(b, time.Minute, func() error {
		if !m.Stats().Listening.Load() {
			return errors.New("the mirror does not listen")
		}
		return nil
	})
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	inWriter := receive(sctx, whandle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip}))
	inReader := receive(sctx, rhandle.Subscribe(record.Filter{}, record.From{Kind: record.FromTip}))

	id := chain.TxOutRef{Index: 1}
	id.TxID[0] = 0xc1
	step := func(n uint64) *history.Step {
		var hash chain.Hash32
		hash[0], hash[1], hash[2] = byte(n), byte(n>>8), byte(n>>16)
		h := chain.BlockHeader{Slot: n * 20, BlockNo: n, Hash: hash}
		payload, _ := json.Marshal(map[string]uint64{"n": n})
		fs := &history.ForwardStep{Header: h, Tip: chain.Tip{Point: h.Point(), BlockNo: n},
			Records: []record.Record{{Kind: record.KindInputsApplied, Block: h, Contract: &id, Payload: payload}}}
		if n == 1 {
			// The contract exists, as every contract of an inputs record
			// does: the store's filter index has it.
			fs.Records[0].Kind = record.KindContractCreated
			fs.Creations = []history.Creation{{Contract: record.ContractIndex{ID: id, Version: "v5", Block: h}}}
		}
		return &history.Step{Forward: fs}
	}
	// Warm up: both subscribers live.
	var n uint64
	for range 20 {
		n++
		wsys.Root.Send(wpid, step(n))
		<-inWriter.got
		<-inReader.got
	}
	first := st.Stats().Head.Load() + 1
	b.ResetTimer()
	for range b.N {
		n++
		wsys.Root.Send(wpid, step(n))
		<-inWriter.got
		<-inReader.got
	}
	b.StopTimer()
	last := st.Stats().Head.Load()
	var w, r []time.Duration
	timed.mu.Lock()
	inWriter.mu.Lock()
	inReader.mu.Lock()
	for seq := first; seq <= last; seq++ {
		c := timed.at[seq]
		w = append(w, max(0, inWriter.at[seq].Sub(c)))
		r = append(r, max(0, inReader.at[seq].Sub(c)))
	}
	inReader.mu.Unlock()
	inWriter.mu.Unlock()
	timed.mu.Unlock()
	pct := func(ds []time.Duration, p float64) float64 {
		slices.Sort(ds)
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Nanoseconds()) / 1000
	}
	wp50, rp50 := pct(w, 0.5), pct(r, 0.5)
	b.ReportMetric(wp50, "writer-p50-µs")
	b.ReportMetric(pct(w, 0.99), "writer-p99-µs")
	b.ReportMetric(rp50, "reader-p50-µs")
	b.ReportMetric(pct(r, 0.99), "reader-p99-µs")
	if wp50 > 0 {
		b.ReportMetric(rp50/wp50, "reader/writer-p50")
	}
}
