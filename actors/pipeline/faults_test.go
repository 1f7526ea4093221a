package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/contractstore/sqlcontracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/client"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
)

// crash makes the actor that receives it fail (the streaming server's
// actor receives nothing else).
type crash struct{}

// faults makes each child fail once, on the next message of its kind after
// it is armed, in its Receive (the message is lost, as with a bug).
type faults struct {
	armed sync.Map // actor type name -> *atomic.Bool
	fired atomic.Int64
}

// actorTypes are the children's actor types and the message each fails on.
var actorTypes = []struct {
	role    Role
	actor   string
	message string
}{
	{Follower, "*chainsync.follower", "*chainsync.chainMsg"},
	{Processor, "*processor.incarnation", "*handoff.ChainEvent"},
	{Store, "*history.writer", "*history.Step"},
	{Projection, "*contracts.projector", "*history.Delivery"},
	{Streamer, "*streaming.serverActor", "*pipeline.crash"},
	// A stream or connection actor that fails escalates: the pipeline
	// restarts the whole streaming server, as for its own actor.
	{Streamer, "*stream.Actor", "*history.Delivery"},
	// (A stream queues its batches into the connection's send queue
	// itself, and acks go from the reader to the stream: what every
	// connection actor is sure to receive is the heartbeat.)
	{Streamer, "*conn.Actor", "*wire.Heartbeat"},
}

func (f *faults) arm(actorType string) {
	b, _ := f.armed.LoadOrStore(actorType, &atomic.Bool{})
	b.(*atomic.Bool).Store(true)
}

func (f *faults) middleware(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		name := fmt.Sprintf("%T", c.Actor())
		for _, at := range actorTypes {
			if at.actor != name || fmt.Sprintf("%T", env.Message) != at.message {
				continue
			}
			if b, ok := f.armed.Load(name); ok && b.(*atomic.Bool).CompareAndSwap(true, false) {
				f.fired.Add(1)
				panic(fmt.Sprintf("injected fault in the %s", at.role))
			}
		}
		next(c, env)
	}
}

// runOutcome is what a run ends with.
type runOutcome struct {
	records    []record.Record
	contracts  []contractstore.Contract
	subscriber []record.Record
}

// runDevnet follows a devnet (journal mode: every run sees the same chain
// changes, forks and rollbacks included, whatever its timing) through a
// whole pipeline until it has the chain's tip everywhere: in the log, in
// the projection and at a WebSocket subscriber of a durable stream. With
// inject, each child fails once in turn while the chain grows.
func runDevnet(t *testing.T, inject bool) runOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	dir := t.TempDir()
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.MarloweShare, gcfg.MeanBlockSize = 11, 0.5, 2000
	gcfg.RollbackEvery, gcfg.MaxRollbackDepth = 20, 3
	const blocks = 500
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: filepath.Join(dir, "node.socket"), Generator: gcfg, Blocks: blocks,
		BlockRate: 150, Journal: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	hb := historytest.OpenSQLite(t, dir, devnet.NetworkMagic)
	defer hb.Close()
	// A follower restarted at a block the chain was rolled back to goes on
	// from where its committed log stands: before the fork or after its
	// rollback.
	dn.Journal().SetResume(func(p chain.Point) (chain.Point, bool) {
		log, err := readLog(ctx, hb)
		if err != nil {
			t.Errorf("the journal's resume: %v", err)
			return chain.Point{}, false
		}
		return historytest.RolledBackTo(log, p)
	})
	cb, err := sqlcontracts.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if err := cb.Init(ctx); err != nil {
		t.Fatal(err)
	}
	sb, err := sqlstreams.OpenSQLite(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	f := &faults{}
	scfg := streaming.DefaultConfig()
	scfg.Addr = "127.0.0.1:0"
	scfg.RetryDelay = 100 * time.Millisecond
	progress := &chainsync.Progress{}
	storeCfg := history.DefaultStoreConfig()
	storeCfg.BatchDelay = 20 * time.Millisecond
	p, err := Start(ctx, Config{
		Logger: log, History: hb, Store: storeCfg, Progress: progress,
		Slots:     chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis},
		Follower:  &chainsync.Config{SocketPath: filepath.Join(dir, "node.socket"), NetworkMagic: devnet.NetworkMagic, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
		Contracts: &contracts.Config{Backend: cb, RetryDelay: 20 * time.Millisecond},
		Streaming: &Streaming{Config: scfg, Deps: streaming.Deps{Streams: sb, Logger: log,
			Tip: func() chain.Tip { return progress.Snapshot().Tip }}},
		Middleware: []actor.ReceiverMiddleware{f.middleware},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Stop(time.Minute); err != nil {
			t.Error(err)
		}
	}()

	// The subscriber: a durable stream of every record, acknowledged
	// batch by batch; after a reconnect it skips what it saw.
	wc, err := client.New(client.Options{URL: "ws://" + p.StreamingAddr() + "/", MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	stream, err := wc.Subscribe(ctx, client.Request{Stream: "faults", Durable: true, Filter: protocol.Filter{All: true}, SkipSeen: true})
	if err != nil {
		t.Fatal(err)
	}
	var (
		subMu sync.Mutex
		sub   []record.Record
	)
	subDone := make(chan error, 1)
	go func() {
		for {
			b, err := stream.Next(ctx)
			if err != nil {
				subDone <- err
				return
			}
			subMu.Lock()
			sub = append(sub, b.Records...)
			subMu.Unlock()
			if err := stream.Ack(ctx, b); err != nil {
				subDone <- err
				return
			}
		}
	}()
	lastSeen := func() int64 {
		subMu.Lock()
		defer subMu.Unlock()
		if len(sub) == 0 {
			return 0
		}
		return sub[len(sub)-1].Seq
	}

	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: %v (pipeline: %v)", what, ctx.Err(), p.Err())
			case <-p.Done():
				t.Fatalf("%s: the pipeline stopped: %v", what, p.Err())
			case err := <-subDone:
				t.Fatalf("%s: the subscriber: %v", what, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if inject {
		// One child after the other, each while the chain grows: the
		// next is armed once the previous one has been restarted.
		for i, at := range actorTypes {
			at := at
			wait(fmt.Sprintf("block %d", 60*(i+1)), func() bool { return progress.Snapshot().Point.BlockNo >= uint64(60*(i+1)) })
			before := p.Restarts(at.role)
			f.arm(at.actor)
			if at.message == "*pipeline.crash" {
				p.System.Root.Send(p.Child(Streamer), &crash{})
			}
			wait("the "+string(at.role)+" restarted", func() bool { return p.Restarts(at.role) > before })
		}
		if n := f.fired.Load(); n != int64(len(actorTypes)) {
			t.Fatalf("%d faults fired, want %d", n, len(actorTypes))
		}
	}
	select {
	case <-dn.Done():
	case <-ctx.Done():
		t.Fatal("the devnet did not finish")
	}
	tip := dn.Store().Tip()
	wait("the log at the tip", func() bool {
		h := p.Store.Stats().Committed.Load()
		return h != nil && h.Point() == tip.Point
	})
	head := p.Handle.Head()
	wait("the projection at the head", func() bool { return p.Projection.Applied().Seq >= head })
	wait("the subscriber at the head", func() bool { return lastSeen() >= head })
	if inject {
		for _, at := range actorTypes {
			if p.Restarts(at.role) == 0 {
				t.Errorf("the %s was never restarted", at.role)
			}
		}
	}

	var out runOutcome
	if out.records, err = readLog(ctx, hb); err != nil {
		t.Fatal(err)
	}
	for after := int64(0); ; {
		page, err := cb.ContractList(ctx, &contractstore.ContractListParams{After: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Contracts {
			full, _, err := cb.ContractGet(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			out.contracts = append(out.contracts, *full)
		}
		if !page.More {
			break
		}
		after = page.Contracts[len(page.Contracts)-1].Seq
	}
	subMu.Lock()
	out.subscriber = append(out.subscriber, sub...)
	subMu.Unlock()
	return out
}

// TestFaultInjection fails each child of the pipeline in turn (follower,
// processor, history store, projection, streaming server) while it
// follows a devnet, and checks that the log, the projection and a
// WebSocket subscriber end exactly as in an uninterrupted run.
func TestFaultInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("follows a devnet twice")
	}
	want := runDevnet(t, false)
	got := runDevnet(t, true)
	if len(want.records) == 0 || len(want.contracts) == 0 {
		t.Fatalf("the uninterrupted run has %d records, %d contracts", len(want.records), len(want.contracts))
	}
	markers := historytest.RollbackMarkers(want.records)
	if markers == 0 {
		t.Fatal("the chain rolled nothing back that the log shows")
	}
	if !reflect.DeepEqual(got.records, want.records) {
		t.Errorf("the log differs: %d records, want %d; first difference: %s", len(got.records), len(want.records),
			firstDifference(got.records, want.records))
	}
	if !reflect.DeepEqual(got.contracts, want.contracts) {
		t.Errorf("the projection differs: %d contracts, want %d", len(got.contracts), len(want.contracts))
	}
	// What the subscriber received, as received (a record's rolledBackBy
	// is whatever it was when it was sent).
	strip := func(rs []record.Record) []record.Record {
		out := make([]record.Record, len(rs))
		for i, r := range rs {
			r.RolledBackBy = nil
			out[i] = r
		}
		return out
	}
	if !reflect.DeepEqual(strip(got.subscriber), strip(want.subscriber)) || len(want.subscriber) != len(want.records) {
		t.Errorf("the subscriber differs: %d records, want %d (the log has %d)", len(got.subscriber), len(want.subscriber), len(want.records))
	}
}

// readLog reads the whole log.
func readLog(ctx context.Context, hb history.Backend) ([]record.Record, error) {
	var out []record.Record
	for after := int64(0); ; {
		recs, err := hb.RecordList(ctx, &record.RecordListParams{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		if len(recs) < 1000 {
			return out, nil
		}
		after = recs[len(recs)-1].Seq
	}
}

func firstDifference(got, want []record.Record) string {
	for i := range min(len(got), len(want)) {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			return fmt.Sprintf("at %d: %s, want %s", i, g, w)
		}
	}
	return "one is a prefix of the other"
}
