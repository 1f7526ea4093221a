// Command marlowe-bench is marlowe-follower's benchmark suite. It measures,
// side by side in one run, against a devnet node serving a fixed
// deterministic chain from a separate process:
//
//  1. following the chain: (a) a raw gouroboros client discarding the
//     blocks (the socket limit), (b) gouroboros decoding every block, (c)
//     our follower and classifier with a discarding sink, (d) the full
//     pipeline on SQLite and (e) on PostgreSQL, at 0%, 1% and 10% Marlowe
//     blocks: blocks/s, MB/s, CPU seconds per 1,000 blocks, RSS, each also
//     as a ratio to (a);
//  2. streaming: one subscriber's catch-up rate, in process and over
//     WebSocket, and the store's commit-to-subscriber latency with 1, 100
//     and 1,000 in-process subscribers;
//  3. fanout: the service binary under many WebSocket subscribers (issue
//     21's targets): 1,000 subscribers catching up from 0 at once against
//     one alone, and subscribers at the tip of a node making 20 blocks/s,
//     1,000 raw against 1,000 Go clients (streaming/client), then 10,000;
//  4. query: lookups and filtered lists at 1, 16 and 64 concurrent clients
//     over loopback HTTP;
//  5. growth: cost as the chain grows (10k, 100k and, with --long, 1M
//     blocks) and as contracts grow (1k, 10k and, with --long, 100k).
//
// Each measurement runs in its own worker process (this program again) so
// that its CPU time and RSS are its own. It writes the result as JSON
// (--out), a Markdown section between <!-- bench:begin --> and
// <!-- bench:end --> of a document (--markdown) and PNG plots beside it.
// Progress goes to stderr. --quick runs everything small in under a minute.
//
//	go build -o bin/marlowe-follower ./cmd/marlowe-follower
//	go run ./cmd/marlowe-bench --follower-bin bin/marlowe-follower --markdown docs/benchmarks.md --out bin/benchmarks.json
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
)

func main() {
	if isWorker() {
		os.Exit(workerMain())
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// defaultPostgresURL is where the suite looks for PostgreSQL by default
// (the project's test database; MARLOWE_TEST_DATABASE_URL overrides it).
const defaultPostgresURL = "postgres://postgres:postgres@127.0.0.1:5432/test?sslmode=disable"

// run parses the command line and runs the suite.
func run(args []string, stderr io.Writer) int {
	opts, err := parseOptions(args, stderr)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "marlowe-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "marlowe-bench:", err)
		return 1
	}
	if opts.FromJSON != "" {
		if err := rewrite(opts); err != nil {
			fmt.Fprintln(stderr, "marlowe-bench:", err)
			return 1
		}
		return 0
	}
	opts.Command = "marlowe-bench " + strings.Join(args, " ")
	if _, err := runSuite(ctx, exe, opts); err != nil {
		fmt.Fprintln(stderr, "marlowe-bench:", err)
		return 1
	}
	return 0
}

// parseOptions reads the command line.
func parseOptions(args []string, stderr io.Writer) (*Options, error) {
	fs := pflag.NewFlagSet("marlowe-bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &Options{}
	pgDefault := defaultPostgresURL
	if v, ok := os.LookupEnv("MARLOWE_TEST_DATABASE_URL"); ok {
		pgDefault = v
	}
	fs.BoolVar(&o.Quick, "quick", false, "run everything small (under a minute; for CI)")
	fs.BoolVar(&o.Long, "long", false, "add the long growth runs: 1,000,000 blocks and 100,000 contracts (about 30 minutes more; the devnet node then holds about 16 GB)")
	fs.StringVar(&o.Out, "out", "", "write the machine-readable result here (JSON)")
	fs.StringVar(&o.Markdown, "markdown", "", "replace the generated section of this Markdown file (between <!-- bench:begin --> and <!-- bench:end -->, added at its end when missing)")
	fs.StringVar(&o.PlotDir, "plots", "", "write the PNG plots here (default: the Markdown file's directory; none without either)")
	fs.StringVar(&o.FollowerBin, "follower-bin", "", "the marlowe-follower binary that runs the devnet node (default: go build it)")
	fs.StringVar(&o.PostgresURL, "pg-url", pgDefault, "PostgreSQL server for the PostgreSQL cases (a fresh database per run, dropped after); empty skips them")
	fs.StringVar(&o.FromJSON, "from-json", "", "measure nothing: write the Markdown section and plots of this earlier JSON result")
	fs.StringVar(&o.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of every worker process into this directory (and a heap profile at the end of each pipeline run)")
	fs.StringSliceVar(&o.Sections, "only", nil, "run only these sections: follow, streaming, fanout, contracts, growth")
	fs.StringSliceVar(&o.FanoutCases, "fanout", nil, "run only these cases of the fanout section: storm, clients (raw and Go clients at the tip), many (the many raw ones at the tip)")
	fs.IntVar(&o.TipSubscribers, "tip-subscribers", 0, "subscribers of each raw and Go phase at the tip (the clients case; default 1,000, 30 with --quick): fewer on a machine that cannot carry 1,000 at 20 blocks/s")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: marlowe-bench [flags]\n\nmarlowe-follower's benchmark suite (see docs/benchmarks.md).\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range o.Sections {
		if !slices.Contains(allSections, s) {
			return nil, fmt.Errorf("--only %s: want one of %s", s, strings.Join(allSections, ", "))
		}
	}
	for _, c := range o.FanoutCases {
		if !slices.Contains(allFanoutCases, c) {
			return nil, fmt.Errorf("--fanout %s: want one of %s", c, strings.Join(allFanoutCases, ", "))
		}
	}
	if o.Quick && o.Long {
		return nil, errors.New("--quick and --long do not go together")
	}
	return o, nil
}
