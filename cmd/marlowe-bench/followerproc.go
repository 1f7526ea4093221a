package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// followerProc is the service as an operator runs it: the marlowe-follower
// binary's run command in a process of its own, on an embedded store,
// following a devnet node. It is measured from outside (/proc, /status,
// /metrics), as an operator sees it.
type followerProc struct {
	cmd *exec.Cmd
	// Command is the command line, for the report.
	Command   string
	QueryURL  string // http://127.0.0.1:PORT
	StreamURL string // ws://127.0.0.1:PORT/
	exited    chan struct{}
	stderr    *lineTail
}

// startFollowerProc starts `marlowe-follower run` on a fresh store in dir,
// following the node at socket, its query API and streaming server on
// free loopback ports. A port found free can be taken before the service
// binds it: it is then started again on other ports, a few times.
func startFollowerProc(ctx context.Context, bin, dir, socket string) (*followerProc, error) {
	for attempt := 1; ; attempt++ {
		p, err := tryFollowerProc(ctx, bin, filepath.Join(dir, fmt.Sprintf("data-%d", attempt)), socket)
		if err == nil || !strings.Contains(err.Error(), "address already in use") || attempt == 3 {
			return p, err
		}
	}
}

func tryFollowerProc(ctx context.Context, bin, data, socket string) (*followerProc, error) {
	qport, sport, err := servicePorts()
	if err != nil {
		return nil, err
	}
	args := func(q, s string) []string {
		return []string{"run", "--node-socket", socket, "--network-magic", strconv.Itoa(devnet.NetworkMagic), "--data-dir", data,
			"--query-host", "127.0.0.1", "--query-port", q, "--streaming-host", "127.0.0.1", "--streaming-port", s,
			"--log-level", "warn", "--log-format", "json", "--progress-bar", "never", "--progress-period", "0s"}
	}
	cmd := exec.Command(bin, args(strconv.Itoa(qport), strconv.Itoa(sport))...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &followerProc{cmd: cmd, exited: make(chan struct{}), stderr: &lineTail{},
		Command:  "marlowe-follower " + strings.Join(args("QPORT", "SPORT"), " "),
		QueryURL: "http://127.0.0.1:" + strconv.Itoa(qport), StreamURL: "ws://127.0.0.1:" + strconv.Itoa(sport) + "/"}
	p.Command = strings.Replace(strings.Replace(p.Command, socket, "SOCKET", 1), data, "DIR", 1)
	cmd.Stdout, cmd.Stderr = io.Discard, p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting marlowe-follower run: %w", err)
	}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := p.status(ctx); err == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("marlowe-follower run exited: %s", p.stderr.String())
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("marlowe-follower run: no /status after a minute: %s", p.stderr.String())
		}
	}
}

// Pid is the service's process id.
func (p *followerProc) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits (SIGKILL after 20 s).
func (p *followerProc) Stop() {
	stopProc(p.cmd, p.exited, syscall.SIGTERM, 20*time.Second)
}

// stopProc stops the process of cmd, whose end closes exited: it sends sig
// and waits, killing it after grace. It reports whether the process was
// still running.
func stopProc(cmd *exec.Cmd, exited <-chan struct{}, sig os.Signal, grace time.Duration) bool {
	select {
	case <-exited:
		return false
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-exited
	}
	return true
}

// followerStatus is the part of GET /status the suite reads.
type followerStatus struct {
	NodeTip struct {
		BlockNo uint64 `json:"blockNo"`
	} `json:"nodeTip"`
	Committed struct {
		BlockNo uint64 `json:"blockNo"`
	} `json:"committedPoint"`
	HistorySeq      int64  `json:"historySeq"`
	CommittedBehind uint64 `json:"committedBlocksBehind"`
}

func (p *followerProc) status(ctx context.Context) (followerStatus, error) {
	return fetchStatus(ctx, p.QueryURL)
}

// fetchStatus reads GET /status of the service at queryURL.
func fetchStatus(ctx context.Context, queryURL string) (followerStatus, error) {
	var st followerStatus
	body, err := httpGet(ctx, queryURL+"/status")
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(body, &st)
}

// waitCommitted waits until the service has committed block tip.
func (p *followerProc) waitCommitted(ctx context.Context, tip uint64, limit time.Duration) (followerStatus, error) {
	deadline := time.Now().Add(limit)
	for {
		st, err := p.status(ctx)
		if err == nil && st.Committed.BlockNo >= tip {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("marlowe-follower run: block %d of %d committed after %s (%v)", st.Committed.BlockNo, tip, limit, err)
		}
		select {
		case <-p.exited:
			return st, fmt.Errorf("marlowe-follower run exited: %s", p.stderr.String())
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitAtTip waits until the service follows a live node at its tip: it
// has committed the node's tip block, and blocks after the first it saw.
func (p *followerProc) waitAtTip(ctx context.Context, limit time.Duration) error {
	st0, err := p.waitCommitted(ctx, 1, limit)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		st, err := p.status(ctx)
		if err == nil && st.Committed.BlockNo >= st0.Committed.BlockNo+5 && st.Committed.BlockNo+1 >= st.NodeTip.BlockNo {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("marlowe-follower run did not reach the live node's tip in %s (%+v)", limit, st)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitCaughtUp waits until the service's commits are at most a block
// behind the node, for at most limit; it returns how many blocks behind
// they are then.
func (p *followerProc) waitCaughtUp(ctx context.Context, limit time.Duration) uint64 {
	deadline := time.Now().Add(limit)
	for {
		st, err := p.status(ctx)
		if err == nil && st.CommittedBehind <= 1 || time.Now().After(deadline) || ctx.Err() != nil {
			return st.CommittedBehind
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitConnections waits until the streaming server holds at most n
// connections (the previous phase's have gone).
func waitConnections(ctx context.Context, queryURL string, n float64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		m, err := scrape(ctx, queryURL)
		if err == nil && m.value("marlowe_streaming_connections") <= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the streaming server still has %v connections after %s", m.value("marlowe_streaming_connections"), limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a service under load answers slowly
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// metricsText is a /metrics answer.
type metricsText string

// scrape reads the service's /metrics.
func scrape(ctx context.Context, queryURL string) (metricsText, error) {
	body, err := httpGet(ctx, queryURL+"/metrics")
	return metricsText(body), err
}

// value returns the value of the series (name and labels, as written);
// 0 when it is absent.
func (m metricsText) value(series string) float64 {
	for line := range strings.SplitSeq(string(m), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// buckets returns a histogram's cumulative buckets: upper bound (seconds)
// to count.
func (m metricsText) buckets(name string) map[float64]float64 {
	out := map[float64]float64{}
	prefix := name + `_bucket{le="`
	for line := range strings.SplitSeq(string(m), "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, v, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		bound := math.Inf(1)
		if le != "+Inf" {
			bound, _ = strconv.ParseFloat(le, 64)
		}
		out[bound], _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
	}
	return out
}

// histogramQuantile returns the upper bound of the bucket holding the q
// quantile of the observations between two scrapes of a histogram, in
// milliseconds (the histogram's resolution; 0 without observations; in
// the last, unbounded bucket: the largest bound, a lower bound then).
func histogramQuantile(before, after map[float64]float64, q float64) float64 {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total <= 0 {
		return 0
	}
	for i, b := range bounds {
		if after[b]-before[b] >= q*total {
			if math.IsInf(b, 1) && i > 0 {
				return bounds[i-1] * 1000
			}
			return b * 1000
		}
	}
	return 0
}

// procCPUSeconds returns the user and system CPU time of process pid.
func procCPUSeconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name in parentheses: utime and stime are
	// fields 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// procMem reads process pid's RSS now and at its peak.
func procMem(pid int) memStatus { return readMemOf(fmt.Sprintf("/proc/%d/status", pid)) }

// resetPeakRSS makes process pid's peak RSS (VmHWM) start over from its
// RSS now (5 into /proc/PID/clear_refs).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// rssSampler samples a process's RSS while a phase runs: /proc's VmHWM
// gives the peak; the samples give its largest value within the phase
// when the peak cannot be reset.
type rssSampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	max  int64
}

func sampleRSS(pid int, period time.Duration) *rssSampler {
	s := &rssSampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			s.max = max(s.max, procMem(pid).RSS)
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops sampling and returns the largest RSS seen.
func (s *rssSampler) finish() int64 {
	close(s.stop)
	<-s.done
	return max(s.max, procMem(s.pid).RSS)
}

// lineTail keeps the last lines written to it (a process's stderr).
type lineTail struct {
	mu    sync.Mutex
	lines []string
	part  []byte
}

func (l *lineTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
		if len(l.lines) > 20 {
			l.lines = l.lines[1:]
		}
	}
	return len(p), nil
}

func (l *lineTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 && len(l.part) == 0 {
		return "(no output)"
	}
	return strings.Join(append(l.lines, string(l.part)), "\n")
}
