package validate

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	unitFile      = "deploy/systemd/marlowe-follower.service"
	unitEnvFile   = "deploy/systemd/env.example"
	sysusersFile  = "deploy/systemd/marlowe-follower.sysusers"
	unitEnvTarget = "/etc/marlowe-follower/env"
)

// unitEntry is one Key=Value line of a unit file.
type unitEntry struct {
	section, key, value string
	line                int
}

// unit is a parsed systemd unit file: the INI dialect of systemd.syntax(7)
// (sections, Key=Value, # and ; comments, backslash continuation lines,
// repeated keys).
type unit []unitEntry

func parseUnit(t *testing.T, text string) unit {
	t.Helper()
	var (
		u       unit
		section string
		pending string
		start   int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		raw := sc.Text()
		line := strings.TrimSpace(raw)
		if pending == "" {
			start = n
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
		}
		if strings.HasSuffix(line, `\`) {
			pending += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line = pending + line
		pending = ""
		if strings.HasPrefix(line, "[") {
			if !strings.HasSuffix(line, "]") {
				t.Errorf("%s:%d: bad section header %q", unitFile, start, line)
			}
			section = strings.Trim(line, "[]")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Errorf("%s:%d: not a Key=Value line inside a section: %q", unitFile, start, line)
			continue
		}
		u = append(u, unitEntry{section: section, key: strings.TrimSpace(k), value: strings.TrimSpace(v), line: start})
	}
	if pending != "" {
		t.Errorf("%s: file ends inside a continuation line", unitFile)
	}
	return u
}

// values returns every value of a key in a section, in order.
func (u unit) values(section, key string) []string {
	var out []string
	for _, e := range u {
		if e.section == section && e.key == key {
			out = append(out, e.value)
		}
	}
	return out
}

// get returns the effective (last) value of a key.
func (u unit) get(section, key string) string {
	v := u.values(section, key)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, string(readRepoFile(t, unitFile)))
	sections := map[string]bool{}
	for _, e := range u {
		sections[e.section] = true
	}
	for _, s := range []string{"Unit", "Service", "Install"} {
		if !sections[s] {
			t.Errorf("no [%s] section", s)
		}
	}

	want := map[string]string{
		"Type":             "simple",
		"User":             "marlowe-follower",
		"Group":            "marlowe-follower",
		"EnvironmentFile":  unitEnvTarget,
		"Restart":          "on-failure",
		"TimeoutStopSec":   "30",
		"KillSignal":       "SIGTERM",
		"StateDirectory":   "marlowe-follower",
		"NoNewPrivileges":  "yes",
		"ProtectSystem":    "strict",
		"ProtectHome":      "yes",
		"PrivateTmp":       "yes",
		"PrivateDevices":   "yes",
		"RestrictSUIDSGID": "yes",
		"LockPersonality":  "yes",
		// Empty: no capabilities at all.
		"CapabilityBoundingSet": "",
		"AmbientCapabilities":   "",
	}
	for k, v := range want {
		if len(u.values("Service", k)) == 0 {
			t.Errorf("[Service] %s is not set (want %q)", k, v)
		} else if got := u.get("Service", k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}

	exec := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec) < 2 || !filepath.IsAbs(exec[0]) || filepath.Base(exec[0]) != "marlowe-follower" || exec[1] != "run" {
		t.Errorf("ExecStart=%q, want an absolute path to marlowe-follower and the run subcommand", u.get("Service", "ExecStart"))
	}
	stateDir := "/var/lib/" + u.get("Service", "StateDirectory")
	if !slices.ContainsFunc(u.values("Service", "ReadWritePaths"), func(v string) bool { return slices.Contains(strings.Fields(v), stateDir) }) {
		t.Errorf("ReadWritePaths must include the state directory %s (ProtectSystem=strict)", stateDir)
	}
	dataDir := ""
	for _, v := range u.values("Service", "Environment") {
		for _, kv := range strings.Fields(v) {
			if val, ok := strings.CutPrefix(strings.Trim(kv, `"`), "MARLOWE_RT_DATA_DIR="); ok {
				dataDir = val
			}
		}
		checkKnownVars(t, unitFile+" Environment=", marloweVarsIn(v))
	}
	if dataDir != stateDir {
		t.Errorf("MARLOWE_RT_DATA_DIR=%q, want the state directory %s (the only writable place)", dataDir, stateDir)
	}
	if d, err := time.ParseDuration(u.get("Service", "TimeoutStopSec") + "s"); err != nil || d < 20*time.Second {
		t.Errorf("TimeoutStopSec=%q must leave the ~15 s graceful shutdown room", u.get("Service", "TimeoutStopSec"))
	}
	families := strings.Fields(u.get("Service", "RestrictAddressFamilies"))
	for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6"} {
		if !slices.Contains(families, f) {
			t.Errorf("RestrictAddressFamilies=%v lacks %s (AF_UNIX: the node socket; AF_INET*: APIs and PostgreSQL)", families, f)
		}
	}
	if !slices.Contains(strings.Fields(u.get("Unit", "After")), "network-online.target") ||
		!slices.Contains(strings.Fields(u.get("Unit", "Wants")), "network-online.target") {
		t.Errorf("[Unit] want After= and Wants=network-online.target")
	}
	if u.get("Install", "WantedBy") != "multi-user.target" {
		t.Errorf("[Install] WantedBy=%q, want multi-user.target", u.get("Install", "WantedBy"))
	}

	// The sysusers.d line creates the same user.
	found := false
	for _, line := range strings.Split(string(readRepoFile(t, sysusersFile)), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "u" && f[1] == u.get("Service", "User") {
			found = true
		}
	}
	if !found {
		t.Errorf("%s does not create the user %s", sysusersFile, u.get("Service", "User"))
	}
}

func TestSystemdEnvExample(t *testing.T) {
	env, order := parseEnvFile(t, unitEnvFile)
	checkKnownVars(t, unitEnvFile, marloweVarsIn(strings.Join(order, " ")))
	vars := configVars(t)
	for k, v := range env {
		if vars[k].Secret && v != "" && !strings.Contains(v, "CHANGE-ME") {
			t.Errorf("%s: %s must hold a marked placeholder (CHANGE-ME)", unitEnvFile, k)
		}
	}
	if env["MARLOWE_RT_NODE_SOCKET"] == "" {
		t.Errorf("%s: MARLOWE_RT_NODE_SOCKET is not set", unitEnvFile)
	}
	if _, err := strconv.ParseUint(env["MARLOWE_RT_NETWORK_MAGIC"], 10, 32); err != nil {
		t.Errorf("%s: MARLOWE_RT_NETWORK_MAGIC=%q", unitEnvFile, env["MARLOWE_RT_NETWORK_MAGIC"])
	}
}

// TestSystemdAnalyze runs systemd's own checks where systemd-analyze is
// installed (it needs no running systemd): `verify` reports unknown keys and
// bad values, `security --offline` the exposure score. The ExecStart binary
// is replaced by a stub, since marlowe-follower is not installed here.
func TestSystemdAnalyze(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed; the unit was checked by the Go parser only")
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "marlowe-follower")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := string(readRepoFile(t, unitFile))
	u := parseUnit(t, text)
	exec0 := strings.Fields(u.get("Service", "ExecStart"))[0]
	text = strings.ReplaceAll(text, "ExecStart="+exec0, "ExecStart="+stub)
	unitPath := filepath.Join(dir, "marlowe-follower.service")
	if err := os.WriteFile(unitPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := commandOutput(ctx, bin, "verify", "--man=no", unitPath)
	// Warnings about this unit name its file; other units' noise does not.
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, unitPath) || strings.Contains(line, "marlowe-follower.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}

	out, err = commandOutput(ctx, bin, "security", "--offline=yes", "--threshold=20", "--no-pager", unitPath)
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 or failure: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Overall exposure level") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func commandOutput(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=")
	b, err := cmd.CombinedOutput()
	return string(b), err
}
