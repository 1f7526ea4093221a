package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/sqlitestore"
	"github.com/marlowe-follower/follower/history/storage/storagetest"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// The soak runs the adversarial set against the binary for a while and
// prints a table: kill -9 and SIGTERM at random moments, the node gone (its
// socket cut and refused), the database gone (PostgreSQL behind a proxy that
// cuts every connection and refuses new ones), WebSocket subscribers that
// drop their connection mid-batch and resume from their cursor, durable
// streams acknowledged and reconnected at once, fuzzed HTTP requests and
// hostile WebSocket frames, all at the same time. At the end the service
// must have lost nothing and duplicated nothing: its log and checkpoint are
// those of a fresh run over the same chain, every subscriber received every
// record exactly once in seq order, and no request got a 5xx other than a
// 503 (the answer for a database that is down).
//
// The test suite runs it briefly (about 25 s per backend); scripts/soak.sh
// runs it for longer (docs/operations.md, "Soak").
var (
	soakDuration = flag.Duration("soak.duration", 0, "how long the soak's faults run per backend (0: the short run of the test suite)")
	soakBackends = flag.String("soak.backends", "", "sqlite, postgres or both (default: both where a test database is configured, else sqlite)")
	soakSeed     = flag.Uint64("soak.seed", 0, "the faults' random seed (0: from the clock)")
	soakReport   = flag.String("soak.report", "", "also write the table to this file")
)

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary under faults")
	}
	dur := *soakDuration
	if dur == 0 {
		dur = 20 * time.Second
	}
	backends := []string{"sqlite"}
	pgURL := os.Getenv("MARLOWE_TEST_DATABASE_URL")
	switch *soakBackends {
	case "sqlite":
	case "postgres":
		backends = []string{"postgres"}
	case "both", "":
		if pgURL != "" {
			backends = append(backends, "postgres")
		} else if *soakBackends == "both" || os.Getenv("CI") == "true" {
			t.Fatal("MARLOWE_TEST_DATABASE_URL is not set: the soak cannot run on PostgreSQL")
		}
	default:
		t.Fatalf("-soak.backends %q: want sqlite, postgres or both", *soakBackends)
	}
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	bin := buildBinary(t)
	rows := make([]soakRow, 0, len(backends))
	for _, be := range backends {
		t.Run(be, func(t *testing.T) {
			rows = append(rows, soakRow{})
			runSoak(t, bin, be, pgURL, dur, seed, &rows[len(rows)-1])
		})
	}
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "backend\tfaults for\tkill -9\tSIGTERM\tnode cut\tdb cut\tWS resumes\tdurable acks\trecords\trepeated forks\tlost\tduplicated\tHTTP requests\t5xx (not 503)\t503\thostile frames\tresult\t\n")
	for i := range rows {
		r := &rows[i]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", r.backend, r.duration.Round(time.Second),
			r.kills, r.terms, r.nodeCuts, r.dbCuts, r.resumes.Load(), r.durableAcks.Load(), r.records, r.repeated, r.lost, r.duplicated,
			r.requests.Load(), r.server5xx.Load(), r.unavailable.Load(), r.hostile.Load(), r.result)
	}
	_ = tw.Flush()
	fmt.Fprintf(&out, "seed %d (-soak.seed to repeat the faults' schedule)\n", seed)
	t.Logf("soak:\n%s", out.String())
	fmt.Fprint(os.Stderr, "\n"+out.String())
	if *soakReport != "" {
		if err := os.WriteFile(*soakReport, out.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// soakRow is one backend's line of the table.
type soakRow struct {
	backend                             string
	duration                            time.Duration
	kills, terms, nodeCuts, dbCuts      int
	resumes, durableAcks                atomic.Int64
	records, repeated, lost, duplicated int
	requests, server5xx, unavailable    atomic.Int64
	hostile                             atomic.Int64
	result                              string
	mu                                  sync.Mutex
	failures                            []string // the first requests answered with a 5xx other than 503
}

// soakService is the service under test: restarted at will on fixed ports.
type soakService struct {
	t                *testing.T
	bin, socket, dir string
	dbURL            string
	qport, sport     int
	mu               sync.Mutex
	cmd              *exec.Cmd
	done             chan struct{}
	stderr           *lockedBuffer
}

func (s *soakService) start() {
	s.t.Helper()
	args := []string{"run", "--node-socket", s.socket, "--network-magic", strconv.Itoa(devnet.NetworkMagic),
		"--data-dir", s.dir, "--query-host", "127.0.0.1", "--query-port", strconv.Itoa(s.qport),
		"--streaming-host", "127.0.0.1", "--streaming-port", strconv.Itoa(s.sport),
		"--min-backoff", "50ms", "--max-backoff", "400ms", "--log-level", "warn", "--progress-bar", "never", "--progress-period", "0s"}
	if s.dbURL != "" {
		args = append(args, "--database-url", s.dbURL)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
}

// stop ends the running process with sig and waits for it.
func (s *soakService) stop(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		s.t.Errorf("no exit 60 s after %v", sig)
		_ = cmd.Process.Kill()
		<-done
	}
	if sig == syscall.SIGTERM && cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		s.t.Errorf("exit after SIGTERM: %v", cmd.ProcessState)
	}
}

func (s *soakService) base() string { return "http://127.0.0.1:" + strconv.Itoa(s.qport) }

// newFaultProxy forwards connections from addr to target (on network) and
// can cut them: every open connection closed and new ones refused for a
// while (storagetest.Proxy's Cut, then restoreProxy).
func newFaultProxy(t *testing.T, network, addr, target string) *storagetest.Proxy {
	p, err := storagetest.NewProxyOn(network, addr, target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// restore listens again after a cut (the address may take a moment to be
// free).
func restoreProxy(t *testing.T, p *storagetest.Proxy) {
	t.Helper()
	checkFor(t, 5*time.Second, func() error {
		if err := p.Restore(); err != nil {
			return fmt.Errorf("proxy: listening again on %s: %w", p.Addr(), err)
		}
		return nil
	})
}

// chainGrows waits until the devnet's chain has grown n blocks, or is
// complete: the soak's faults come, and last, at moments of the chain's
// progress (40 blocks a second).
func chainGrows(t *testing.T, dn *devnet.Devnet, n int) {
	t.Helper()
	from := dn.Store().Tip().BlockNo
	waitUntil(t, time.Minute, fmt.Sprintf("the chain to grow %d blocks past block %d", n, from), func() bool {
		return dnDone(dn) || dn.Store().Tip().BlockNo >= from+uint64(n)
	})
}

// pace is the load generators' pause (a client's backoff, a request
// rate): d, or less when ctx ends, so that the load stops at once.
func pace(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func runSoak(t *testing.T, bin, backend, pgURL string, dur time.Duration, seed uint64, row *soakRow) {
	*row = soakRow{backend: backend, duration: dur, result: "FAIL"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &soakRun{t: t, bin: bin, backend: backend, seed: seed, row: row, tmp: t.TempDir(),
		rng: rand.New(rand.NewPCG(seed, uint64(len(backend))))}
	r.startChain(ctx, dur)
	defer r.dn.Close()
	r.startService(pgURL)

	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	r.startLoad(loadCtx, &load)
	r.injectFaults(dur)
	r.settle()
	stopLoad()
	load.Wait()
	r.svc.stop(syscall.SIGTERM)

	r.check(r.referenceLog())
	if !t.Failed() {
		row.result = "ok"
	}
}

// soakRun is one backend's soak: the chain, the service under faults
// behind its proxies, the subscribers following it, and the table's row.
type soakRun struct {
	t            *testing.T
	bin, backend string
	seed         uint64
	row          *soakRow
	rng          *rand.Rand // the faults' schedule
	tmp          string
	nodeSocket   string
	dn           *devnet.Devnet
	node, db     *storagetest.Proxy // db: nil on SQLite
	svc          *soakService
	subs         []*soakSubscriber
	final        chain.Tip // the chain's last block, once it has ended
}

// startChain starts a journal devnet of dur at 40 blocks a second: every
// client sees the same chain events (forks included) whatever its timing,
// so a run that was killed and a fresh run end with the same log.
func (r *soakRun) startChain(ctx context.Context, dur time.Duration) {
	r.nodeSocket = filepath.Join(r.tmp, "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.Seed, gcfg.MarloweShare, gcfg.MeanBlockSize = 31, 0.4, 2000
	gcfg.RollbackEvery, gcfg.MaxRollbackDepth = 20, 4
	const rate = 40.0
	blocks := uint64(rate * dur.Seconds())
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: r.nodeSocket, Generator: gcfg, Blocks: blocks, BlockRate: rate, Journal: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.dn = dn
}

// startService starts the service behind a proxy to the node (and on
// PostgreSQL one to the database), killed when the test ends, which logs
// what it wrote if the test failed.
func (r *soakRun) startService(pgURL string) {
	t := r.t
	r.node = newFaultProxy(t, "unix", filepath.Join(r.tmp, "proxy.socket"), r.nodeSocket)
	svc := &soakService{t: t, bin: r.bin, socket: r.node.Addr(), dir: filepath.Join(r.tmp, "svc"), qport: freePort(t), sport: freePort(t), stderr: &lockedBuffer{}}
	if r.backend == "postgres" {
		dbURL, pgAddr := soakDatabase(t, pgURL)
		r.db = newFaultProxy(t, "tcp", "127.0.0.1:0", pgAddr)
		u, _ := url.Parse(dbURL)
		u.Host = r.db.Addr()
		svc.dbURL = u.String()
	}
	t.Cleanup(func() {
		svc.stop(syscall.SIGKILL)
		if t.Failed() {
			// The log lines, without the start-up banners of every restart.
			var lines []string
			for _, l := range strings.Split(svc.stderr.String(), "\n") {
				if strings.HasPrefix(l, "{") || strings.Contains(l, "marlowe-follower:") {
					lines = append(lines, l)
				}
			}
			out := strings.Join(lines, "\n")
			t.Logf("service log (last 8000 bytes):\n%s", out[max(0, len(out)-8000):])
		}
	})
	r.svc = svc
	svc.start()
}

// startLoad starts, on wg until ctx ends, the subscribers (one of them
// durable, one filtered), the fuzzed HTTP requests and the hostile frames.
func (r *soakRun) startLoad(ctx context.Context, wg *sync.WaitGroup) {
	filters := []protocol.Filter{{All: true}, {All: true}, {Kinds: []string{string(record.KindContractCreated), string(record.KindInputsApplied)}}}
	r.subs = make([]*soakSubscriber, len(filters))
	for i, f := range filters {
		r.subs[i] = &soakSubscriber{name: fmt.Sprintf("s%d", i), filter: f, durable: i == 1, row: r.row, rng: rand.New(rand.NewPCG(r.seed, uint64(i+10)))}
		wg.Add(1)
		go func() { defer wg.Done(); r.subs[i].run(ctx, r.svc.sport) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); soakHTTPFuzz(ctx, r.svc.base(), r.row, rand.New(rand.NewPCG(r.seed, 3))) }()
	go func() { defer wg.Done(); soakHostile(ctx, r.svc.sport, r.row, rand.New(rand.NewPCG(r.seed, 4))) }()
}

// injectFaults injects faults, one at a time at random moments of the
// chain's progress, until dur is up: kill -9, SIGTERM, the node cut, the
// database cut.
func (r *soakRun) injectFaults(dur time.Duration) {
	t, row, svc, dn := r.t, r.row, r.svc, r.dn
	end := time.Now().Add(dur)
	for time.Now().Before(end) {
		chainGrows(t, dn, 12+r.rng.IntN(60)) // 0.3 to 1.8 s
		switch n := r.rng.IntN(10); {
		case n < 4:
			svc.stop(syscall.SIGKILL)
			row.kills++
			chainGrows(t, dn, r.rng.IntN(20))
			svc.start()
		case n < 6:
			svc.stop(syscall.SIGTERM)
			row.terms++
			svc.start()
		case n < 8:
			_ = r.node.Cut()
			row.nodeCuts++
			chainGrows(t, dn, 8+r.rng.IntN(80))
			restoreProxy(t, r.node)
		default:
			if r.db == nil {
				continue
			}
			_ = r.db.Cut()
			row.dbCuts++
			chainGrows(t, dn, 8+r.rng.IntN(80))
			restoreProxy(t, r.db)
		}
	}
}

// settle waits, once the chain has ended, for the service to commit its
// tip and for each subscriber to receive its last record: the head, or for
// a filter the newest record it matches (read from the store while the
// service runs).
func (r *soakRun) settle() {
	<-r.dn.Done()
	r.final = r.dn.Store().Tip()
	svc := r.svc
	r.waitFor("the service to commit the chain's tip", func() bool { return soakCommitted(svc.base()) == r.final.BlockNo })
	var head struct {
		HistorySeq int64 `json:"historySeq"`
	}
	if _, err := getJSON(svc.base()+"/status", &head); err != nil {
		r.t.Fatal(err)
	}
	running, _ := soakLog(r.t, r.backend, svc.dir, svc.dbURL)
	last := make([]int64, len(r.subs))
	for i, s := range r.subs {
		for _, rec := range running {
			if rec.Seq <= head.HistorySeq && (!s.filtered() || matchesKinds(s.filter, &rec)) {
				last[i] = rec.Seq
			}
		}
	}
	r.waitFor("the subscribers to receive their last records", func() bool {
		for i, s := range r.subs {
			if s.lastSeq.Load() < last[i] {
				return false
			}
		}
		return true
	})
}

// waitFor waits 3 minutes at most until cond holds; the test fails then,
// logging the service's /status and /readyz.
func (r *soakRun) waitFor(what string, cond func() bool) {
	const d = 3 * time.Minute
	if poll(d, cond) {
		return
	}
	for _, path := range []string{"/status", "/readyz"} {
		if resp, err := http.Get(r.svc.base() + path); err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			r.t.Logf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
	r.t.Fatalf("timed out after %s waiting for %s (node tip block %d)", d, what, r.final.BlockNo)
}

// soakCommitted is the block number a service at base says it committed
// (0 when it does not answer).
func soakCommitted(base string) uint64 {
	var st statusAnswer
	if code, err := getJSON(base+"/status", &st); err != nil || code != http.StatusOK {
		return 0
	}
	return st.Committed.BlockNo
}

// referenceLog is the log of a fresh run over the same chain, never
// interrupted.
func (r *soakRun) referenceLog() soakLogged {
	ref := &soakService{t: r.t, bin: r.bin, socket: r.nodeSocket, dir: filepath.Join(r.tmp, "ref"), qport: freePort(r.t), sport: freePort(r.t), stderr: &lockedBuffer{}}
	ref.start()
	r.waitFor("the reference run to commit the chain's tip", func() bool { return soakCommitted(ref.base()) == r.final.BlockNo })
	ref.stop(syscall.SIGTERM)
	recs, cp := soakLog(r.t, "sqlite", ref.dir, "")
	return soakLogged{recs, cp}
}

// soakLogged is a run's log and checkpoint.
type soakLogged struct {
	records    []record.Record
	checkpoint *history.Checkpoint
}

// check compares the service's log with the fresh run's, checks what each
// subscriber received, and fills in the row.
func (r *soakRun) check(ref soakLogged) {
	t, row := r.t, r.row
	want, wantCP := ref.records, ref.checkpoint
	got, gotCP := soakLog(t, r.backend, r.svc.dir, r.svc.dbURL)
	row.records = len(got)
	if len(want) == 0 {
		t.Fatal("the reference run recorded nothing")
	}
	// What a follower sees of forks depends on its timing, on a real node
	// and on the journal devnet alike: a follower restarted at a block it
	// rolled back to is served the fork it already saw once more (the
	// chain-sync protocol cannot tell the node where in the history it
	// was). So the runs agree on the records that stand (not rolled back)
	// and on the chain position; seqs may differ by the repeated forks.
	gotLive, wantLive := standing(got), standing(want)
	if len(gotLive) != len(wantLive) {
		t.Errorf("the service under faults holds %d standing records (of %d), a fresh run %d (of %d)", len(gotLive), len(got), len(wantLive), len(want))
	}
	for i := range min(len(gotLive), len(wantLive)) {
		g, w := gotLive[i], wantLive[i]
		if g.Kind != w.Kind || g.Block != w.Block || g.TxID != w.TxID || g.TxIndex != w.TxIndex ||
			!reflect.DeepEqual(g.Contract, w.Contract) || !bytes.Equal(g.Payload, w.Payload) {
			t.Errorf("standing record %d differs:\n faults seq %d %s\n fresh  seq %d %s", i+1, g.Seq, brief(&g), w.Seq, brief(&w))
			break
		}
	}
	if !reflect.DeepEqual(gotCP.Breadcrumbs, wantCP.Breadcrumbs) || gotCP.Head != int64(len(got)) {
		t.Errorf("checkpoints differ: faults head %d of %d records, fresh head %d", gotCP.Head, len(got), wantCP.Head)
	}
	row.repeated = len(got) - len(want)
	// Every subscriber received exactly the service's own log.
	for _, s := range r.subs {
		lost, dup := s.check(t, got)
		row.lost += lost
		row.duplicated += dup
	}
	if n := row.server5xx.Load(); n > 0 {
		t.Errorf("%d requests were answered with a 5xx other than 503:\n%s", n, strings.Join(row.failures, "\n"))
	}
	if row.kills+row.terms == 0 {
		t.Error("the soak restarted nothing: it ran too briefly to test anything")
	}
}

// soakDatabase creates a database of its own on the test server, dropped
// when the test ends, and returns its URL and the server's address.
func soakDatabase(t *testing.T, base string) (string, string) {
	t.Helper()
	ctx := context.Background()
	conn := pgConnect(t, ctx, base)
	name := fmt.Sprintf("soak_%d_%08x", os.Getpid(), rand.Uint32())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	host := u.Host
	if !strings.Contains(host, ":") {
		host += ":5432"
	}
	return u.String(), host
}

// soakLog reads a stopped service's whole log and checkpoint.
func soakLog(t *testing.T, backend, dir, dbURL string) ([]record.Record, *history.Checkpoint) {
	t.Helper()
	ctx := context.Background()
	var b history.Backend
	var err error
	if backend == "postgres" {
		b, err = pgstore.Open(ctx, dbURL, pgstore.Options{})
	} else {
		b, err = sqlitestore.Open(ctx, dir, sqlitestore.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return backendState(t, b)
}
