package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query"
)

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a running process of the binary (marlowe-follower run, or its
// devnet), stopped when the test ends.
type child struct {
	name         string
	cmd          *exec.Cmd
	stderr       *lockedBuffer // with startProc, its stdout too
	base         string        // its query API, "http://127.0.0.1:PORT"
	qport, sport int
	done         chan struct{}
	err          error // once done is closed
}

// startFollower runs the binary on socket with its store in dir and the
// query API on a free port; it is stopped when the test ends.
func startFollower(t *testing.T, bin, socket, dir string, magic uint32) *child {
	t.Helper()
	qport := freePort(t)
	return startChild(t, bin, qport, "run", "--node-socket", socket, "--network-magic", strconv.FormatUint(uint64(magic), 10),
		"--data-dir", dir, "--query-host", "127.0.0.1", "--query-port", strconv.Itoa(qport), "--streaming-port", "0",
		"--min-backoff", "50ms", "--max-backoff", "300ms", "--log-level", "info", "--progress-bar", "never", "--progress-period", "0s")
}

// startChild runs the binary with args, its query API on qport, its
// stderr kept.
func startChild(t *testing.T, bin string, qport int, args ...string) *child {
	t.Helper()
	base := "http://127.0.0.1:" + strconv.Itoa(qport)
	c := startCmd(t, base, exec.Command(bin, args...), false)
	c.base, c.qport = base, qport
	return c
}

// startProc runs the binary with args as name (its role, devnet), its
// stdout and stderr kept.
func startProc(t *testing.T, name, bin string, args ...string) *child {
	t.Helper()
	return startCmd(t, name, exec.Command(bin, args...), true)
}

// startCmd starts cmd, keeping its stderr (and, with stdout, its stdout in
// the same buffer). When the test ends it is stopped (SIGCONT and SIGTERM,
// then SIGKILL after 20 s) and, if the test failed, the end of its output
// is logged.
func startCmd(t *testing.T, name string, cmd *exec.Cmd, stdout bool) *child {
	t.Helper()
	c := &child{name: name, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan struct{})}
	c.cmd.Stderr = c.stderr
	if stdout {
		c.cmd.Stdout = c.stderr
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		if !c.exited() {
			_ = c.cmd.Process.Signal(syscall.SIGCONT) // a test may have stopped it
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-c.done:
			case <-time.After(20 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.done
			}
		}
		if t.Failed() {
			out := c.stderr.String()
			t.Logf("output of %s (last 6000 bytes):\n%s", c.name, out[max(0, len(out)-6000):])
		}
	})
	return c
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and returns the exit error.
func (c *child) stop(t *testing.T) error {
	t.Helper()
	return c.stopWith(t, syscall.SIGTERM)
}

// stopWith sends sig and returns the exit error.
func (c *child) stopWith(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit 30 s after %s", sig)
	}
	return c.err
}

// terminate stops the process with SIGTERM; the test fails unless it
// exits 0.
func (c *child) terminate(t *testing.T) {
	t.Helper()
	if err := c.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, c.stderr)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-c.done
}

// exit waits at most d for the process to end on its own (the test fails
// with what otherwise) and returns how it ended and its output.
func (c *child) exit(t *testing.T, d time.Duration, what string) (error, string) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(d):
		t.Fatal(what)
	}
	return c.err, c.stderr.String()
}

// exitCode reports whether err is the exit of a process that ended with
// status code.
func exitCode(err error, code int) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && exit.ExitCode() == code
}

// lostLease checks that the former holder of the writer lease exits
// within a minute (the test fails with what otherwise), with status 1 and
// the one line naming taker, who took the lease at epoch; it returns that
// line.
func (c *child) lostLease(t *testing.T, what, taker string, epoch int64) string {
	t.Helper()
	err, out := c.exit(t, 60*time.Second, what)
	last := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if !exitCode(err, 1) || !strings.HasPrefix(last, "marlowe-follower: ") ||
		!strings.Contains(last, "this process lost the writer lease") ||
		!strings.Contains(last, taker+" took the writer lease (epoch "+strconv.FormatInt(epoch, 10)) {
		t.Fatalf("the former holder exited with %v, its last line %q:\n%s", err, last, out[max(0, len(out)-3000):])
	}
	return last
}

func (c *child) ready() (int, query.Readiness) {
	var r query.Readiness
	code, err := getJSON(c.base+"/readyz", &r)
	if err != nil {
		return 0, r
	}
	return code, r
}

type statusAnswer struct {
	Connected    bool                     `json:"connected"`
	NodeTipBlock struct{ BlockNo uint64 } `json:"nodeTip"`
	Follower     chain.BlockHeader        `json:"followerPoint"`
	Committed    chain.BlockHeader        `json:"committedPoint"`
	HistorySeq   int64                    `json:"historySeq"`
	NodeError    string                   `json:"nodeError"`
	Handshake    *struct {
		Reason, Message string
	} `json:"handshakeFailure"`
	Waiting *struct {
		NodeTip      struct{ BlockNo uint64 } `json:"nodeTip"`
		Follower     chain.BlockHeader        `json:"followerPoint"`
		BlocksBehind uint64                   `json:"blocksBehind"`
	} `json:"waitingForNode"`
	Diverged *struct {
		Reason, Action string
	} `json:"diverged"`
}

type readerStatusAnswer struct {
	statusAnswer
	Role   string `json:"role"`
	Reader *struct {
		Head       int64 `json:"head"`
		WriterHead int64 `json:"writerHead"`
		Listening  bool  `json:"listening"`
		Notices    int64 `json:"notices"`
		Replica    *struct {
			Head     int64  `json:"head"`
			LagSeqs  int64  `json:"lagSeqs"`
			LagBytes *int64 `json:"lagBytes"`
		} `json:"replica"`
	} `json:"reader"`
}

// status returns /status; an error when it does not answer 200.
func (c *child) status() (readerStatusAnswer, error) {
	var st readerStatusAnswer
	code, err := getJSON(c.base+"/status", &st)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("/status answered %d", code)
	}
	return st, err
}

// mustStatus returns /status; the test fails when it does not answer.
func (c *child) mustStatus(t *testing.T) readerStatusAnswer {
	t.Helper()
	st, err := c.status()
	if err != nil {
		t.Fatalf("GET /status: %v", err)
	}
	return st
}

// connected reports whether /status answers and says connected.
func (c *child) connected() bool {
	st, err := c.status()
	return err == nil && st.Connected
}

// committed returns the block /status says is committed (0 when it does
// not answer).
func (c *child) committed(t *testing.T) uint64 {
	st, err := c.status()
	if err != nil {
		return 0
	}
	return st.Committed.BlockNo
}

// attempts returns how many times the follower has connected to the node
// (marlowe_node_connection_attempts_total).
func (c *child) attempts(t *testing.T) int {
	t.Helper()
	return int(metricValue(c.metrics(t), "marlowe_node_connection_attempts_total"))
}

func (c *child) metrics(t *testing.T) string {
	t.Helper()
	body, err := scrape(c.base)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// scrape returns the /metrics answer of the service whose query API is at
// base.
func scrape(base string) (string, error) {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// reasonHolds reports whether /readyz is 503 with reason among its fields.
func (c *child) reasonHolds(reason string) bool {
	code, r := c.ready()
	_, ok := r.NotReady[reason]
	return code == http.StatusServiceUnavailable && ok && !r.Ready
}

func (c *child) isReady() bool {
	code, r := c.ready()
	return code == http.StatusOK && r.Ready
}

// startService runs `run` in a role on the database, its ports free ones.
func startService(t *testing.T, bin, role, dbURL, socket string, extra ...string) *child {
	t.Helper()
	return startServiceOn(t, bin, role, dbURL, socket, freePort(t), freePort(t), extra...)
}

// startServiceOn runs `run` in a role on the database and the given ports.
func startServiceOn(t *testing.T, bin, role, dbURL, socket string, qport, sport int, extra ...string) *child {
	t.Helper()
	args := []string{"run", "--role", role, "--database-url", dbURL, "--network-magic", strconv.Itoa(devnet.NetworkMagic),
		"--query-port", strconv.Itoa(qport), "--streaming-port", strconv.Itoa(sport), "--log-level", "info",
		"--progress-bar", "never", "--progress-period", "0s", "--no-ui"}
	if socket != "" {
		args = append(args, "--node-socket", socket, "--min-backoff", "50ms", "--max-backoff", "300ms",
			"--writer-lease-ttl", testLeaseTTL.String())
	}
	p := startProc(t, role, bin, append(args, extra...)...)
	p.base, p.qport, p.sport = "http://127.0.0.1:"+strconv.Itoa(qport), qport, sport
	return p
}

// headAt waits until the writer p has committed the devnet's last block,
// blocks, and returns its history head then.
func (c *child) headAt(t *testing.T, blocks uint64) int64 {
	t.Helper()
	var head int64
	waitUntil(t, 3*time.Minute, "the writer at the devnet's last block", func() bool {
		st, err := c.status()
		if err != nil || st.Committed.BlockNo < blocks {
			return false
		}
		head = st.HistorySeq
		return true
	})
	return head
}
