package main

import (
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// tipTime is the time and number of the newest block the service has
// committed, on the devnet's slot clock.
func tipTime(t *testing.T, base string) (time.Time, uint64) {
	t.Helper()
	at, blocks, err := readTip(base)
	if err != nil {
		t.Fatal(err)
	}
	return at, blocks
}

func readTip(base string) (time.Time, uint64, error) {
	var status struct {
		Committed struct {
			Slot    uint64 `json:"slot"`
			BlockNo uint64 `json:"blockNo"`
		} `json:"committedPoint"`
	}
	if code, err := getJSON(base+"/status", &status); err != nil || code != 200 {
		return time.Time{}, 0, fmt.Errorf("GET /status: %d %v", code, err)
	}
	return time.UnixMilli(devnet.DevnetClock.SlotStart(status.Committed.Slot)), status.Committed.BlockNo, nil
}

// inputsNow counts the open contracts to which /next at the current time
// offers a deposit, a choice or a notify, of the newest 100.
func inputsNow(t *testing.T, base string) (offering, open int) {
	t.Helper()
	var list struct {
		Results []struct {
			ContractID string `json:"contractId"`
		} `json:"results"`
	}
	if code, err := getJSON(base+"/contracts?status=open&limit=100", &list); err != nil || code != 200 {
		t.Fatalf("GET /contracts: %d %v", code, err)
	}
	now := url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))
	for _, c := range list.Results {
		var next struct {
			Inputs struct {
				Notify   any   `json:"notify"`
				Deposits []any `json:"deposits"`
				Choices  []any `json:"choices"`
			} `json:"applicable_inputs"`
		}
		code, err := getJSON(base+"/contracts/"+url.PathEscape(c.ContractID)+"/next?validityStart="+now+"&validityEnd="+now, &next)
		if code == 404 { // closed meanwhile
			continue
		}
		if err != nil || code != 200 {
			t.Fatalf("GET /next of %s: %d %v", c.ContractID, code, err)
		}
		if len(next.Inputs.Deposits) > 0 || len(next.Inputs.Choices) > 0 || next.Inputs.Notify != nil {
			offering++
		}
	}
	return offering, len(list.Results)
}

// TestRunDevnetOnTheWallClock: run --devnet's chain follows the real time.
// Its tip is at the time it was made, the open contracts' /next at now
// offers deposits, choices and notifies, and a restart on the kept chain
// refuses another clock. At --devnet-block-rate 0 the chain of
// --devnet-blocks is made at once and ends before now, within the hour;
// with --devnet-clock traces it is at the reference traces' 1969 times,
// and a chain kept so goes on so when started again without the flag.
func TestRunDevnetOnTheWallClock(t *testing.T) {
	bin := buildBinary(t)
	work := t.TempDir()
	qport := freePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(qport)
	svc := startRunDevnetArgs(t, bin, work, qport, "--devnet-block-rate", "20", "--data-dir", "data")
	waitSeq(t, base, 20)
	at, _ := tipTime(t, base)
	if d := time.Since(at); d < -time.Second || d > 30*time.Second {
		t.Fatalf("the tip is at %s, %s ago", at.UTC(), d)
	}
	var offering, open int
	waitUntil(t, 90*time.Second, "an open contract taking inputs at now", func() bool {
		offering, open = inputsNow(t, base)
		return offering > 0
	})
	t.Logf("tip at %s; %d of %d open contracts take inputs at now", at.UTC().Format(time.RFC3339), offering, open)
	svc.terminate(t)

	// The kept chain is on the wall clock: another is refused.
	refused := exec.Command(bin, "run", "--devnet", "--data-dir", "data", "--devnet-clock", "traces", "--query-port", "0", "--streaming-port", "0")
	refused.Dir = work
	msg, err := refused.CombinedOutput()
	if !exitCode(err, 2) || !strings.Contains(string(msg), "was made on the wall clock") {
		t.Fatalf("run --devnet --devnet-clock traces on a chain on the wall clock: %v\n%s", err, msg)
	}

	// A chain at rest, made at once: it ends before now.
	svc = startRunDevnetArgs(t, bin, work, qport, "--devnet-block-rate", "0", "--devnet-blocks", "300", "--data-dir", "rest")
	waitUntil(t, 90*time.Second, "the chain at rest", func() bool {
		_, blocks, err := readTip(base)
		return err == nil && blocks == 300
	})
	at, _ = tipTime(t, base)
	if d := time.Since(at); d <= 0 || d > time.Hour {
		t.Fatalf("the chain at rest ends at %s, %s ago", at.UTC(), d)
	}
	// (The contract projection follows the commits.)
	waitUntil(t, 60*time.Second, "an open contract of the chain at rest taking inputs at now", func() bool {
		offering, open = inputsNow(t, base)
		return offering > 0
	})
	t.Logf("chain at rest: tip %s ago; %d of %d open contracts take inputs at now", time.Since(at).Round(time.Second), offering, open)
	svc.terminate(t)

	// The reference traces' times; a chain kept so (as an earlier version
	// kept every chain) goes on so, with a warning, when no clock is asked.
	for _, args := range [][]string{{"--devnet-clock", "traces"}, nil} {
		svc = startRunDevnetArgs(t, bin, work, qport, append([]string{"--data-dir", "traces"}, args...)...)
		waitSeq(t, base, 5)
		if at, _ = tipTime(t, base); at.Year() != 1969 && at.Year() != 1970 {
			t.Fatalf("--devnet-clock traces %v: tip at %s", args, at.UTC())
		}
		svc.terminate(t)
		if warned := strings.Contains(svc.stderr.String(), "is on the reference traces' clock"); warned != (args == nil) {
			t.Fatalf("run --devnet %v on a chain kept on the traces' clock: warned %v\n%s", args, warned, svc.stderr)
		}
	}
}
