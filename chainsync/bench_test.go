package chainsync

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// benchChain pregenerates a devnet chain once per share and process.
var benchChains sync.Map // share -> *devnet.ChainStore

func benchBlocks() uint64 {
	if s := os.Getenv("MARLOWE_BENCH_BLOCKS"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n
		}
	}
	return 20_000
}

func benchStore(b *testing.B, share float64) *devnet.ChainStore {
	if s, ok := benchChains.Load(share); ok {
		return s.(*devnet.ChainStore)
	}
	cfg := devnet.DefaultGeneratorConfig()
	cfg.MarloweShare, cfg.RollbackEvery, cfg.MeanBlockSize = share, 0, 7700
	g, err := devnet.NewGenerator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	store := devnet.NewChainStore()
	for store.Tip().BlockNo < benchBlocks() {
		op, err := g.Next()
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Append(*op.Block); err != nil {
			b.Fatal(err)
		}
	}
	benchChains.Store(share, store)
	return store
}

// serve starts a node for the store and returns its socket.
func serve(b *testing.B, store *devnet.ChainStore) string {
	socket := filepath.Join(b.TempDir(), "node.socket")
	node, err := devnet.New(devnet.Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic, Store: store})
	if err != nil {
		b.Fatal(err)
	}
	if err := node.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = node.Close() })
	return socket
}

// rawSync syncs the whole chain (devnet.RawSync) and calls handle with
// every block.
func rawSync(b *testing.B, socket string, tipNo uint64, handle func(uint, []byte) error) {
	if err := devnet.RawSync(context.Background(), socket, DefaultPipelineLimit, tipNo, 10*time.Minute, handle); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFollow measures following the same devnet socket serving the same
// pregenerated chain as fast as possible: (a) a plain gouroboros client
// discarding the raw blocks (the socket limit), (b) the same client decoding
// every block with gouroboros' ledger, (c) our follower actor with its
// classifier. One iteration syncs the whole chain (MARLOWE_BENCH_BLOCKS,
// default 20,000 blocks); compare blocks/s between the cases of one run.
//
//	go test -run '^$' -bench BenchmarkFollow -benchtime 1x ./chainsync/
func BenchmarkFollow(b *testing.B) {
	for _, share := range []float64{0, 0.01, 0.1} {
		store := benchStore(b, share)
		tip := store.Tip().BlockNo
		bytes := store.RawSize()
		socket := serve(b, store)
		report := func(b *testing.B, start time.Time) {
			secs := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(float64(tip)/secs, "blocks/s")
			b.ReportMetric(float64(bytes)/secs/1e6, "MB/s")
			b.ReportMetric(0, "ns/op")
		}
		name := fmt.Sprintf("marlowe=%g%%", share*100)
		b.Run(name+"/a-raw-discard", func(b *testing.B) {
			start := time.Now()
			for range b.N {
				rawSync(b, socket, tip, func(uint, []byte) error { return nil })
			}
			report(b, start)
		})
		b.Run(name+"/b-gouroboros-decode", func(b *testing.B) {
			start := time.Now()
			for range b.N {
				rawSync(b, socket, tip, devnet.LedgerDecode)
			}
			report(b, start)
		})
		b.Run(name+"/c-follower-classifier", func(b *testing.B) {
			start := time.Now()
			for range b.N {
				followOnce(b, socket, tip)
			}
			report(b, start)
		})
	}
}

// followOnce runs the follower actor to the tip with a discarding sink.
func followOnce(b *testing.B, socket string, tip uint64) {
	done := make(chan struct{})
	var once sync.Once
	sink := SinkFunc(func(_ context.Context, ev classify.Event) error {
		if rf, ok := ev.(*classify.RollForward); ok && rf.Header.BlockNo == tip {
			once.Do(func() { close(done) })
		}
		return nil
	})
	f, err := NewFollower(Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic}, zap.NewNop(), nil, classify.New(classify.Options{}), sink, nil)
	if err != nil {
		b.Fatal(err)
	}
	system := newSystem()
	defer system.Shutdown()
	pid := system.Root.Spawn(f.Props())
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatal("follow timed out")
	}
	_ = system.Root.PoisonFuture(pid).Wait()
}
