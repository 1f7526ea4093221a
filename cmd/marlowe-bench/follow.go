package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	actorpipe "github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

// The follow cases, each run against the same devnet node.
const (
	caseRaw        = "a"
	caseDecode     = "b"
	caseClassifier = "c"
	caseSQLite     = "d"
	casePostgres   = "e"
)

// followCases are the cases in order, with their labels.
var followCases = []struct{ ID, Label string }{
	{caseRaw, "(a) raw gouroboros client, discarding (socket limit)"},
	{caseDecode, "(b) gouroboros, decoding every block"},
	{caseClassifier, "(c) our follower + classifier, discarding sink"},
	{caseSQLite, "(d) full pipeline, SQLite"},
	{casePostgres, "(e) full pipeline, PostgreSQL"},
}

// followParams is a follow job: sync the chain of the node at Socket (Tip
// blocks) with one case.
type followParams struct {
	Case   string    `json:"case"`
	Socket string    `json:"socket"`
	Tip    uint64    `json:"tip"`
	Store  storeSpec `json:"store"`
}

// followResult is what a follow job measured in its worker process.
type followResult struct {
	Seconds float64 `json:"seconds"`
	CPU     float64 `json:"cpuSeconds"`
	RSSPeak int64   `json:"rssPeakBytes"`
	RSSEnd  int64   `json:"rssEndBytes"`
	// PostgresCPU is the CPU time of the PostgreSQL server processes that
	// served the run's database (not part of CPU).
	PostgresCPU float64 `json:"postgresCpuSeconds,omitempty"`
	Records     uint64  `json:"records,omitempty"`
	StoreBytes  int64   `json:"storeBytes,omitempty"`
}

// runFollowJob syncs the chain from origin to tip with one case and
// measures wall time, CPU time and RSS of this process.
func runFollowJob(ctx context.Context, p followParams) (any, error) {
	res := &followResult{}
	m := startMeter("")
	var err error
	switch p.Case {
	case caseRaw:
		err = devnet.RawSync(ctx, p.Socket, chainsync.DefaultPipelineLimit, p.Tip, 30*time.Minute, func(uint, []byte) error { return nil })
	case caseDecode:
		err = devnet.RawSync(ctx, p.Socket, chainsync.DefaultPipelineLimit, p.Tip, 30*time.Minute, devnet.LedgerDecode)
	case caseClassifier:
		err = classifierSync(ctx, p.Socket, p.Tip)
	case caseSQLite, casePostgres:
		err = serviceSync(ctx, p, res)
	default:
		err = fmt.Errorf("unknown case %q", p.Case)
	}
	if err != nil {
		return nil, err
	}
	if res.Seconds == 0 {
		res.took(m)
	}
	return res, nil
}

// took sets the run's wall and CPU time (from m's start) and this
// process's memory now.
func (res *followResult) took(m meter) {
	res.Seconds, res.CPU = m.elapsed()
	mem := readMem()
	res.RSSEnd, res.RSSPeak = mem.RSS, mem.Peak
}

// classifierSync runs our follower actor with its classifier to the tip
// (in a pipeline whose sink actor discards the events: they go through
// the mailboxes and credits as in the service).
func classifierSync(ctx context.Context, socket string, tip uint64) error {
	done := make(chan struct{})
	var once sync.Once
	p, err := startClassifier(ctx, socket, func(blockNo uint64) {
		if blockNo == tip {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop(config.DefaultShutdownGrace) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Minute):
		return errors.New("follow timed out")
	}
}

// startClassifier starts our follower actor with its classifier on the
// devnet node at socket, in a pipeline whose sink actor tells onBlock the
// number of each block rolled forward and discards the events.
func startClassifier(ctx context.Context, socket string, onBlock func(blockNo uint64)) (*actorpipe.Pipeline, error) {
	sink := chainsync.SinkFunc(func(_ context.Context, ev classify.Event) error {
		if rf, ok := ev.(*classify.RollForward); ok {
			onBlock(rf.Header.BlockNo)
		}
		return nil
	})
	return actorpipe.Start(ctx, actorpipe.Config{Logger: zap.NewNop(), Sink: sink,
		Follower: &chainsync.Config{SocketPath: socket, NetworkMagic: devnet.NetworkMagic}})
}

// serviceSync runs the whole service (service.Start, as the binary's run
// command does) until it has committed the chain and projected it, and
// measures before stopping it.
func serviceSync(ctx context.Context, p followParams, res *followResult) error {
	m := startMeter(p.Store.DBName)
	svc, err := startService(ctx, p.Socket, p.Store)
	if err != nil {
		return err
	}
	werr := waitSynced(ctx, svc, p.Tip, "case "+p.Case, 30*time.Minute)
	res.took(m)
	res.PostgresCPU = m.postgresCPU()
	res.Records = svc.Handle().Stats().RecordsCommitted.Load()
	writeHeapProfile("")
	serr := svc.Stop(config.DefaultShutdownGrace)
	res.StoreBytes = p.Store.size(ctx)
	return errors.Join(werr, serr)
}
