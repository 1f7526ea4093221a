package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDevnetFlags: the devnet command's flags read as the other commands'
// do: --network-magic is an unsigned integer (a magic beyond 32 bits is
// refused by name), the chain's directory is --chain-dir (--data-dir, the
// store's directory elsewhere, still works, deprecated), and it logs as
// the log settings say (JSON by default, MARLOWE_RT_LOG_FORMAT and
// MARLOWE_RT_LOG_LEVEL too).
func TestDevnetFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--network-magic", "4294967296"}, "--network-magic 4294967296: want 1 to 4294967295"},
		{[]string{"--network-magic", "-1"}, "invalid argument"},
		{[]string{"--chain-dir", "d", "--replay", "f"}, "--chain-dir keeps a generated chain"},
		{[]string{"--data-dir", "d", "--replay", "f"}, "--chain-dir keeps a generated chain"},
		{[]string{"--prefix-blocks", "3"}, "give --chain-dir or --replay"},
	} {
		code, _, stderr := runCLI(t, "", append([]string{"devnet", "--socket", filepath.Join(t.TempDir(), "s")}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("devnet %v: exit %d %q, want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	bin := buildBinary(t)
	// devnet runs until stopped: start it, wait for its chain, stop it.
	logs := func(env []string, args ...string) string {
		t.Helper()
		socket := filepath.Join(t.TempDir(), "node.socket")
		cmd := exec.Command(bin, append([]string{"devnet", "--socket", socket, "--blocks", "2", "--block-rate", "0"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		node := startCmd(t, "the devnet", cmd, false)
		waitUntil(t, 30*time.Second, "the devnet's banner", func() bool { return strings.Contains(node.stderr.String(), "follow it with") })
		node.terminate(t)
		return node.stderr.String()
	}
	logLine := func(out, msg string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, msg) {
				return l
			}
		}
		return ""
	}
	if l := logLine(logs(nil), "devnet node listening"); !strings.HasPrefix(l, `{"level":"info"`) {
		t.Errorf("by default: %q, want a JSON line", l)
	}
	if l := logLine(logs([]string{"MARLOWE_RT_LOG_FORMAT=console"}), "devnet node listening"); l == "" || strings.HasPrefix(l, "{") || !strings.Contains(l, "INFO") {
		t.Errorf("MARLOWE_RT_LOG_FORMAT=console: %q", l)
	}
	if out := logs([]string{"MARLOWE_RT_LOG_LEVEL=warn"}); logLine(out, "devnet node listening") != "" {
		t.Errorf("MARLOWE_RT_LOG_LEVEL=warn logs info lines:\n%s", out)
	}
	dir := t.TempDir()
	out := logs(nil, "--data-dir", dir)
	if !strings.Contains(out, "devnet --data-dir is deprecated: use --chain-dir") {
		t.Errorf("--data-dir is not said to be deprecated:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, DevnetChainFile)); err != nil {
		t.Errorf("--data-dir kept no chain: %v", err)
	}
}
