package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	actorpipe "github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/service"
)

// chainGrowthParams is a chain growth job: the full pipeline follows a long
// chain from origin, observed at checkpoints and sampled at a fixed period.
type chainGrowthParams struct {
	// Subject is subjectFollower, or empty for the whole service on Store.
	Subject     string    `json:"subject,omitempty"`
	Socket      string    `json:"socket"`
	Tip         uint64    `json:"tip"`
	Bytes       int64     `json:"bytes"`
	Store       storeSpec `json:"store"`
	Checkpoints []uint64  `json:"checkpoints"`
	// SampleSeconds is the sampling period.
	SampleSeconds float64 `json:"sampleSeconds"`
}

// subjectFollower names chain growth runs of the follower and classifier
// alone.
const subjectFollower = "follower"

// GrowthPoint is the state of a chain growth run when it had committed
// Blocks blocks.
type GrowthPoint struct {
	Blocks     uint64  `json:"blocks"`
	Records    uint64  `json:"records"`
	Seconds    float64 `json:"seconds"`
	CPU        float64 `json:"cpuSeconds"`
	RSS        int64   `json:"rssBytes"`
	RSSPeak    int64   `json:"rssPeakBytes"`
	StoreBytes int64   `json:"storeBytes"`
	// BlocksPerSec and CPUPer1k are over the window since the previous
	// checkpoint (or the start).
	BlocksPerSec float64 `json:"blocksPerSecond"`
	CPUPer1k     float64 `json:"cpuSecondsPer1000Blocks"`
}

// ChainGrowth is a chain growth run.
type ChainGrowth struct {
	Backend string        `json:"backend"`
	Blocks  uint64        `json:"blocks"`
	Bytes   int64         `json:"bytes"`
	Points  []GrowthPoint `json:"checkpoints"`
	Samples []Sample      `json:"samples"`
	// FirstTenthRate and LastTenthRate are blocks/s over the first and the
	// last tenth of the chain; their ratio near 1 means the cost per block
	// does not grow with the chain (total time linear in its length).
	FirstTenthRate float64 `json:"firstTenthBlocksPerSecond"`
	LastTenthRate  float64 `json:"lastTenthBlocksPerSecond"`
	// RSS over the second half of the run (after warm-up): flat memory
	// means these are close.
	RSSMinSecondHalf int64 `json:"rssMinSecondHalfBytes"`
	RSSMaxSecondHalf int64 `json:"rssMaxSecondHalfBytes"`
}

// growthSubject is what a chain growth run follows the chain with.
type growthSubject interface {
	// counts returns the blocks and records done so far.
	counts() (blocks, records uint64)
	// synced reports whether the whole chain is done.
	synced() bool
	stop() error
}

// serviceSubject is the whole service: blocks count once committed.
type serviceSubject struct {
	svc *service.Service
	tip uint64
}

// counts implements growthSubject.
func (s *serviceSubject) counts() (uint64, uint64) {
	st := s.svc.Handle().Stats()
	return st.BlocksCommitted.Load(), st.RecordsCommitted.Load()
}

// synced implements growthSubject.
func (s *serviceSubject) synced() bool { return synced(s.svc, s.tip) }

// stop implements growthSubject.
func (s *serviceSubject) stop() error { return s.svc.Stop(config.DefaultShutdownGrace) }

// followerSubject is the follower actor and classifier with a sink that
// counts the blocks and discards the events (case (c) of the follow cases).
type followerSubject struct {
	pipe   *actorpipe.Pipeline
	blocks atomic.Uint64
	tip    uint64
}

// startFollowerSubject starts the follower on the node at socket.
func startFollowerSubject(socket string, tip uint64) (*followerSubject, error) {
	s := &followerSubject{tip: tip}
	p, err := startClassifier(context.Background(), socket, func(uint64) { s.blocks.Add(1) })
	if err != nil {
		return nil, err
	}
	s.pipe = p
	return s, nil
}

// counts implements growthSubject.
func (s *followerSubject) counts() (uint64, uint64) { return s.blocks.Load(), 0 }

// synced implements growthSubject.
func (s *followerSubject) synced() bool { return s.blocks.Load() >= s.tip }

// stop implements growthSubject.
func (s *followerSubject) stop() error { return s.pipe.Stop(config.DefaultShutdownGrace) }

// runChainGrowthJob follows the chain with the follower alone or the whole
// service, observing it at checkpoints and sampling it.
// watchGrowth follows sub until it is synced, adding a point to res at
// each of the parameters' checkpoints.
func watchGrowth(ctx context.Context, sub growthSubject, prm *chainGrowthParams, res *ChainGrowth, start time.Time, cpu0 float64,
	storeBytes *atomic.Int64) error {
	next := 0
	var last GrowthPoint
	for {
		blocks, records := sub.counts()
		for next < len(prm.Checkpoints) && blocks >= prm.Checkpoints[next] {
			m := readMem()
			pt := GrowthPoint{Blocks: blocks, Records: records, Seconds: time.Since(start).Seconds(),
				CPU: cpuSeconds() - cpu0, RSS: m.RSS, RSSPeak: m.Peak, StoreBytes: storeBytes.Load()}
			if db := float64(pt.Blocks - last.Blocks); db > 0 {
				pt.BlocksPerSec = db / (pt.Seconds - last.Seconds)
				pt.CPUPer1k = (pt.CPU - last.CPU) / db * 1000
			}
			res.Points = append(res.Points, pt)
			progress("  %s: %d blocks in %.1fs, %.0f blocks/s since the last checkpoint, RSS %.0f MB", res.Backend, pt.Blocks,
				pt.Seconds, pt.BlocksPerSec, float64(pt.RSS)/1e6)
			last = pt
			next++
			writeHeapProfile(fmt.Sprintf(".%d", pt.Blocks))
		}
		if sub.synced() {
			return nil
		}
		if time.Since(start) > 2*time.Hour {
			return errors.New("chain growth: not synced after 2 hours")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func runChainGrowthJob(ctx context.Context, prm chainGrowthParams) (any, error) {
	name := prm.Store.backendName()
	if prm.Subject == subjectFollower {
		name = subjectFollower
	}
	res := &ChainGrowth{Backend: name, Blocks: prm.Tip, Bytes: prm.Bytes}
	var cur atomic.Pointer[growthSubject]
	var storeBytes atomic.Int64
	period := time.Duration(prm.SampleSeconds * float64(time.Second))
	smp := startSampler(period, func(s *Sample) {
		if sub := cur.Load(); sub != nil {
			s.Blocks, s.Records = (*sub).counts()
		}
		s.StoreBytes = storeBytes.Load()
	})
	// The store's size is read apart from the samples: it can take a while.
	sizeDone := make(chan struct{})
	sizeStop := make(chan struct{})
	go func() {
		defer close(sizeDone)
		for prm.Subject != subjectFollower {
			storeBytes.Store(prm.Store.size(ctx))
			select {
			case <-sizeStop:
				return
			case <-time.After(period):
			}
		}
	}()
	start, cpu0 := smp.start, smp.cpu0
	var sub growthSubject
	var err error
	if prm.Subject == subjectFollower {
		sub, err = startFollowerSubject(prm.Socket, prm.Tip)
	} else {
		var svc *service.Service
		if svc, err = startService(ctx, prm.Socket, prm.Store); err == nil {
			sub = &serviceSubject{svc: svc, tip: prm.Tip}
		}
	}
	if err != nil {
		close(sizeStop)
		smp.finish()
		return nil, err
	}
	cur.Store(&sub)
	werr := watchGrowth(ctx, sub, &prm, res, start, cpu0, &storeBytes)
	close(sizeStop)
	<-sizeDone
	if prm.Subject != subjectFollower {
		storeBytes.Store(prm.Store.size(ctx))
	}
	res.Samples = smp.finish()
	writeHeapProfile("")
	if err := sub.stop(); err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return nil, werr
	}
	res.FirstTenthRate, res.LastTenthRate = tenthRates(res.Samples, prm.Tip)
	res.RSSMinSecondHalf, res.RSSMaxSecondHalf = secondHalfRSS(res.Samples, prm.Tip)
	return res, nil
}

// tenthRates returns blocks/s over the first and the last tenth of the
// chain: from the start to the first sample at or past a tenth, and from
// the last sample at or before nine tenths to the first at the tip.
func tenthRates(samples []Sample, tip uint64) (first, last float64) {
	rate := func(a, b Sample) float64 {
		if b.Seconds <= a.Seconds || b.Blocks <= a.Blocks {
			return 0
		}
		return float64(b.Blocks-a.Blocks) / (b.Seconds - a.Seconds)
	}
	var from, end Sample
	haveFirst, haveEnd := false, false
	for _, s := range samples {
		if !haveFirst && s.Blocks >= tip/10 {
			first, haveFirst = rate(Sample{}, s), true
		}
		if s.Blocks <= tip-tip/10 {
			from = s
		}
		if !haveEnd && s.Blocks >= tip {
			end, haveEnd = s, true
		}
	}
	if haveEnd {
		last = rate(from, end)
	}
	return first, last
}

// secondHalfRSS returns the smallest and largest RSS sampled once half the
// chain was committed.
func secondHalfRSS(samples []Sample, tip uint64) (lo, hi int64) {
	for _, s := range samples {
		if s.Blocks < tip/2 || s.RSS == 0 {
			continue
		}
		if lo == 0 || s.RSS < lo {
			lo = s.RSS
		}
		hi = max(hi, s.RSS)
	}
	return lo, hi
}
