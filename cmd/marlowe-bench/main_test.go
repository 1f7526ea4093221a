package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the suite's worker process.
func TestMain(m *testing.M) {
	if isWorker() {
		os.Exit(workerMain())
	}
	os.Exit(m.Run())
}

// TestQuickSuite runs the whole suite with --quick sizes, with its outputs in
// a temporary directory, and checks that the JSON result, the Markdown
// section and the plots are produced. It does not check speed.
func TestQuickSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick benchmark suite")
	}
	if raceEnabled {
		t.Skip("the quick suite runs without -race (scripts/test.sh runs it in a step of its own)")
	}
	dir := t.TempDir()
	md := filepath.Join(dir, "benchmarks.md")
	const handWritten = "# Benchmarks\n\nHand-written text that stays.\n"
	if err := os.WriteFile(md, []byte(handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "result.json")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pg := defaultPostgresURL
	if v, ok := os.LookupEnv("MARLOWE_TEST_DATABASE_URL"); ok {
		pg = v
	}
	if os.Getenv("MARLOWE_TEST_SKIP_POSTGRES") != "" {
		pg = ""
	}
	opts := &Options{Quick: true, Out: out, Markdown: md, PostgresURL: pg, Command: "marlowe-bench --quick (test)"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := runSuite(ctx, exe, opts); err != nil {
		t.Fatal(err)
	}
	t.Logf("quick suite took %s", time.Since(start).Round(time.Second))

	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("the JSON result does not decode: %v", err)
	}
	if res.Machine.Cores == 0 || res.Machine.GoVersion == "" || res.Command == "" {
		t.Errorf("machine or command missing: %+v", res.Machine)
	}
	cases := map[string]int{}
	for _, r := range res.Follow {
		cases[r.Case]++
		if r.BlocksPerSec <= 0 || r.CPUPer1k <= 0 || r.RSSPeakMB <= 0 || r.VsRaw.BlocksPerSec <= 0 {
			t.Errorf("follow row without figures: %+v", r)
		}
	}
	for _, c := range []string{caseRaw, caseDecode, caseClassifier, caseSQLite} {
		if cases[c] != 3 {
			t.Errorf("follow case %s measured %d times, want 3 (0%%, 1%%, 10%%)", c, cases[c])
		}
	}
	if len(res.CatchUp) < 3 || len(res.Latency) < 2 {
		t.Errorf("streaming: %d catch-up rows, %d latency rows", len(res.CatchUp), len(res.Latency))
	}
	for _, l := range res.Latency {
		if l.Samples == 0 {
			t.Errorf("latency without samples: %+v", l)
		}
	}
	// The fanout section: every record reached every storm subscriber in
	// order (whether they all caught up within the limit is a speed); the
	// tip phases measured deliveries, each record once and in order.
	if st := res.Storm; st == nil || st.Subscribers == 0 || st.Deliveries == 0 || st.Disorder != 0 || st.SingleRecordsPerSec <= 0 || st.PeakMiB <= 0 {
		t.Errorf("storm: %+v", res.Storm)
	}
	if len(res.Tip) != 5 {
		t.Errorf("%d tip phases, want 5", len(res.Tip))
	}
	for _, tp := range res.Tip {
		if tp.Samples == 0 || tp.Disorder != 0 || tp.Failed != 0 || tp.NodeBlocks == 0 || tp.ServerRSSMiB <= 0 {
			t.Errorf("tip phase: %+v", tp)
		}
	}
	if len(res.Contracts) == 0 || len(res.Contracts[0].Query) == 0 || res.Contracts[0].Contracts == 0 {
		t.Errorf("contracts: %+v", res.Contracts)
	}
	if len(res.ChainGrowth) == 0 || len(res.ChainGrowth[0].Points) == 0 || len(res.ChainGrowth[0].Samples) == 0 {
		t.Errorf("chain growth: %+v", res.ChainGrowth)
	}

	doc, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	if !strings.HasPrefix(text, handWritten) {
		t.Errorf("the hand-written part changed:\n%s", text)
	}
	for _, want := range []string{beginMarker, endMarker, "| Marlowe blocks | case | blocks/s |", "(a) raw gouroboros client",
		"marlowe-bench --quick (test)", "Commit-to-client latency", "### Streaming at scale: the service binary",
		"**The storm.**", "| client | subscribers | p50 ms |", "| store | contracts | operation | clients |",
		"### Growth with the chain", "![time and RSS against blocks followed](bench-growth-chain.png)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Markdown section lacks %q", want)
		}
	}
	for _, p := range []string{plotChainTime, plotContracts} {
		img, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Error(err)
			continue
		}
		if !bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG file", p)
		}
	}
}

// TestUpdateMarkdown checks that the generated section replaces the old
// one, keeps what is around it, and is appended when missing.
func TestUpdateMarkdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(path, []byte("# Title\n\nText.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	section := func(s string) string { return beginMarker + "\n" + s + "\n" + endMarker }
	if err := updateMarkdown(path, section("one")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(mustRead(t, path), []byte("\nAfter.\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateMarkdown(path, section("two")); err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nText.\n\n" + section("two") + "\n\nAfter.\n"
	if got := string(mustRead(t, path)); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if err := os.WriteFile(path, []byte("x\n"+endMarker+"\n"+beginMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateMarkdown(path, section("three")); err == nil {
		t.Error("markers out of order: no error")
	}
}

// mustRead returns the file's contents.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFormatting checks the number formats of the tables.
func TestFormatting(t *testing.T) {
	for _, c := range []struct {
		x    float64
		want string
	}{{0, "0"}, {999.4, "999"}, {1000, "1,000"}, {15157.2, "15,157"}, {1234567, "1,234,567"}, {-4321, "-4,321"}} {
		if got := commas(c.x); got != c.want {
			t.Errorf("commas(%v) = %q, want %q", c.x, got, c.want)
		}
	}
	if got := fixed(0.12345, 3); got != "0.123" {
		t.Errorf("fixed = %q", got)
	}
}

// TestTenthRates checks the growth summary on made-up samples.
func TestTenthRates(t *testing.T) {
	var samples []Sample
	for i := 1; i <= 10; i++ {
		samples = append(samples, Sample{Seconds: float64(i), Blocks: uint64(i * 1000)})
	}
	first, last := tenthRates(samples, 10000)
	if first != 1000 || last != 1000 {
		t.Errorf("rates %v, %v; want 1000, 1000", first, last)
	}
	samples[9].Seconds = 11 // the last tenth took twice as long
	if _, last := tenthRates(samples, 10000); last != 500 {
		t.Errorf("last tenth %v, want 500", last)
	}
}

// TestHistogramQuantile reads a Prometheus histogram's buckets from two
// scrapes and takes the quantile of the observations between them.
func TestHistogramQuantile(t *testing.T) {
	before := metricsText("h_bucket{le=\"0.001\"} 5\nh_bucket{le=\"0.01\"} 10\nh_bucket{le=\"+Inf\"} 10\nh_count 10\n")
	after := metricsText("h_bucket{le=\"0.001\"} 95\nh_bucket{le=\"0.01\"} 108\nh_bucket{le=\"+Inf\"} 110\nh_count 110\n")
	b0, b1 := before.buckets("h"), after.buckets("h")
	for _, c := range []struct{ q, want float64 }{{0.5, 1}, {0.9, 1}, {0.95, 10}, {0.99, 10}} {
		if got := histogramQuantile(b0, b1, c.q); got != c.want {
			t.Errorf("q %v: %v ms, want %v", c.q, got, c.want)
		}
	}
	if got := histogramQuantile(b1, b1, 0.5); got != 0 {
		t.Errorf("no observations: %v", got)
	}
	if v := after.value("h_count"); v != 110 {
		t.Errorf("h_count %v", v)
	}
}

func TestFanoutCases(t *testing.T) {
	if _, err := parseOptions([]string{"--fanout", "tip"}, io.Discard); err == nil {
		t.Fatal("--fanout tip: want an error (no such case)")
	}
	for _, c := range []struct {
		flag   string
		phases []string
	}{
		{"", []string{"raw", "go", "go", "raw", "raw"}},
		{"clients", []string{"raw", "go", "go", "raw"}},
		{"many", []string{"raw"}},
		{"storm", nil},
	} {
		args := []string{"--quick"}
		if c.flag != "" {
			args = append(args, "--fanout", c.flag)
		}
		o, err := parseOptions(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		s := &suite{opts: o, sz: sizesFor(o)}
		var got []string
		for _, ph := range s.tipPhases() {
			got = append(got, ph.Client)
		}
		if !slices.Equal(got, c.phases) {
			t.Errorf("--fanout %q: phases %v, want %v", c.flag, got, c.phases)
		}
		if o.wantsFanout(fanoutStorm) != (c.flag == "" || c.flag == "storm") {
			t.Errorf("--fanout %q: storm %v", c.flag, o.wantsFanout(fanoutStorm))
		}
	}
}
