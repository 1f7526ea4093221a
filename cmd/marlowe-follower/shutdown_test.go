package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanShutdownLogsNoWarning runs `run --devnet` with clients attached
// (tail over the WebSocket, a durable tail, server-sent events), stops it
// with SIGINT and with SIGTERM, and fails on any WARN or ERROR it logged:
// a clean stop, and the devnet's deliberately malformed outputs, are no
// cause for alarm.
func TestCleanShutdownLogsNoWarning(t *testing.T) {
	bin := buildBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			qport, sport := freePort(t), freePort(t)
			base := "http://127.0.0.1:" + strconv.Itoa(qport)
			ws := "ws://127.0.0.1:" + strconv.Itoa(sport) + "/"
			svc := startCmd(t, "run --devnet", withDefaults(exec.Command(bin, "run", "--devnet", "--devnet-block-rate", "50",
				"--devnet-marlowe-share", "0.8", "--data-dir", t.TempDir(), "--query-port", strconv.Itoa(qport),
				"--streaming-port", strconv.Itoa(sport), "--query-host", "127.0.0.1", "--streaming-host", "127.0.0.1",
				"--log-level", "info", "--log-format", "json", "--progress-bar", "never")), false)
			var status struct {
				HistorySeq int64 `json:"historySeq"`
			}
			checkFor(t, 60*time.Second, func() error {
				code, err := getJSON(base+"/status", &status)
				if err == nil && code == 200 && status.HistorySeq >= 40 {
					return nil
				}
				return fmt.Errorf("the service did not follow: %d %v %+v", code, err, status)
			})
			// Clients attached when the signal comes.
			var clients []*exec.Cmd
			for _, args := range [][]string{{"tail", "--all", "--url", ws}, {"tail", "--all", "--durable", "shutdown-test", "--url", ws}} {
				c := exec.Command(bin, args...)
				if err := c.Start(); err != nil {
					t.Fatal(err)
				}
				clients = append(clients, c)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?all=true", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			waitUntil(t, 30*time.Second, "the two tails subscribed and the events stream open", func() bool {
				m, err := scrape(base)
				if err != nil {
					return false
				}
				return metricValue(m, "marlowe_streaming_subscribers") >= 2 && metricValue(m, "marlowe_streaming_sse_clients") >= 1
			})
			if err := svc.stopWith(t, sig); err != nil {
				t.Fatalf("exit after %s: %v", sig, err)
			}
			for _, c := range clients {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			for _, l := range strings.Split(svc.stderr.String(), "\n") {
				var e struct {
					Level string `json:"level"`
				}
				if json.Unmarshal([]byte(l), &e) == nil && (e.Level == "warn" || e.Level == "error" || e.Level == "fatal") {
					t.Errorf("logged: %s", l)
				}
			}
		})
	}
}

// TestStopDuringStartUp sends SIGTERM to `run --devnet` at moments of its
// start-up (opening and migrating the stores, loading the checkpoint,
// starting the servers), counted from the devnet node's "listening" line,
// which comes once the command handles signals: each run exits 0 without
// an ERROR, as a stop requested later does, and the same data directory
// starts again.
func TestStopDuringStartUp(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	for _, after := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond} {
		cmd := exec.Command(bin, "run", "--devnet", "--data-dir", dir, "--query-port", "0", "--streaming-port", "0",
			"--query-host", "127.0.0.1", "--streaming-host", "127.0.0.1", "--log-level", "info", "--log-format", "json", "--progress-bar", "never")
		stderr := startStderr(t, cmd, false)
		var out strings.Builder
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		signalled := false
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "devnet node listening") {
				// The signal comes that long after the line, while the
				// output goes on being read.
				time.AfterFunc(after, func() { _ = cmd.Process.Signal(syscall.SIGTERM) })
				signalled = true
			}
		}
		err := cmd.Wait()
		if !signalled {
			t.Fatalf("the devnet never said it was listening:\n%s", out.String())
		}
		if err != nil {
			t.Errorf("SIGTERM %s into start-up: %v\n%s", after, err, out.String())
		}
		if s := out.String(); strings.Contains(s, `"level":"error"`) || strings.Contains(s, `"level":"fatal"`) {
			t.Errorf("SIGTERM %s into start-up logged an error:\n%s", after, s)
		}
	}
}
