package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/streamingtest"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore/sqlstreams"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// runTail runs the tail command on its own (the root command wires it).
func runTail(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newTailCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestTailPrintsRecordsAndRollbacks(t *testing.T) {
	ctx := context.Background()
	h := fedHistory(t, 4, 0.6, 8, 60)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{})
	want, err := streamtest.Expected(ctx, h.Backend, record.Filter{}, record.Cursor{}, h.Handle.Head())
	if err != nil {
		t.Fatal(err)
	}
	markers := historytest.RollbackMarkers(want)
	if markers == 0 {
		t.Fatal("the chain has no rollbacks")
	}
	stdout, stderr, err := runTail(t, "--all", "--from", "0", "--url", srv.URL, "--limit", strconv.Itoa(len(want)), "--batch-size", "7")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var got []record.Record
	for _, l := range lines {
		var r record.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, r)
	}
	if err := streamtest.Same(got, want); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if strings.Contains(l, `"kind":"rolled_back"`) && strings.Contains(l, `"txId"`) {
			t.Fatalf("a rollback with a txId: %s", l)
		}
	}
	if n := strings.Count(stderr, "ROLLBACK to "); n != markers {
		t.Fatalf("%d rollback lines for %d markers: %s", n, markers, stderr)
	}
}

// TestTailDurableResumes: two runs of tail --durable NAME print the
// history once between them: the second continues after the first's last
// record.
func TestTailDurableResumes(t *testing.T) {
	h := fedHistory(t, 6, 0.6, 0, 40)
	srv := durableServer(t, h)
	total := int(h.Handle.Head())
	first := total / 3
	out1, stderr, err := runTail(t, "--kind", "contract_created", "--kind", "inputs_applied", "--kind", "payout_withdrawn",
		"--durable", "ops", "--url", srv.URL, "--limit", strconv.Itoa(first), "--batch-size", "1")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	// The second run names only the stream: the server has its filter.
	out2, stderr, err := runTail(t, "--durable", "ops", "--url", srv.URL, "--limit", strconv.Itoa(total-first))
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	wantSeqsFromOne(t, printedSeqs(t, out1+out2), total)
}

// printedSeqs returns the seqs of the records tail printed, a JSON line
// each.
func printedSeqs(t *testing.T, out string) []int64 {
	t.Helper()
	var seqs []int64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r record.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.Seq)
	}
	return seqs
}

// wantSeqsFromOne fails the test unless seqs are 1, 2, ..., n.
func wantSeqsFromOne(t *testing.T, seqs []int64, n int) {
	t.Helper()
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("record %d has seq %d: %v, want 1 to %d", i, s, seqs, n)
		}
	}
	if len(seqs) != n {
		t.Fatalf("%d records, want %d", len(seqs), n)
	}
}

func TestTailUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--url", "ws://127.0.0.1:1/"},
		{"--all", "--from", "yesterday"},
		{"--contract", "nope"},
		{"--contract-id", "nope"},
		{"--role-currency", "00"},
		{"--party-address", "addr_test1nope"},
		{"--tag", ""},
		{"--kind", "contract"},
		{"--all", "--tag", "a"},
		{"--durable", "bad name"},
		{"--party-role", "nodot"},
	} {
		_, _, err := runTail(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	// Names outside the vocabulary are not flags.
	for _, flag := range []string{"--rolesCurrency", "--contracts", "--roles-currency", "--party-roles"} {
		if _, _, err := runTail(t, flag, "x", "--all"); err == nil || !strings.Contains(err.Error(), "unknown flag") {
			t.Errorf("%s: %v", flag, err)
		}
	}
}

// TestTailHelp: tail's --help shows the flags a client uses, each with its
// type, and none of the streaming server's other settings, which tail
// would only ignore (they are not flags of tail at all: unknown flags).
func TestTailHelp(t *testing.T) {
	out, _, err := runTail(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--streaming-host string", "--streaming-port int", "--streaming-token string", "--limit int",
		"--batch-size int", "--kind stringArray", "--log-level string", "(MARLOWE_RT_STREAMING_TOKEN)"} {
		if !strings.Contains(out, want) {
			t.Errorf("tail --help lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`--all \S+ `).FindString(out); m != "" {
		t.Errorf("the bool flag --all shows a type: %q", m)
	}
	for _, server := range []string{"--streaming-origins", "--streaming-tokens", "--streaming-queue-budget-mb", "--query-port", "--node-socket"} {
		if strings.Contains(out, server+" ") {
			t.Errorf("tail --help shows the server's %s:\n%s", server, out)
		}
		if newTailCommand().Flags().Lookup(strings.TrimPrefix(server, "--")) != nil {
			t.Errorf("tail has the server's flag %s", server)
		}
	}
}

// TestTailDurableLimitAcksWhatItPrinted: three runs of
// tail --durable X --limit 3 print nine different records, in order: each
// acknowledges the records it printed, though the batches are larger.
func TestTailDurableLimitAcksWhatItPrinted(t *testing.T) {
	h := fedHistory(t, 6, 0.6, 0, 40)
	srv := durableServer(t, h)
	var seqs []int64
	for run := range 3 {
		args := []string{"--durable", "x", "--url", srv.URL, "--limit", "3"}
		if run == 0 {
			args = append(args, "--all")
		}
		out, stderr, err := runTail(t, args...)
		if err != nil {
			t.Fatalf("run %d: %v: %s", run+1, err, stderr)
		}
		got := printedSeqs(t, out)
		if len(got) != 3 {
			t.Fatalf("run %d printed %d records: %q", run+1, len(got), out)
		}
		seqs = append(seqs, got...)
	}
	wantSeqsFromOne(t, seqs, 9)
}

// TestTailFilterFlags: every filter flag, and the alias --contract, selects
// what the same filter selects on the WebSocket.
func TestTailFilterFlags(t *testing.T) {
	ctx := context.Background()
	h := fedHistory(t, 3, 0.6, 0, 120)
	srv := streamingtest.StartServer(t, h, streamingtest.ServerOptions{})
	sample, err := streamtest.SampleFilters(ctx, h.Backend)
	if err != nil {
		t.Fatal(err)
	}
	head := h.Handle.Head()
	for _, f := range append(sample.Filters(), protocol.Filter{All: true}) {
		want := selected(t, h.Backend, f, head)
		for _, alias := range []bool{false, true} {
			args := tailArgs(f, alias)
			if alias && len(f.Contracts) == 0 {
				continue
			}
			args = append(args, "--url", srv.URL, "--limit", strconv.Itoa(len(want)))
			out, stderr, err := runTail(t, args...)
			if err != nil {
				t.Fatalf("%v: %v: %s", args, err, stderr)
			}
			if err := streamtest.Same(parseLines(t, out), want); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
		}
	}
}

// selected returns the records of b's log up to head that f selects, as
// a subscription from the snapshot at head delivers them.
func selected(t *testing.T, b history.Backend, f protocol.Filter, head int64) []record.Record {
	t.Helper()
	hf, err := f.History()
	if err != nil {
		t.Fatal(err)
	}
	want, err := streamtest.Expected(t.Context(), b, hf, record.Cursor{Snapshot: head}, head)
	if err != nil {
		t.Fatal(err)
	}
	return want
}

// tailArgs are the tail flags of a filter (--contract instead of
// --contract-id with alias).
func tailArgs(f protocol.Filter, alias bool) []string {
	var args []string
	add := func(flag string, vs []string) {
		for _, v := range vs {
			args = append(args, "--"+flag, v)
		}
	}
	if f.All {
		args = append(args, "--all")
	}
	if alias {
		add("contract", f.Contracts)
	} else {
		add("contract-id", f.Contracts)
	}
	add("role-currency", f.RolesCurrencies)
	add("tag", f.Tags)
	add("party-address", f.PartyAddresses)
	add("kind", f.Kinds)
	for _, r := range f.PartyRoles {
		args = append(args, "--party-role", r.String())
	}
	return args
}

func parseLines(t *testing.T, out string) []record.Record {
	t.Helper()
	var got []record.Record
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var r record.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, r)
	}
	return got
}

// fedHistory is a history of at least records records, fed from a devnet
// generator's chain (its seed, Marlowe share and rollback frequency).
func fedHistory(t *testing.T, seed int64, share float64, rollbackEvery int, records int64) *streamingtest.History {
	t.Helper()
	h := streamingtest.NewHistory(t, "", nil)
	feed, err := streamingtest.NewFeed(h, seed, share, rollbackEvery)
	if err != nil {
		t.Fatal(err)
	}
	if err := feed.UntilRecords(context.Background(), records); err != nil {
		t.Fatal(err)
	}
	return h
}

// durableServer serves h with durable streams kept beside it.
func durableServer(t *testing.T, h *streamingtest.History) *streamingtest.Server {
	t.Helper()
	streams, err := sqlstreams.OpenSQLite(context.Background(), h.Dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Close() })
	return streamingtest.StartServer(t, h, streamingtest.ServerOptions{Streams: streams})
}
