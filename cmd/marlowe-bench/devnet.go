package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// followerPackage is the import path of the binary that runs the devnet node.
const followerPackage = "github.com/marlowe-follower/follower/cmd/marlowe-follower"

// buildFollower builds the marlowe-follower binary into dir with go build
// and returns its path.
func buildFollower(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "marlowe-follower")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, followerPackage)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s (run from the module, or pass --follower-bin): %w", followerPackage, err)
	}
	return bin, nil
}

// devnetSpec is the chain a devnet node serves.
type devnetSpec struct {
	Blocks    uint64  // 0: generate for ever (at Rate)
	Share     float64 // fraction of blocks with Marlowe activity
	BlockSize int     // mean block body size in bytes
	Rate      float64 // blocks per second; 0: as fast as possible
	Seed      int64
	// Pregenerate makes every block before serving: clients then measure
	// the socket, not the generator.
	Pregenerate bool
}

// args is the devnet command line.
func (s devnetSpec) args(socket string) []string {
	a := []string{"devnet", "--socket", socket, "--blocks", strconv.FormatUint(s.Blocks, 10),
		"--block-rate", strconv.FormatFloat(s.Rate, 'f', -1, 64),
		"--marlowe-share", strconv.FormatFloat(s.Share, 'f', -1, 64), "--block-size", strconv.Itoa(s.BlockSize),
		"--rollback-every", "0", "--seed", strconv.FormatInt(s.Seed, 10), "--log-format", "json"}
	if s.Pregenerate {
		a = append(a, "--pregenerate")
	}
	return a
}

// devnetProc is a devnet node running as a separate process, so that its
// CPU time and memory are not the measuring process's.
type devnetProc struct {
	cmd    *exec.Cmd
	Socket string
	Spec   devnetSpec
	// Tip is the node's tip block number when it started serving; Bytes the
	// raw size of the pregenerated chain.
	Tip        uint64
	Bytes      int64
	GenSeconds float64
	// Command is the command line, for the report.
	Command string

	exited chan struct{}
	mu     sync.Mutex
	tail   []string // last lines of its log
}

// startDevnet starts a devnet node on a socket in dir and waits until it
// serves (after pregenerating its chain).
func startDevnet(ctx context.Context, bin, dir string, spec devnetSpec) (*devnetProc, error) {
	socket := filepath.Join(dir, fmt.Sprintf("node-%d.socket", time.Now().UnixNano()))
	args := spec.args(socket)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the devnet node: %w", err)
	}
	d := &devnetProc{cmd: cmd, Socket: socket, Spec: spec, exited: make(chan struct{}),
		Command: "marlowe-follower " + strings.Join(spec.args("SOCKET"), " ")}
	ready := make(chan struct{})
	go func() {
		defer close(d.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.tail = append(d.tail, line)
			if len(d.tail) > 20 {
				d.tail = d.tail[1:]
			}
			d.mu.Unlock()
			var msg struct {
				Msg        string  `json:"msg"`
				Bytes      int64   `json:"bytes"`
				Took       float64 `json:"took"`
				TipBlockNo uint64  `json:"tipBlockNo"`
			}
			if json.Unmarshal([]byte(line), &msg) != nil {
				continue
			}
			switch msg.Msg {
			case "chain generated":
				d.Bytes, d.GenSeconds = msg.Bytes, msg.Took
			case "devnet node listening":
				d.Tip = msg.TipBlockNo
				if !signalled {
					signalled = true
					close(ready)
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case <-ready:
		return d, nil
	case <-d.exited:
		return nil, fmt.Errorf("the devnet node exited before serving: %s", d.lastLines())
	case <-ctx.Done():
		d.Stop()
		return nil, ctx.Err()
	}
}

// lastLines returns the end of the node's log.
func (d *devnetProc) lastLines() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.tail, "\n")
}

// PeakRSS returns the node process's peak resident set size in bytes.
func (d *devnetProc) PeakRSS() int64 {
	return readMemOf(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid)).Peak
}

// Stop interrupts the node and waits for it (killing it after 10 s).
func (d *devnetProc) Stop() {
	if stopProc(d.cmd, d.exited, os.Interrupt, 10*time.Second) {
		_ = os.Remove(d.Socket)
	}
}
