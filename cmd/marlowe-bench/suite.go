package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Options are the suite's settings.
type Options struct {
	Quick       bool
	Long        bool
	Out         string
	Markdown    string
	PlotDir     string
	FollowerBin string
	PostgresURL string
	Sections    []string
	// FanoutCases are the fanout section's cases to run (empty: all).
	FanoutCases []string
	// TipSubscribers, when above 0, is the number of subscribers of each
	// raw and Go phase at the tip (the clients case) instead of the run's.
	TipSubscribers int
	// ProfileDir, when set, receives a CPU profile of every worker.
	ProfileDir string
	// FromJSON, when set, is an earlier result to write out again.
	FromJSON string
	// Command is the command line, for the report.
	Command string
}

// The suite's sections.
const (
	sectionFollow    = "follow"
	sectionStreaming = "streaming"
	sectionFanout    = "fanout"
	sectionContracts = "contracts"
	sectionGrowth    = "growth"
)

var allSections = []string{sectionFollow, sectionStreaming, sectionFanout, sectionContracts, sectionGrowth}

// The fanout section's cases.
const (
	// fanoutStorm: subscribers from 0 of a log at once.
	fanoutStorm = "storm"
	// fanoutClients: raw and Go clients at the tip in turn (raw, Go, Go,
	// raw).
	fanoutClients = "clients"
	// fanoutMany: the large number of raw subscribers at the tip.
	fanoutMany = "many"
)

var allFanoutCases = []string{fanoutStorm, fanoutClients, fanoutMany}

// wantsFanout reports whether a case of the fanout section runs.
func (o *Options) wantsFanout(c string) bool {
	return len(o.FanoutCases) == 0 || slices.Contains(o.FanoutCases, c)
}

// wants reports whether a section runs.
func (o *Options) wants(section string) bool {
	return len(o.Sections) == 0 || slices.Contains(o.Sections, section)
}

// sizes are the sizes of a run.
type sizes struct {
	FollowBlocks     uint64    `json:"followBlocks"`
	FollowShares     []float64 `json:"followShares"`
	BlockSize        int       `json:"blockSize"`
	CatchUpBlocks    uint64    `json:"catchUpBlocks"`
	LiveBlockRate    float64   `json:"liveBlockRate"`
	Subscribers      []int     `json:"subscribers"`
	LatencySeconds   float64   `json:"latencySeconds"`
	ContractBlocks   []uint64  `json:"contractBlocks"`
	QueryClients     []int     `json:"queryClients"`
	QuerySeconds     float64   `json:"querySeconds"`
	GrowthBlocks     uint64    `json:"growthBlocks"`
	GrowthPoints     []uint64  `json:"growthCheckpoints"`
	GrowthBackends   []string  `json:"growthBackends"`
	SampleSeconds    float64   `json:"sampleSeconds"`
	MarloweBlockSize int       `json:"marloweChainBlockSize"`
	// The fanout section: the storm's chain (about 20,000 records), its
	// subscribers, how long they may take and how long after it the
	// server's RSS is read again; the tip's block rate, subscribers (the
	// raw and Go phases, then the many raw ones), window and drain.
	StormBlocks        uint64  `json:"stormBlocks"`
	StormSubscribers   int     `json:"stormSubscribers"`
	StormLimitSeconds  float64 `json:"stormLimitSeconds"`
	StormSettleSeconds float64 `json:"stormSettleSeconds"`
	TipRate            float64 `json:"tipBlockRate"`
	TipSubscribers     int     `json:"tipSubscribers"`
	TipManySubscribers int     `json:"tipManySubscribers"`
	TipSeconds         float64 `json:"tipSeconds"`
	TipDrainSeconds    float64 `json:"tipDrainSeconds"`
	TipSetupSeconds    float64 `json:"tipSetupSeconds"`
}

// contractsPerBlock is about how many contracts the devnet creates per
// block when every block has Marlowe activity (0.4 with seed 1).
const contractsPerBlock = 0.4

// sizesFor returns the sizes of a run.
func sizesFor(o *Options) sizes {
	s := sizes{
		FollowBlocks: 20_000, FollowShares: []float64{0, 0.01, 0.1}, BlockSize: 7700,
		CatchUpBlocks: 50_000, LiveBlockRate: 10, Subscribers: []int{1, 100, 1000}, LatencySeconds: 10,
		ContractBlocks: []uint64{2_500, 25_000}, QueryClients: []int{1, 16, 64}, QuerySeconds: 2,
		GrowthBlocks: 100_000, GrowthPoints: []uint64{10_000, 100_000}, GrowthBackends: []string{subjectFollower, "sqlite", "postgresql"},
		SampleSeconds: 1, MarloweBlockSize: 2000,
		StormBlocks: 10_900, StormSubscribers: 1000, StormLimitSeconds: 120, StormSettleSeconds: 20,
		TipRate: 20, TipSubscribers: 1000, TipManySubscribers: 10_000, TipSeconds: 6, TipDrainSeconds: 10, TipSetupSeconds: 90,
	}
	switch {
	case o.Quick:
		s.FollowBlocks = 1_000
		s.CatchUpBlocks = 500
		s.LiveBlockRate, s.Subscribers, s.LatencySeconds = 20, []int{1, 100}, 1
		s.ContractBlocks, s.QueryClients, s.QuerySeconds = []uint64{500}, []int{1, 16}, 0.5
		s.GrowthBlocks, s.GrowthPoints, s.SampleSeconds = 4_000, []uint64{1_000, 4_000}, 0.25
		s.StormBlocks, s.StormSubscribers, s.StormLimitSeconds, s.StormSettleSeconds = 300, 30, 60, 0
		s.TipSubscribers, s.TipManySubscribers, s.TipSeconds, s.TipDrainSeconds, s.TipSetupSeconds = 30, 200, 1.5, 5, 60
	case o.Long:
		s.ContractBlocks = append(s.ContractBlocks, 250_000)
		s.GrowthBlocks, s.GrowthPoints = 1_000_000, []uint64{10_000, 100_000, 1_000_000}
	}
	if o.TipSubscribers > 0 {
		s.TipSubscribers = o.TipSubscribers
	}
	return s
}

// Result is the machine-readable result of a run.
type Result struct {
	Command string    `json:"command"`
	Machine Machine   `json:"machine"`
	Quick   bool      `json:"quick"`
	Long    bool      `json:"long"`
	Sizes   sizes     `json:"sizes"`
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	// LoadAverageEnd is the 1-minute load average when the run ended.
	LoadAverageEnd float64  `json:"loadAverageEnd"`
	Devnets        []string `json:"devnetCommands"`
	Postgres       string   `json:"postgres,omitempty"`
	// Services are the service commands the fanout section ran.
	Services []string `json:"serviceCommands,omitempty"`

	Follow      []FollowRow      `json:"follow,omitempty"`
	CatchUp     []CatchUpRow     `json:"catchUp,omitempty"`
	Latency     []LatencyRow     `json:"latency,omitempty"`
	Storm       *StormResult     `json:"storm,omitempty"`
	Tip         []TipRow         `json:"tip,omitempty"`
	Contracts   []ContractsPhase `json:"contracts,omitempty"`
	ChainGrowth []ChainGrowth    `json:"chainGrowth,omitempty"`
	// Plots are the PNG files written, relative to the Markdown file.
	Plots []string `json:"plots,omitempty"`
	// NotMeasured says what could not be measured and why.
	NotMeasured []string `json:"notMeasured,omitempty"`
}

// FollowRow is one follow case on one chain.
type FollowRow struct {
	Share        float64 `json:"marloweShare"`
	Case         string  `json:"case"`
	Label        string  `json:"label"`
	Blocks       uint64  `json:"blocks"`
	Bytes        int64   `json:"bytes"`
	Seconds      float64 `json:"seconds"`
	BlocksPerSec float64 `json:"blocksPerSecond"`
	MBPerSec     float64 `json:"mbPerSecond"`
	CPUPer1k     float64 `json:"cpuSecondsPer1000Blocks"`
	RSSPeakMB    float64 `json:"rssPeakMB"`
	RSSEndMB     float64 `json:"rssEndMB"`
	// PostgresCPUPer1k is the PostgreSQL server's CPU for (e), apart.
	PostgresCPUPer1k float64 `json:"postgresCpuSecondsPer1000Blocks,omitempty"`
	Records          uint64  `json:"records,omitempty"`
	StoreMB          float64 `json:"storeMB,omitempty"`
	// VsRaw are the ratios to case (a) on the same chain in the same run.
	VsRaw Ratios `json:"vsRaw"`
}

// Ratios compare a case with case (a).
type Ratios struct {
	BlocksPerSec float64 `json:"blocksPerSecond"`
	CPU          float64 `json:"cpuPer1000Blocks"`
	RSSPeak      float64 `json:"rssPeak"`
	RSSEnd       float64 `json:"rssEnd"`
}

// suite runs the sections.
type suite struct {
	opts    *Options
	sz      sizes
	exe     string
	bin     string
	tmp     string
	pg      *pgAdmin
	res     *Result
	started time.Time
	// profiles counts the CPU profiles written.
	profiles int
}

// runSuite runs the benchmark suite and writes its outputs.
func runSuite(ctx context.Context, exe string, opts *Options) (*Result, error) {
	s := &suite{opts: opts, sz: sizesFor(opts), exe: exe, started: time.Now()}
	s.res = &Result{Command: opts.Command, Machine: describeMachine(), Quick: opts.Quick, Long: opts.Long, Sizes: s.sz,
		Started: s.started.UTC().Truncate(time.Second)}
	tmp, err := os.MkdirTemp("", "marlowe-bench-")
	if err != nil {
		return nil, err
	}
	s.tmp = tmp
	defer os.RemoveAll(tmp)
	s.bin = opts.FollowerBin
	if s.bin == "" {
		progress("building marlowe-follower (go build)")
		if s.bin, err = buildFollower(ctx, tmp); err != nil {
			return nil, err
		}
	}
	if pg, version, err := checkPostgres(ctx, opts.PostgresURL); err != nil {
		s.note("PostgreSQL cases: not run: %v", err)
	} else {
		s.pg, s.res.Postgres = pg, version
		s.res.Machine.PostgreSQL = version + " (same machine)"
	}
	m := s.res.Machine
	progress("marlowe-bench on %s, %d cores, %.0f GiB, %s, load %.2f", m.CPU, m.Cores, m.MemoryGiB, m.GoVersion, m.LoadAverage)
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{sectionFollow, s.follow},
		{sectionStreaming, s.streaming},
		{sectionFanout, s.fanout},
		{sectionContracts, s.contracts},
		{sectionGrowth, s.growth},
	}
	for _, st := range steps {
		if !opts.wants(st.name) {
			continue
		}
		t0 := time.Now()
		progress("== %s", st.name)
		if err := st.run(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", st.name, err)
		}
		progress("== %s done in %s", st.name, time.Since(t0).Round(time.Second))
	}
	s.res.Seconds = time.Since(s.started).Seconds()
	s.res.LoadAverageEnd = describeMachine().LoadAverage
	if err := s.write(); err != nil {
		return nil, err
	}
	progress("done in %s", time.Since(s.started).Round(time.Second))
	return s.res, nil
}

// note records something that could not be measured.
func (s *suite) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.res.NotMeasured = append(s.res.NotMeasured, msg)
	progress("note: %s", msg)
}

// devnet starts a devnet node and records its command.
func (s *suite) devnet(ctx context.Context, spec devnetSpec) (*devnetProc, error) {
	d, err := startDevnet(ctx, s.bin, s.tmp, spec)
	if err != nil {
		return nil, err
	}
	if spec.Pregenerate {
		progress("devnet: %d blocks, %.1f MB, Marlowe share %g, generated in %.1fs", d.Tip, float64(d.Bytes)/1e6, spec.Share, d.GenSeconds)
	}
	if !slices.Contains(s.res.Devnets, d.Command) {
		s.res.Devnets = append(s.res.Devnets, d.Command)
	}
	return d, nil
}

// store prepares a fresh store for a run: a new directory, or a new
// PostgreSQL database (nil cleanup error when there is nothing to clean).
func (s *suite) store(ctx context.Context, backend, label string) (storeSpec, func(), error) {
	if backend == "sqlite" {
		dir, err := os.MkdirTemp(s.tmp, "store-"+label+"-")
		if err != nil {
			return storeSpec{}, nil, err
		}
		return storeSpec{DataDir: dir}, func() { _ = os.RemoveAll(dir) }, nil
	}
	spec, err := s.pg.create(ctx, label)
	if err != nil {
		return storeSpec{}, nil, err
	}
	return spec, func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.pg.drop(dctx, spec); err != nil {
			progress("dropping database %s: %v", spec.DBName, err)
		}
	}, nil
}

// backends returns the backends to run: SQLite, and PostgreSQL when it is
// available.
func (s *suite) backends(want []string) []string {
	var out []string
	for _, b := range want {
		if b == "postgresql" && s.pg == nil {
			continue
		}
		out = append(out, b)
	}
	return out
}

// follow runs the follow cases on each chain.
func (s *suite) follow(ctx context.Context) error {
	for _, share := range s.sz.FollowShares {
		d, err := s.devnet(ctx, devnetSpec{Blocks: s.sz.FollowBlocks, Share: share, BlockSize: s.sz.BlockSize, Seed: 1, Pregenerate: true})
		if err != nil {
			return err
		}
		var raw *FollowRow
		for _, c := range followCases {
			if c.ID == casePostgres && s.pg == nil {
				continue
			}
			prm := followParams{Case: c.ID, Socket: d.Socket, Tip: d.Tip}
			cleanup := func() {}
			switch c.ID {
			case caseSQLite:
				prm.Store, cleanup, err = s.store(ctx, "sqlite", "follow")
			case casePostgres:
				prm.Store, cleanup, err = s.store(ctx, "postgresql", "follow")
			}
			if err != nil {
				d.Stop()
				return err
			}
			var r followResult
			err = s.work(ctx, "follow", fmt.Sprintf("%g-%s", share*100, c.ID), prm, &r)
			cleanup()
			if err != nil {
				d.Stop()
				return fmt.Errorf("%s at %g%%: %w", c.Label, share*100, err)
			}
			row := FollowRow{Share: share, Case: c.ID, Label: c.Label, Blocks: d.Tip, Bytes: d.Bytes, Seconds: r.Seconds,
				BlocksPerSec: float64(d.Tip) / r.Seconds, MBPerSec: float64(d.Bytes) / r.Seconds / 1e6,
				CPUPer1k: r.CPU / float64(d.Tip) * 1000, RSSPeakMB: float64(r.RSSPeak) / 1e6, RSSEndMB: float64(r.RSSEnd) / 1e6,
				PostgresCPUPer1k: r.PostgresCPU / float64(d.Tip) * 1000, Records: r.Records, StoreMB: float64(r.StoreBytes) / 1e6}
			if raw == nil {
				raw = &row
			}
			row.VsRaw = Ratios{BlocksPerSec: ratio(row.BlocksPerSec, raw.BlocksPerSec), CPU: ratio(row.CPUPer1k, raw.CPUPer1k),
				RSSPeak: ratio(row.RSSPeakMB, raw.RSSPeakMB), RSSEnd: ratio(row.RSSEndMB, raw.RSSEndMB)}
			s.res.Follow = append(s.res.Follow, row)
			progress("follow %g%% %s: %.0f blocks/s, %.1f MB/s, %.3f CPU s/1k blocks, RSS peak %.0f MB (%.2fx (a))",
				share*100, c.Label, row.BlocksPerSec, row.MBPerSec, row.CPUPer1k, row.RSSPeakMB, row.VsRaw.BlocksPerSec)
		}
		d.Stop()
	}
	return nil
}

// work runs a job in a worker process; label names its CPU profile.
func (s *suite) work(ctx context.Context, kind, label string, params, out any) error {
	var env []string
	if s.opts.ProfileDir != "" {
		s.profiles++
		env = append(env, profileEnv+"="+filepath.Join(s.opts.ProfileDir, fmt.Sprintf("%02d-%s-%s.pprof", s.profiles, kind, label)))
	}
	return runWorker(ctx, s.exe, kind, params, out, env...)
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// streaming measures catch-up and commit-to-client latency.
func (s *suite) streaming(ctx context.Context) error {
	d, err := s.devnet(ctx, devnetSpec{Blocks: s.sz.CatchUpBlocks, Share: 1, BlockSize: s.sz.MarloweBlockSize, Seed: 1, Pregenerate: true})
	if err != nil {
		return err
	}
	for _, b := range s.backends([]string{"sqlite", "postgresql"}) {
		spec, cleanup, err := s.store(ctx, b, "catchup")
		if err != nil {
			d.Stop()
			return err
		}
		var rows []CatchUpRow
		err = s.work(ctx, "streamCatchUp", b, catchUpParams{Socket: d.Socket, Tip: d.Tip, Store: spec}, &rows)
		cleanup()
		if err != nil {
			d.Stop()
			return err
		}
		s.res.CatchUp = append(s.res.CatchUp, rows...)
	}
	d.Stop()
	live, err := s.devnet(ctx, devnetSpec{Share: 1, BlockSize: s.sz.MarloweBlockSize, Seed: 2, Rate: s.sz.LiveBlockRate})
	if err != nil {
		return err
	}
	defer live.Stop()
	spec, cleanup, err := s.store(ctx, "sqlite", "latency")
	if err != nil {
		return err
	}
	defer cleanup()
	var rows []LatencyRow
	if err := s.work(ctx, "streamLatency", "sqlite", latencyParams{Socket: live.Socket, Store: spec, Subscribers: s.sz.Subscribers,
		Seconds: s.sz.LatencySeconds}, &rows); err != nil {
		return err
	}
	s.res.Latency = rows
	return nil
}

// contracts grows the number of contracts phase by phase and measures
// ingest cost and query load at each size.
func (s *suite) contracts(ctx context.Context) error {
	for _, b := range s.backends([]string{"sqlite", "postgresql"}) {
		spec, cleanup, err := s.store(ctx, b, "contracts")
		if err != nil {
			return err
		}
		for _, blocks := range s.sz.ContractBlocks {
			d, err := s.devnet(ctx, devnetSpec{Blocks: blocks, Share: 1, BlockSize: s.sz.MarloweBlockSize, Seed: 1, Pregenerate: true})
			if err != nil {
				cleanup()
				return err
			}
			var ph ContractsPhase
			err = s.work(ctx, "contractsPhase", fmt.Sprintf("%s-%d", b, blocks), contractsParams{Socket: d.Socket, Tip: d.Tip, Store: spec,
				Concurrency: s.sz.QueryClients, Seconds: s.sz.QuerySeconds}, &ph)
			d.Stop()
			if err != nil {
				cleanup()
				return err
			}
			s.res.Contracts = append(s.res.Contracts, ph)
		}
		cleanup()
	}
	return nil
}

// growth follows one long chain per backend, observed at checkpoints.
func (s *suite) growth(ctx context.Context) error {
	d, err := s.devnet(ctx, devnetSpec{Blocks: s.sz.GrowthBlocks, Share: 0.01, BlockSize: s.sz.BlockSize, Seed: 1, Pregenerate: true})
	if err != nil {
		return err
	}
	defer d.Stop()
	for _, b := range s.backends(s.sz.GrowthBackends) {
		prm := chainGrowthParams{Socket: d.Socket, Tip: d.Tip, Bytes: d.Bytes, Checkpoints: s.sz.GrowthPoints,
			SampleSeconds: s.sz.SampleSeconds}
		cleanup := func() {}
		if b == subjectFollower {
			prm.Subject = subjectFollower
		} else if prm.Store, cleanup, err = s.store(ctx, b, "growth"); err != nil {
			return err
		}
		var g ChainGrowth
		err = s.work(ctx, "chainGrowth", b, prm, &g)
		cleanup()
		if err != nil {
			return err
		}
		s.res.ChainGrowth = append(s.res.ChainGrowth, g)
	}
	return nil
}

// rewrite writes the outputs of an earlier result (opts.FromJSON).
func rewrite(opts *Options) error {
	raw, err := os.ReadFile(opts.FromJSON)
	if err != nil {
		return err
	}
	res := &Result{}
	if err := json.Unmarshal(raw, res); err != nil {
		return fmt.Errorf("%s: %w", opts.FromJSON, err)
	}
	res.Plots = nil
	s := &suite{opts: opts, res: res}
	return s.write()
}

// write writes the JSON result, the plots and the Markdown section.
func (s *suite) write() error {
	plotDir := s.opts.PlotDir
	if plotDir == "" && s.opts.Markdown != "" {
		plotDir = filepath.Dir(s.opts.Markdown)
	}
	if plotDir != "" {
		plots, err := writePlots(s.res, plotDir)
		if err != nil {
			return err
		}
		mdDir := plotDir
		if s.opts.Markdown != "" {
			mdDir = filepath.Dir(s.opts.Markdown)
		}
		for _, p := range plots {
			rel, err := filepath.Rel(mdDir, p)
			if err != nil {
				rel = p
			}
			s.res.Plots = append(s.res.Plots, filepath.ToSlash(rel))
		}
	}
	if s.opts.Out != "" {
		raw, err := json.MarshalIndent(s.res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.opts.Out, append(raw, '\n'), 0o644); err != nil {
			return err
		}
		progress("wrote %s", s.opts.Out)
	}
	if s.opts.Markdown != "" {
		if err := updateMarkdown(s.opts.Markdown, renderMarkdown(s.res)); err != nil {
			return err
		}
		progress("updated %s", s.opts.Markdown)
	}
	return nil
}
