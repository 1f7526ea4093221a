package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRoleRefusals runs the binary with roles it must refuse before it
// opens anything: writer and reader on the embedded SQLite store (no
// database URL) and an unknown role. Each exits non-zero with a message
// naming the setting.
func TestRoleRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	run := func(env []string, args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"run", "--data-dir", dir, "--query-port", "0", "--streaming-port", "0",
			"--node-socket", dir + "/none.socket"}, args...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%v: exited with %v (%s)", args, err, out)
		}
		return exit.ExitCode(), string(out)
	}
	for _, role := range []string{"writer", "reader"} {
		for _, how := range [][]string{{"--role", role}, {"MARLOWE_RT_ROLE=" + role}} {
			var code int
			var out string
			if strings.HasPrefix(how[0], "--") {
				code, out = run([]string{"MARLOWE_RT_DATABASE_URL="}, how...)
			} else {
				code, out = run(append([]string{"MARLOWE_RT_DATABASE_URL="}, how...))
			}
			want := "role (MARLOWE_RT_ROLE) " + role + " needs PostgreSQL: set store.databaseURL (MARLOWE_RT_DATABASE_URL)"
			if code == 0 || !strings.Contains(out, want) {
				t.Errorf("%s on SQLite (%v): exit %d, output %s", role, how, code, out)
			}
		}
	}
	if code, out := run(nil, "--role", "standby"); code == 0 || !strings.Contains(out, `"standby" is not all, writer or reader`) {
		t.Errorf("unknown role: exit %d, output %s", code, out)
	}
}
