package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
)

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte("node:\n  socket: /file.sock\n  networkMagic: 2\nquery:\n  port: 4000\nstore:\n  databaseURL: postgres://u:secret@h/db\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MARLOWE_RT_NODE_SOCKET": "/env.sock", "MARLOWE_RT_QUERY_PORT": "4001"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cases := []struct {
		name   string
		file   string
		env    bool
		flags  []string
		socket string
		magic  uint32
		port   int
		source Source
	}{
		{"defaults", "", false, nil, "", DefaultNetworkMagic, DefaultQueryPort, FromDefault},
		{"file over defaults", file, false, nil, "/file.sock", 2, 4000, FromFile},
		{"env over file", file, true, nil, "/env.sock", 2, 4001, FromEnv},
		{"flag over env", file, true, []string{"--node-socket=/flag.sock", "--query-port=4002"}, "/flag.sock", 2, 4002, FromFlag},
		{"flag over defaults", "", false, []string{"--network-magic=1"}, "", 1, DefaultQueryPort, FromDefault},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
			RegisterFlags(fs)
			if err := fs.Parse(c.flags); err != nil {
				t.Fatal(err)
			}
			e := func(string) (string, bool) { return "", false }
			if c.env {
				e = lookup
			}
			l, err := Load(fs, c.file, e)
			if err != nil {
				t.Fatal(err)
			}
			if l.Config.Node.Socket != c.socket || l.Config.Node.NetworkMagic != c.magic || l.Config.Query.Port != c.port {
				t.Fatalf("got socket %q magic %d port %d", l.Config.Node.Socket, l.Config.Node.NetworkMagic, l.Config.Query.Port)
			}
			if l.Sources["node.socket"] != c.source {
				t.Fatalf("source of node.socket: %s", l.Sources["node.socket"])
			}
		})
	}
}

func TestValidationNamesTheSetting(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"MARLOWE_RT_QUERY_PORT": "70000"}, "query.port (MARLOWE_RT_QUERY_PORT)"},
		{map[string]string{"MARLOWE_RT_QUERY_PORT": "x"}, "MARLOWE_RT_QUERY_PORT: \"x\" is not a whole number"},
		{map[string]string{"MARLOWE_RT_NETWORK_MAGIC": "-1"}, "MARLOWE_RT_NETWORK_MAGIC"},
		{map[string]string{"MARLOWE_RT_LOG_FORMAT": "xml"}, "log.format"},
		{map[string]string{"MARLOWE_RT_LOG_LEVEL": "loud"}, "log.level"},
		{map[string]string{"MARLOWE_RT_MIN_BACKOFF": "soon"}, "MARLOWE_RT_MIN_BACKOFF: \"soon\" is not a duration"},
		{map[string]string{"MARLOWE_RT_QUERY_PORT": "5000", "MARLOWE_RT_STREAMING_PORT": "5000"}, "both 5000"},
	}
	for _, c := range cases {
		_, err := Load(nil, "", func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.env, err, c.want)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	_ = os.WriteFile(bad, []byte("node:\n  sockt: /x\n"), 0o600)
	if _, err := Load(nil, bad, func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "unknown setting node.sockt") {
		t.Errorf("unknown key: %v", err)
	}
}

func TestRedactedAndLevels(t *testing.T) {
	l, err := Load(nil, "", func(k string) (string, bool) {
		if k == "MARLOWE_RT_DATABASE_URL" {
			return "postgres://u:pw@h/db", true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "pw@") || !strings.Contains(string(out), "<redacted>") {
		t.Fatalf("not redacted:\n%s", out)
	}
	if l.Config.Node.MaxBackoff != 30*time.Second {
		t.Fatalf("default duration %s", l.Config.Node.MaxBackoff)
	}
	lv, err := ParseLevels("warn, chainsync=debug")
	if err != nil {
		t.Fatal(err)
	}
	if !lv.enabled("chainsync", zapcore.DebugLevel) || lv.enabled("history", zapcore.InfoLevel) || !lv.enabled("history.store", zapcore.WarnLevel) {
		t.Fatalf("levels %+v", lv)
	}
}

// TestReferenceIsCurrent keeps docs/configuration.md equal to Reference().
func TestReferenceIsCurrent(t *testing.T) {
	want := Reference()
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "configuration.md"))
	if err != nil || string(got) != want {
		t.Fatalf("docs/configuration.md is out of date: run `go run ./cmd/marlowe-follower config --reference > docs/configuration.md`")
	}
}
