package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// The fanout section measures the streaming server as an operator runs it:
// the marlowe-follower binary (`run`, embedded store) following a devnet
// node, many WebSocket subscribers in a worker process, the server observed
// from outside (/proc, /metrics). Its cases are the targets of issue 21:
//
//   - the storm: subscribers from `0` of a log at once, each acking every
//     batch: the server's peak RSS above its RSS before, whether each got
//     every record once and in order, and the aggregate deliveries/s
//     against one subscriber's catch-up rate on the same server;
//   - at the tip: subscribers following a node that makes blocks at a
//     fixed rate, raw and Go clients in turn (raw, Go, Go, raw), then many
//     raw ones: block-to-client latency, the server's RSS and CPU, the
//     client's CPU, and whether the service kept committing at the node's
//     rate.

// stormParams is a storm job.
type stormParams struct {
	StreamURL   string  `json:"streamURL"`
	QueryURL    string  `json:"queryURL"`
	Pid         int     `json:"pid"`
	Head        int64   `json:"head"`
	Subscribers int     `json:"subscribers"`
	Limit       float64 `json:"limitSeconds"`
	Settle      float64 `json:"settleSeconds"`
}

// StormResult is the storm case.
type StormResult struct {
	Subscribers int   `json:"subscribers"`
	Records     int64 `json:"records"`
	// SingleRecordsPerSec is one raw subscriber's catch-up rate over the
	// whole log on the same server, alone, just before the storm.
	SingleRecordsPerSec float64 `json:"singleRecordsPerSecond"`
	// Seconds runs from the subscribes to the last subscriber caught up
	// (or to the limit).
	Seconds          float64 `json:"seconds"`
	LimitSeconds     float64 `json:"limitSeconds"`
	CaughtUp         int     `json:"caughtUp"`
	Deliveries       int64   `json:"deliveries"`
	DeliveriesPerSec float64 `json:"deliveriesPerSecond"`
	// VsSingle is DeliveriesPerSec / SingleRecordsPerSec.
	VsSingle float64 `json:"vsSingle"`
	// FirstDone and MedianDone are when the first and the median
	// subscriber had caught up, in seconds from the subscribes.
	FirstDone  float64 `json:"firstDoneSeconds"`
	MedianDone float64 `json:"medianDoneSeconds"`
	// Disorder counts records that were not the one after the previous
	// (a gap, a repeat or a step back).
	Disorder int64 `json:"disorder"`
	// RSSBeforeMiB is the server's RSS before the storm; PeakAboveMiB its
	// peak (VmHWM, reset before the storm) above it.
	RSSBeforeMiB  float64 `json:"rssBeforeMiB"`
	PeakMiB       float64 `json:"peakMiB"`
	PeakAboveMiB  float64 `json:"peakAboveMiB"`
	RSSEndMiB     float64 `json:"rssEndMiB"`
	RSSSettledMiB float64 `json:"rssSettledMiB"`
	SettleSeconds float64 `json:"settleSeconds"`
	// Server and client CPU per delivery, in µs.
	ServerCPUus float64 `json:"serverCpuMicrosPerDelivery"`
	ClientCPUus float64 `json:"clientCpuMicrosPerDelivery"`
	Failed      int     `json:"failed"`
	FirstError  string  `json:"firstError,omitempty"`
}

// runStormJob measures one subscriber's catch-up, then the storm.
func runStormJob(ctx context.Context, prm stormParams) (any, error) {
	res := &StormResult{Subscribers: prm.Subscribers, Records: prm.Head, LimitSeconds: prm.Limit, SettleSeconds: prm.Settle}
	var err error
	if res.SingleRecordsPerSec, err = singleCatchUp(ctx, prm); err != nil {
		return nil, err
	}
	if err := waitConnections(ctx, prm.QueryURL, 0, time.Minute); err != nil {
		return nil, err
	}

	tallies := make([]tally, prm.Subscribers)
	subs, err := dialAll(ctx, clientRaw, prm.StreamURL, tallies, prm.Head, 64)
	if err != nil {
		return nil, err
	}
	defer closeAll(subs)
	reset := resetPeakRSS(prm.Pid) == nil
	before := procMem(prm.Pid).RSS
	rss := sampleRSS(prm.Pid, 100*time.Millisecond)
	cpuServer, cpuClient := procCPUSeconds(prm.Pid), cpuSeconds()
	progress("  storm: %d subscribers from 0 of %d records at once", len(subs), prm.Head)
	start := time.Now()
	limit := time.After(time.Duration(prm.Limit * float64(time.Second)))
	// Every subscribe at once; each subscriber then reads until it has the
	// head, or until the limit closes it.
	subscribeErrs := make([]error, len(subs))
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		_ = inParallel(len(subs), len(subs), func(i int) error {
			subscribeErrs[i] = subs[i].subscribe(ctx, "0")
			return nil
		})
		for _, s := range subs {
			s.wait()
		}
	}()
	select {
	case <-finished:
	case <-limit:
		closeAll(subs)
		<-finished
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	end := time.Now()
	peak := rss.finish()
	if reset {
		peak = max(peak, procMem(prm.Pid).Peak)
	}
	serverCPU, clientCPU := procCPUSeconds(prm.Pid)-cpuServer, cpuSeconds()-cpuClient
	res.count(tallies, subscribeErrs, start, end)
	res.ServerCPUus = serverCPU / float64(max(res.Deliveries, 1)) * 1e6
	res.ClientCPUus = clientCPU / float64(max(res.Deliveries, 1)) * 1e6
	res.RSSBeforeMiB, res.PeakMiB = mib(before), mib(peak)
	res.PeakAboveMiB = mib(peak - before)
	res.RSSEndMiB = mib(procMem(prm.Pid).RSS)
	select {
	case <-time.After(time.Duration(prm.Settle * float64(time.Second))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	res.RSSSettledMiB = mib(procMem(prm.Pid).RSS)
	progress("  storm: %d of %d caught up in %.1fs, %.0f deliveries/s (%.2fx one subscriber), peak RSS %.0f MiB above %.0f MiB, %d out of order",
		res.CaughtUp, res.Subscribers, res.Seconds, res.DeliveriesPerSec, res.VsSingle, res.PeakAboveMiB, res.RSSBeforeMiB, res.Disorder)
	return res, nil
}

// singleCatchUp is one raw subscriber's catch-up rate over the whole log,
// in records per second.
func singleCatchUp(ctx context.Context, prm stormParams) (float64, error) {
	var t tally
	single, err := dialSubscriber(ctx, clientRaw, prm.StreamURL, &t, prm.Head)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := single.subscribe(ctx, "0"); err != nil {
		single.close()
		return 0, err
	}
	single.wait()
	secs := time.Since(start).Seconds()
	single.close()
	if t.err != nil || t.last != prm.Head || t.disorder != 0 {
		return 0, fmt.Errorf("the single subscriber: seq %d of %d, %d out of order, %v", t.last, prm.Head, t.disorder, t.err)
	}
	rate := float64(t.count) / secs
	progress("  storm: one subscriber caught up with %d records in %.2fs (%.0f records/s)", t.count, secs, rate)
	return rate, nil
}

// count adds up the storm's subscribers: deliveries, disorder, who caught
// up and when, the first failure; end is when the storm stopped (its
// duration runs to the last subscriber done when all caught up).
func (res *StormResult) count(tallies []tally, subscribeErrs []error, start, end time.Time) {
	var done []float64
	for i := range tallies {
		t := &tallies[i]
		res.Deliveries += t.count
		res.Disorder += t.disorder
		if t.done.IsZero() {
			res.Failed++
			if res.FirstError == "" {
				res.FirstError = fmt.Sprintf("subscriber %d at seq %d of %d: %v", i, t.last, res.Records, errors.Join(subscribeErrs[i], t.err))
			}
			continue
		}
		res.CaughtUp++
		done = append(done, t.done.Sub(start).Seconds())
	}
	if res.CaughtUp == len(tallies) {
		end = start
		for i := range tallies {
			if tallies[i].done.After(end) {
				end = tallies[i].done
			}
		}
	}
	res.Seconds = end.Sub(start).Seconds()
	res.DeliveriesPerSec = float64(res.Deliveries) / res.Seconds
	res.VsSingle = ratio(res.DeliveriesPerSec, res.SingleRecordsPerSec)
	slices.Sort(done)
	if len(done) > 0 {
		res.FirstDone, res.MedianDone = done[0], done[len(done)/2]
	}
}

// mib converts bytes to MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// tipParams is a job of subscribers at the tip.
type tipParams struct {
	StreamURL   string  `json:"streamURL"`
	QueryURL    string  `json:"queryURL"`
	Socket      string  `json:"socket"`
	Pid         int     `json:"pid"`
	Client      string  `json:"client"`
	Subscribers int     `json:"subscribers"`
	Seconds     float64 `json:"seconds"`
	Drain       float64 `json:"drainSeconds"`
	SetupLimit  float64 `json:"setupLimitSeconds"`
}

// TipRow is a phase of subscribers at the tip.
type TipRow struct {
	Client      string `json:"client"`
	Subscribers int    `json:"subscribers"`
	// SetupSeconds is how long connecting and subscribing them took.
	SetupSeconds float64 `json:"setupSeconds"`
	// BehindAtStart is how many blocks the service's commits were behind
	// the node when the phase began (the previous phase may have left it
	// behind).
	BehindAtStart uint64  `json:"behindAtStart"`
	Seconds       float64 `json:"seconds"`
	// NodeBlocks is how many blocks the node made in the window, Committed
	// how many the service committed meanwhile.
	NodeBlocks int     `json:"nodeBlocks"`
	Committed  int     `json:"committed"`
	CommitKept float64 `json:"commitRateKept"`
	// Records are the records the service committed in the window;
	// Expected is Records x Subscribers, Delivered how many of those
	// arrived by the end of the drain.
	Records   int64 `json:"records"`
	Expected  int64 `json:"expected"`
	Delivered int64 `json:"delivered"`
	Disorder  int64 `json:"disorder"`
	// Latency from the block reaching the node's followers to the
	// subscriber having read its record, over every delivered record of
	// the window, in ms.
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	Samples int     `json:"samples"`
	// CommitP50Ms and CommitP99Ms are the service's commit times in the
	// window (marlowe_store_commit_seconds: its bucket bounds).
	CommitP50Ms float64 `json:"commitP50Ms"`
	CommitP99Ms float64 `json:"commitP99Ms"`
	// CPU per delivery, in µs, over the window and the drain.
	ServerCPUus float64 `json:"serverCpuMicrosPerDelivery"`
	ClientCPUus float64 `json:"clientCpuMicrosPerDelivery"`
	// RSS: the server's before the subscribers came and its largest in the
	// window (sampled); the clients' process peak.
	ServerRSSBeforeMiB float64 `json:"serverRssBeforeMiB"`
	ServerRSSMiB       float64 `json:"serverRssMiB"`
	ClientRSSMiB       float64 `json:"clientRssMiB"`
	Failed             int     `json:"failed"`
	FirstError         string  `json:"firstError,omitempty"`
}

// runTipJob measures subscribers of one kind at the tip.
func runTipJob(ctx context.Context, prm tipParams) (any, error) {
	obs, err := observeBlocks(ctx, prm.Socket)
	if err != nil {
		return nil, err
	}
	defer obs.close()
	row := &TipRow{Client: prm.Client, Subscribers: prm.Subscribers, Seconds: prm.Seconds}
	row.ServerRSSBeforeMiB = mib(procMem(prm.Pid).RSS)
	setup := time.Now()
	tallies := make([]tally, prm.Subscribers)
	for i := range tallies {
		tallies[i].keep = true
	}
	// A service that cannot take the subscribers within the limit fails
	// the phase, not the run.
	sctx, cancel := context.WithTimeout(ctx, time.Duration(prm.SetupLimit*float64(time.Second)))
	defer cancel()
	subs, err := dialAll(sctx, prm.Client, prm.StreamURL, tallies, 0, 64)
	if err == nil {
		defer closeAll(subs)
		err = subscribeAll(sctx, subs, "tip", 64)
	}
	if err != nil {
		return failedPhase(row, fmt.Sprintf("setup failed after %.0fs", time.Since(setup).Seconds()), err), nil
	}
	row.SetupSeconds = time.Since(setup).Seconds()
	// The window: the records the service commits during it, seqs
	// (s0, s1]; the latency of each from its block's arrival.
	m0, st0, err := observe(ctx, prm.QueryURL)
	if err != nil {
		return failedPhase(row, "the service did not answer", err), nil
	}
	rss := sampleRSS(prm.Pid, 200*time.Millisecond)
	cpuServer, cpuClient := procCPUSeconds(prm.Pid), cpuSeconds()
	t0 := time.Now()
	select {
	case <-time.After(time.Duration(prm.Seconds * float64(time.Second))):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	t1 := time.Now()
	m1, st1, err := observe(ctx, prm.QueryURL)
	if err != nil {
		return failedPhase(row, "the service did not answer", err), nil
	}
	row.ServerRSSMiB = mib(rss.finish())
	_, _, row.NodeBlocks = obs.between(t0, t1)
	row.commits(m0, m1)
	s0, s1 := st0.HistorySeq, st1.HistorySeq
	// The drain: the window's records still on their way.
	if err := drain(ctx, tallies, s1, time.Duration(prm.Drain*float64(time.Second))); err != nil {
		return nil, err
	}
	t2 := time.Now()
	serverCPU, clientCPU := procCPUSeconds(prm.Pid)-cpuServer, cpuSeconds()-cpuClient
	writeHeapProfile("") // the allocations of the window (with --cpuprofile-dir)
	closeAll(subs)
	row.ClientRSSMiB = mib(readMem().Peak)
	duringRun := row.deliveries(tallies, obs, s0, s1, t0, t2)
	if err := obs.close(); err != nil {
		return nil, fmt.Errorf("observer: %w", err)
	}
	row.ServerCPUus = serverCPU / float64(max(duringRun, 1)) * 1e6
	row.ClientCPUus = clientCPU / float64(max(duringRun, 1)) * 1e6
	progress("  tip, %d %s subscribers: p50 %.1f ms, p99 %.1f ms, %d of %d delivered, commits %d of %d blocks, server RSS %.0f MiB, CPU/delivery server %.1f µs, client %.1f µs",
		row.Subscribers, row.Client, row.P50Ms, row.P99Ms, row.Delivered, row.Expected, row.Committed, row.NodeBlocks,
		row.ServerRSSMiB, row.ServerCPUus, row.ClientCPUus)
	return row, nil
}

// commits fills in the service's commits over the window, from its
// metrics at the start (m0) and the end (m1).
func (row *TipRow) commits(m0, m1 metricsText) {
	row.Committed = int(m1.value("marlowe_history_blocks_committed_total") - m0.value("marlowe_history_blocks_committed_total"))
	row.CommitKept = ratio(float64(row.Committed), float64(row.NodeBlocks))
	row.CommitP50Ms = histogramQuantile(m0.buckets("marlowe_store_commit_seconds"), m1.buckets("marlowe_store_commit_seconds"), 0.5)
	row.CommitP99Ms = histogramQuantile(m0.buckets("marlowe_store_commit_seconds"), m1.buckets("marlowe_store_commit_seconds"), 0.99)
}

// drain waits, for up to limit, until every subscriber has the record seq.
func drain(ctx context.Context, tallies []tally, seq int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && !allHave(tallies, seq) {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// deliveries adds up what the subscribers read: the window's records
// (seqs (s0, s1]) delivered and their latencies from their blocks'
// arrival, disorder, failures. It returns how many records of any seq
// arrived from t0 to t2 (the CPU's denominator).
func (row *TipRow) deliveries(tallies []tally, obs *blockObserver, s0, s1 int64, t0, t2 time.Time) int64 {
	var lat latencies
	var duringRun int64
	for i := range tallies {
		t := &tallies[i]
		row.Disorder += t.disorder
		if t.err != nil {
			row.Failed++
			if row.FirstError == "" {
				row.FirstError = fmt.Sprintf("subscriber %d: %v", i, t.err)
			}
		}
		for _, r := range t.receipts {
			if r.at >= t0.UnixNano() && r.at <= t2.UnixNano() {
				duringRun++
			}
			if r.seq <= s0 || r.seq > s1 {
				continue
			}
			row.Delivered++
			if at, ok := obs.arrival(r.block); ok {
				lat.add(time.Duration(r.at - at.UnixNano()))
			}
		}
	}
	row.Records = s1 - s0
	row.Expected = row.Records * int64(row.Subscribers)
	row.P50Ms, row.P99Ms, row.Samples = lat.quantiles()
	row.MaxMs = lat.maxMs()
	return duringRun
}

// failedPhase marks a phase that could not be measured: a service that
// cannot take the subscribers, or answer, fails the phase, not the run.
func failedPhase(row *TipRow, what string, err error) *TipRow {
	row.Failed, row.FirstError = row.Subscribers, fmt.Sprintf("%s: %v", what, err)
	progress("  tip, %d %s subscribers: %s", row.Subscribers, row.Client, row.FirstError)
	return row
}

// observe reads the service's metrics and status.
func observe(ctx context.Context, queryURL string) (metricsText, followerStatus, error) {
	m, err := scrape(ctx, queryURL)
	if err != nil {
		return m, followerStatus{}, err
	}
	st, err := fetchStatus(ctx, queryURL)
	return m, st, err
}

// allHave reports whether every subscriber has the record seq.
func allHave(tallies []tally, seq int64) bool {
	for i := range tallies {
		if tallies[i].seq.Load() < seq {
			return false
		}
	}
	return true
}

// fanout runs the section: the storm, then the phases at the tip.
func (s *suite) fanout(ctx context.Context) error {
	if s.opts.wantsFanout(fanoutStorm) {
		if err := s.fanoutStorm(ctx); err != nil {
			return err
		}
	}
	if len(s.tipPhases()) == 0 {
		return nil
	}
	return s.fanoutTip(ctx)
}

// followerOn starts a devnet node of spec and the service binary following
// it in a fresh directory; stop stops both.
func (s *suite) followerOn(ctx context.Context, spec devnetSpec, label string) (d *devnetProc, p *followerProc, stop func(), err error) {
	if d, err = s.devnet(ctx, spec); err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp(s.tmp, "service-"+label+"-")
	if err == nil {
		p, err = startFollowerProc(ctx, s.bin, dir, d.Socket)
	}
	if err != nil {
		d.Stop()
		return nil, nil, nil, err
	}
	if !slices.Contains(s.res.Services, p.Command) {
		s.res.Services = append(s.res.Services, p.Command)
	}
	return d, p, func() { p.Stop(); d.Stop() }, nil
}

func (s *suite) fanoutStorm(ctx context.Context) error {
	d, svc, stop, err := s.followerOn(ctx, devnetSpec{Blocks: s.sz.StormBlocks, Share: 1, BlockSize: s.sz.MarloweBlockSize, Seed: 1, Pregenerate: true}, "storm")
	if err != nil {
		return err
	}
	defer stop()
	st, err := svc.waitCommitted(ctx, d.Tip, 10*time.Minute)
	if err != nil {
		return err
	}
	progress("  storm: the service committed %d blocks, %d records", st.Committed.BlockNo, st.HistorySeq)
	var res StormResult
	if err := s.work(ctx, "fanoutStorm", "storm", stormParams{StreamURL: svc.StreamURL, QueryURL: svc.QueryURL, Pid: svc.Pid(),
		Head: st.HistorySeq, Subscribers: s.sz.StormSubscribers, Limit: s.sz.StormLimitSeconds, Settle: s.sz.StormSettleSeconds}, &res); err != nil {
		return err
	}
	s.res.Storm = &res
	return nil
}

// tipPhases are the phases at the tip, in order: the raw and the Go clients
// in turn (raw, Go, Go, raw: a drift of the machine's load over the run
// weighs on both alike), then the large number of raw ones.
// Only the cases asked for (--fanout) are given.
func (s *suite) tipPhases() []tipParams {
	n, big := s.sz.TipSubscribers, s.sz.TipManySubscribers
	var phases []tipParams
	if s.opts.wantsFanout(fanoutClients) {
		phases = append(phases, tipParams{Client: clientRaw, Subscribers: n}, tipParams{Client: clientGo, Subscribers: n},
			tipParams{Client: clientGo, Subscribers: n}, tipParams{Client: clientRaw, Subscribers: n})
	}
	if s.opts.wantsFanout(fanoutMany) {
		phases = append(phases, tipParams{Client: clientRaw, Subscribers: big})
	}
	return phases
}

func (s *suite) fanoutTip(ctx context.Context) error {
	live, svc, stop, err := s.followerOn(ctx, devnetSpec{Share: 1, BlockSize: s.sz.MarloweBlockSize, Seed: 2, Rate: s.sz.TipRate}, "tip")
	if err != nil {
		return err
	}
	defer stop()
	if err := svc.waitAtTip(ctx, 2*time.Minute); err != nil {
		return err
	}
	for _, ph := range s.tipPhases() {
		if err := waitConnections(ctx, svc.QueryURL, 0, time.Minute); err != nil {
			return err
		}
		// The previous phase may have left the service behind: it gets a
		// minute to catch up; how far behind it still is goes in the row.
		behind := svc.waitCaughtUp(ctx, time.Minute)
		ph.StreamURL, ph.QueryURL, ph.Socket, ph.Pid = svc.StreamURL, svc.QueryURL, live.Socket, svc.Pid()
		ph.Seconds, ph.Drain, ph.SetupLimit = s.sz.TipSeconds, s.sz.TipDrainSeconds, s.sz.TipSetupSeconds
		var row TipRow
		if err := s.work(ctx, "fanoutTip", fmt.Sprintf("%s-%d", ph.Client, ph.Subscribers), ph, &row); err != nil {
			return err
		}
		row.BehindAtStart = behind
		s.res.Tip = append(s.res.Tip, row)
	}
	return nil
}
