package main

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBanner returns the start-up banner the README shows: the lines of
// its code block from "marlowe-follower is running." to "Stop it with
// Ctrl-C.".
func readmeBanner(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "```\nmarlowe-follower is running.\n")
	if start < 0 {
		t.Fatal("README.md has no code block starting with \"marlowe-follower is running.\"")
	}
	text = text[start+4:]
	end := strings.Index(text, "Stop it with Ctrl-C.\n```")
	if end < 0 {
		t.Fatal("README.md's banner block does not end with \"Stop it with Ctrl-C.\"")
	}
	return strings.Split(text[:end+len("Stop it with Ctrl-C.")], "\n")
}

// TestREADMEBannerIsWhatRunPrints starts `run --devnet` and compares the
// banner it prints with the README's, ports and temporary paths aside: the
// README shows what the binary prints, every line of it.
func TestREADMEBannerIsWhatRunPrints(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	want := readmeBanner(t)
	bin := buildBinary(t)
	qport, sport := freePort(t), freePort(t)
	cmd := exec.Command(bin, "run", "--devnet", "--query-port", strconv.Itoa(qport), "--streaming-port", strconv.Itoa(sport),
		"--log-level", "error", "--progress-bar", "never")
	// The README shows the defaults: no setting from the environment.
	stderr := startStderr(t, cmd, true)
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "{") { // a log line
				continue
			}
			if len(got) > 0 || l == "marlowe-follower is running." {
				got = append(got, l)
			}
			if l == "Stop it with Ctrl-C." {
				break
			}
		}
		lines <- got
		for sc.Scan() { // keep reading until the process ends
		}
	}()
	var got []string
	select {
	case got = <-lines:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("run --devnet printed no banner within 60 s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	tmp := regexp.MustCompile(`\S*/marlowe-follower-devnet-[0-9]+/`)
	norm := func(l string) string {
		l = strings.ReplaceAll(l, ":"+strconv.Itoa(qport)+"/", ":3780/")
		l = strings.ReplaceAll(l, ":"+strconv.Itoa(sport)+"/", ":3781/")
		return tmp.ReplaceAllString(l, "TMP/")
	}
	if len(got) != len(want) {
		t.Errorf("run --devnet printed %d banner lines, the README shows %d", len(got), len(want))
	}
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = norm(got[i])
		}
		if i < len(want) {
			w = norm(want[i])
		}
		if g != w {
			t.Errorf("banner line %d:\n  run --devnet: %q\n  README.md:    %q", i+1, g, w)
		}
	}
}
