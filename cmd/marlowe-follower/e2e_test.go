package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/internal/testport"
	"github.com/marlowe-follower/follower/history/record"
)

// freePort returns a TCP port that was free a moment ago.
var freePort = testport.Free // (t)

func getJSON(url string, v any) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return resp.StatusCode, fmt.Errorf("%w: %s", err, body)
		}
	}
	return resp.StatusCode, nil
}

// runDevnet starts `run --devnet` with a journal devnet and its store in dir.
func runDevnet(t *testing.T, bin, dir string, qport, sport int, extra ...string) *child {
	t.Helper()
	args := append([]string{"run", "--devnet", "--devnet-journal", "--devnet-block-rate", "200", "--devnet-seed", "5",
		"--data-dir", dir, "--query-port", strconv.Itoa(qport), "--streaming-port", strconv.Itoa(sport),
		"--query-host", "127.0.0.1", "--streaming-host", "127.0.0.1",
		"--min-backoff", "50ms", "--max-backoff", "500ms", "--log-level", "error", "--progress-bar", "never"}, extra...)
	return startChild(t, bin, qport, args...)
}

// TestRunDevnetEndToEnd runs the built binary with its built-in devnet: the
// query API answers with data, the metrics are there, SIGTERM exits 0, and a
// restart on the same store resumes exactly where it stopped.
func TestRunDevnetEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	qport, sport := freePort(t), freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(qport)

	svc := runDevnet(t, bin, dir, qport, sport)
	var status struct {
		Connected  bool  `json:"connected"`
		HistorySeq int64 `json:"historySeq"`
	}
	checkFor(t, 60*time.Second, func() error {
		code, err := getJSON(base+"/status", &status)
		if err == nil && code == 200 && status.Connected && status.HistorySeq >= 60 {
			return nil
		}
		return fmt.Errorf("the service did not follow: %d %v %+v", code, err, status)
	})
	var list struct {
		Results []map[string]any `json:"results"`
		Seq     int64            `json:"seq"`
	}
	if code, err := getJSON(base+"/contracts?limit=5", &list); err != nil || code != 200 || len(list.Results) == 0 {
		t.Fatalf("GET /contracts: %d %v %+v", code, err, list)
	}
	id := list.Results[0]["contractId"].(string)
	if code, err := getJSON(base+"/contracts/"+strings.ReplaceAll(id, "#", "%23"), nil); err != nil || code != 200 {
		t.Fatalf("GET /contracts/%s: %d %v", id, code, err)
	}
	if code, _ := getJSON(base+"/healthz", nil); code != 200 {
		t.Fatalf("GET /healthz: %d", code)
	}
	// The contract explorer is at / (and unknown paths are still the API's JSON 404).
	if ctype, code := contentType(t, base+"/"); code != 200 || ctype != "text/html; charset=utf-8" {
		t.Fatalf("GET /: %d %q", code, ctype)
	}
	if ctype, code := contentType(t, base+"/nope"); code != 404 || ctype != "application/json" {
		t.Fatalf("GET /nope: %d %q", code, ctype)
	}
	// --devnet lets browser pages of any origin read the API.
	req, _ := http.NewRequest(http.MethodGet, base+"/status", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("GET /status from another origin under --devnet: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	// ... and open the WebSocket API (a production configuration allows
	// same-origin pages only).
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	ws, _, err := websocket.Dial(wctx, "ws://127.0.0.1:"+strconv.Itoa(sport)+"/", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://localhost:5173"}}})
	wcancel()
	if err != nil {
		t.Fatalf("WebSocket from another origin under --devnet: %v", err)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	metrics, err := scrape(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"marlowe_chain_slot", "marlowe_node_tip_slot", "marlowe_blocks_total", "marlowe_history_records_committed_total",
		"marlowe_store_commit_seconds_bucket", "marlowe_rollbacks_total", "marlowe_decode_failures_total", "marlowe_history_live_subscribers",
		"marlowe_rejected_outputs_total"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("metric %s missing", name)
		}
	}

	// The streaming API answers: `tail` over the WebSocket and server-sent events.
	tail := exec.Command(bin, "tail", "--all", "--from", "origin", "--url", "ws://127.0.0.1:"+strconv.Itoa(sport)+"/")
	out, err := tail.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 4096)
	n, _ := io.ReadAtLeast(out, first, 64)
	_ = tail.Process.Kill()
	_ = tail.Wait()
	if !strings.HasPrefix(string(first[:n]), `{"seq":1,`) {
		t.Fatalf("tail printed %q", first[:n])
	}
	resp, err := http.Get(base + "/events?all=true&from=origin")
	if err != nil {
		t.Fatal(err)
	}
	n, _ = io.ReadAtLeast(resp.Body, first, 64)
	resp.Body.Close()
	if !strings.Contains(string(first[:n]), "event: record") && !strings.Contains(string(first[:n]), "subscribed") {
		t.Fatalf("events: %q", first[:n])
	}

	svc.terminate(t)
	logA, cpA := storeState(t, dir)

	// Restart on the same store (without the explorer this time): the log
	// continues exactly.
	svc = runDevnet(t, bin, dir, qport, sport, "--no-ui")
	checkFor(t, 60*time.Second, func() error {
		code, err := getJSON(base+"/status", &status)
		if err == nil && code == 200 && status.HistorySeq > cpA.Head+20 {
			return nil
		}
		return fmt.Errorf("the restarted service did not continue: %d %v %+v (head before %d)", code, err, status, cpA.Head)
	})
	if ctype, code := contentType(t, base+"/"); code != 404 || ctype != "application/json" {
		t.Fatalf("GET / with --no-ui: %d %q", code, ctype)
	}
	svc.terminate(t)
	logB, _ := storeState(t, dir)
	for i, r := range logB {
		if r.Seq != int64(i+1) {
			t.Fatalf("seq %d at position %d: a gap or a duplicate", r.Seq, i)
		}
	}
	for i := range logA {
		a, b := logA[i], logB[i]
		// Records of the first run may have been rolled back since.
		a.RolledBackBy, b.RolledBackBy = nil, nil
		if !recordsEqual(a, b) {
			t.Fatalf("record %d changed across the restart", i+1)
		}
	}
	t.Logf("first run: %d records; after the restart: %d", len(logA), len(logB))
}

// contentType returns the status and Content-Type of a GET.
func contentType(t *testing.T, url string) (string, int) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("Content-Type"), resp.StatusCode
}

func recordsEqual(a, b record.Record) bool {
	return a.Seq == b.Seq && a.Kind == b.Kind && a.Block == b.Block && a.TxID == b.TxID &&
		string(a.Payload) == string(b.Payload)
}
