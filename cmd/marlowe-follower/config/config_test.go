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
	file := configFile(t, "node:\n  socket: /file.sock\n  networkMagic: 2\nquery:\n  port: 4000\nstore:\n  databaseURL: postgres://u:secret@h/db\n")
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
		{map[string]string{"MARLOWE_RT_CORS_ORIGINS": "https://ok.example,dapp.example"}, `cors.origins (MARLOWE_RT_CORS_ORIGINS): origin "dapp.example": the scheme:// is missing`},
		{map[string]string{"MARLOWE_RT_CORS_ORIGINS": "https://dapp.example/"}, "(write https://dapp.example)"},
		{map[string]string{"MARLOWE_RT_STREAMING_ORIGINS": "https://*.example"}, "streaming.origins (MARLOWE_RT_STREAMING_ORIGINS): origin \"https://*.example\": wildcards"},
	}
	for _, c := range cases {
		_, err := Load(nil, "", func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.env, err, c.want)
		}
	}
	fileRefused(t, "unknown key", "node:\n  sockt: /x\n", "unknown setting node.sockt")
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

// TestOrigins: cors.origins and streaming.origins from each source, lists
// in YAML, the fallback of streaming.origins, and run --devnet's default.
func TestOrigins(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	envOf := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	load := func(t *testing.T, file string, env func(string) (string, bool), flags ...string) *Loaded {
		t.Helper()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		RegisterFlags(fs)
		if err := fs.Parse(flags); err != nil {
			t.Fatal(err)
		}
		l, err := Load(fs, file, env)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	eq := func(t *testing.T, what string, got []string, want ...string) {
		t.Helper()
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	yamlList := configFile(t, "cors:\n  origins:\n    - https://dapp.example\n    - http://localhost:5173\nstreaming:\n  origins: https://ws.example, http://localhost:8000\n")

	l := load(t, "", none)
	eq(t, "default cors.origins", l.Config.CORS.Origins)
	eq(t, "default streaming origins", l.Config.StreamingOrigins())
	if l.Sources["cors.origins"] != FromDefault {
		t.Errorf("source %s", l.Sources["cors.origins"])
	}

	l = load(t, yamlList, none)
	eq(t, "YAML list", l.Config.CORS.Origins, "https://dapp.example", "http://localhost:5173")
	eq(t, "YAML comma-separated string", l.Config.Streaming.Origins, "https://ws.example", "http://localhost:8000")
	eq(t, "streaming.origins set", l.Config.StreamingOrigins(), "https://ws.example", "http://localhost:8000")

	l = load(t, yamlList, envOf(map[string]string{"MARLOWE_RT_CORS_ORIGINS": " https://env.example , ,http://127.0.0.1:3000"}))
	eq(t, "env over file", l.Config.CORS.Origins, "https://env.example", "http://127.0.0.1:3000")

	l = load(t, "", envOf(map[string]string{"MARLOWE_RT_CORS_ORIGINS": "https://env.example"}), "--cors-origins=*")
	eq(t, "flag over env", l.Config.CORS.Origins, "*")
	eq(t, "streaming.origins falls back to cors.origins", l.Config.StreamingOrigins(), "*")
	if out, err := l.Redacted(); err != nil || !strings.Contains(string(out), "origins:\n        - '*'") {
		t.Errorf("shown as:\n%s (%v)", out, err)
	}

	l = load(t, "", none, "--streaming-origins=https://ws.example", "--cors-origins=https://dapp.example")
	eq(t, "both set", l.Config.StreamingOrigins(), "https://ws.example")

	fileRefused(t, "a map", "cors:\n  origins:\n    a: b\n", "cors.origins must be a list or a comma-separated string")
	fileRefused(t, "a bad origin in the file", "cors:\n  origins: [https://ok.example, http://x.example/]\n", "cors.origins (MARLOWE_RT_CORS_ORIGINS)")

	t.Run("devnet", func(t *testing.T) {
		l := load(t, "", none)
		cfg := l.Config
		l.ApplyDevnetDefaults(&cfg)
		eq(t, "devnet cors.origins", cfg.CORS.Origins, "*")
		eq(t, "devnet streaming origins", cfg.StreamingOrigins(), "*")
		eq(t, "the loaded configuration is untouched", l.Config.CORS.Origins)
		for _, c := range []struct {
			name  string
			env   map[string]string
			flags []string
			want  []string
		}{
			{"set by a flag", nil, []string{"--cors-origins=http://localhost:5173"}, []string{"http://localhost:5173"}},
			{"set by the environment", map[string]string{"MARLOWE_RT_CORS_ORIGINS": "https://dapp.example"}, nil, []string{"https://dapp.example"}},
			{"set empty", map[string]string{"MARLOWE_RT_CORS_ORIGINS": ""}, nil, nil},
		} {
			l := load(t, "", envOf(c.env), c.flags...)
			cfg := l.Config
			l.ApplyDevnetDefaults(&cfg)
			eq(t, c.name, cfg.CORS.Origins, c.want...)
		}
		l = load(t, "", none, "--streaming-origins=https://ws.example")
		cfg = l.Config
		l.ApplyDevnetDefaults(&cfg)
		eq(t, "streaming.origins set under devnet", cfg.StreamingOrigins(), "https://ws.example")
	})
}

// TestSwitches: query.ui from each source, --ui alone, --no-ui, and the
// errors (a value that is no switch, --ui and --no-ui at odds).
func TestSwitches(t *testing.T) {
	envOf := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	off := configFile(t, "query:\n  ui: no\n")
	bad := configFile(t, "query:\n  ui: maybe\n")
	cases := []struct {
		file  string
		env   map[string]string
		flags []string
		want  bool
		err   string
	}{
		{want: true},
		{file: off, want: false},
		{env: map[string]string{"MARLOWE_RT_QUERY_UI": "false"}, want: false},
		{env: map[string]string{"MARLOWE_RT_QUERY_UI": "ON"}, want: true},
		{file: off, flags: []string{"--ui"}, want: true},
		{flags: []string{"--no-ui"}, want: false},
		{flags: []string{"--ui=false"}, want: false},
		{env: map[string]string{"MARLOWE_RT_QUERY_UI": "0"}, flags: []string{"--no-ui=false"}, want: true},
		{flags: []string{"--ui", "--no-ui"}, err: "contradict"},
		{flags: []string{"--ui=false", "--no-ui=false"}, err: "contradict"},
		{flags: []string{"--ui=perhaps"}, err: `--ui: "perhaps" is not true or false`},
		{env: map[string]string{"MARLOWE_RT_QUERY_UI": "2"}, err: "MARLOWE_RT_QUERY_UI"},
		{file: bad, err: "query.ui"},
	}
	for _, c := range cases {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		RegisterFlags(fs)
		if err := fs.Parse(c.flags); err != nil {
			t.Fatal(err)
		}
		l, err := Load(fs, c.file, envOf(c.env))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if l.Config.Query.UI != c.want {
			t.Errorf("%+v: query.ui %v", c, l.Config.Query.UI)
		}
		if len(c.flags) > 0 && l.Sources["query.ui"] != FromFlag {
			t.Errorf("%+v: source %s", c, l.Sources["query.ui"])
		}
	}
}

// TestRole: role from each source (a top-level YAML key), writer and
// reader refused on the embedded SQLite store, and an unknown role named.
func TestRole(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	envOf := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	l, err := Load(nil, "", none)
	if err != nil || l.Config.Role != RoleAll || l.Sources["role"] != FromDefault {
		t.Fatalf("default role: %v %+v", err, l)
	}
	const pg = "postgres://u@h/db"
	file := configFile(t, "role: writer\nstore:\n  databaseURL: "+pg+"\n")
	l, err = Load(nil, file, none)
	if err != nil || l.Config.Role != RoleWriter || l.Sources["role"] != FromFile {
		t.Fatalf("role from the file: %v", err)
	}
	l, err = Load(nil, file, envOf(map[string]string{"MARLOWE_RT_ROLE": "reader"}))
	if err != nil || l.Config.Role != RoleReader || l.Sources["role"] != FromEnv {
		t.Fatalf("role from the environment: %v", err)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--role=all"}); err != nil {
		t.Fatal(err)
	}
	l, err = Load(fs, file, envOf(map[string]string{"MARLOWE_RT_ROLE": "reader"}))
	if err != nil || l.Config.Role != RoleAll || l.Sources["role"] != FromFlag {
		t.Fatalf("role from the flag: %v", err)
	}
	out, err := l.Redacted()
	if err != nil || !strings.Contains(string(out), "role: all\n") {
		t.Fatalf("shown: %v\n%s", err, out)
	}
	for _, role := range []string{RoleWriter, RoleReader} {
		_, err := Load(nil, "", envOf(map[string]string{"MARLOWE_RT_ROLE": role}))
		want := "role (MARLOWE_RT_ROLE) " + role + " needs PostgreSQL: set store.databaseURL"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s on SQLite: got %v, want %q", role, err, want)
		}
		if _, err := Load(nil, "", envOf(map[string]string{"MARLOWE_RT_ROLE": role, "MARLOWE_RT_DATABASE_URL": pg})); err != nil {
			t.Errorf("%s on PostgreSQL: %v", role, err)
		}
	}
	if _, err := Load(nil, "", envOf(map[string]string{"MARLOWE_RT_ROLE": "standby"})); err == nil ||
		!strings.Contains(err.Error(), `role (MARLOWE_RT_ROLE): "standby" is not all, writer or reader`) {
		t.Errorf("unknown role: %v", err)
	}
	fileRefused(t, "role as a section", "role:\n  name: writer\n", "role must be a single value")
	fileRefused(t, "a section as a value", "node: /x.sock\n", "node must be a section of settings")
}

// TestReadDatabaseURL: the replica URL is a reader's setting, secret when
// shown, and refused for the roles that write.
func TestReadDatabaseURL(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	const pg, replica = "postgres://u@primary/db", "postgres://u:hidden@replica/db"
	l, err := Load(nil, "", env(map[string]string{"MARLOWE_RT_ROLE": "reader", "MARLOWE_RT_DATABASE_URL": pg,
		"MARLOWE_RT_READ_DATABASE_URL": replica}))
	if err != nil || l.Config.Store.ReadDatabaseURL != replica || l.Sources["store.readDatabaseURL"] != FromEnv {
		t.Fatalf("a reader's replica: %v %+v", err, l)
	}
	out, err := l.Redacted()
	if err != nil || strings.Contains(string(out), "hidden") {
		t.Fatalf("the replica URL shown unredacted: %v\n%s", err, out)
	}
	for _, role := range []string{RoleAll, RoleWriter} {
		_, err := Load(nil, "", env(map[string]string{"MARLOWE_RT_ROLE": role, "MARLOWE_RT_DATABASE_URL": pg,
			"MARLOWE_RT_READ_DATABASE_URL": replica}))
		want := "store.readDatabaseURL (MARLOWE_RT_READ_DATABASE_URL) is for role reader, not " + role
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a replica for role %s: got %v, want %q", role, err, want)
		}
	}
}

// TestStreamingLeaseSettings: streaming.leaseTTL and streaming.leaseRetry
// from their defaults, the environment and flags, and refused when not
// positive or when the retry is not shorter than the lease's life.
func TestStreamingLeaseSettings(t *testing.T) {
	load := func(t *testing.T, env map[string]string, flags ...string) (*Loaded, error) {
		t.Helper()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		RegisterFlags(fs)
		if err := fs.Parse(flags); err != nil {
			t.Fatal(err)
		}
		return Load(fs, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	l, err := load(t, nil)
	if err != nil || l.Config.Streaming.LeaseTTL != 10*time.Second || l.Config.Streaming.LeaseRetry != 100*time.Millisecond || l.Config.Validate() != nil {
		t.Fatalf("defaults: %v %+v", err, l.Config.Streaming)
	}
	l, err = load(t, map[string]string{"MARLOWE_RT_STREAMING_LEASE_TTL": "3s", "MARLOWE_RT_STREAMING_LEASE_RETRY": "250ms"})
	if err != nil || l.Config.Streaming.LeaseTTL != 3*time.Second || l.Config.Streaming.LeaseRetry != 250*time.Millisecond || l.Sources["streaming.leaseTTL"] != FromEnv {
		t.Fatalf("env: %v %+v", err, l.Config.Streaming)
	}
	l, err = load(t, map[string]string{"MARLOWE_RT_STREAMING_LEASE_TTL": "3s"}, "--streaming-lease-ttl", "20s", "--streaming-lease-retry", "1s")
	if err != nil || l.Config.Streaming.LeaseTTL != 20*time.Second || l.Config.Streaming.LeaseRetry != time.Second {
		t.Fatalf("flags: %v %+v", err, l.Config.Streaming)
	}
	for _, bad := range [][]string{{"--streaming-lease-ttl", "0s"}, {"--streaming-lease-retry", "0s"}, {"--streaming-lease-ttl", "1s", "--streaming-lease-retry", "1s"}} {
		l, err := load(t, nil, bad...)
		if err == nil {
			err = l.Config.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "streaming.leaseTTL") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestWriterLeaseTTLSetting: store.writerLeaseTTL from its default, the
// file, the environment and a flag (each over the one before), and refused
// below storage.MinLeaseTTL with a message naming the setting.
func TestWriterLeaseTTLSetting(t *testing.T) {
	file := configFile(t, "store:\n  writerLeaseTTL: 4s\n")
	load := func(t *testing.T, file string, env map[string]string, flags ...string) (*Loaded, error) {
		t.Helper()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		RegisterFlags(fs)
		if err := fs.Parse(flags); err != nil {
			t.Fatal(err)
		}
		return Load(fs, file, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	for _, c := range []struct {
		file  string
		env   map[string]string
		flags []string
		want  time.Duration
		from  Source
	}{
		{want: 10 * time.Second, from: FromDefault},
		{file: file, want: 4 * time.Second, from: FromFile},
		{file: file, env: map[string]string{"MARLOWE_RT_WRITER_LEASE_TTL": "3s"}, want: 3 * time.Second, from: FromEnv},
		{file: file, env: map[string]string{"MARLOWE_RT_WRITER_LEASE_TTL": "3s"}, flags: []string{"--writer-lease-ttl", "1500ms"},
			want: 1500 * time.Millisecond, from: FromFlag},
	} {
		l, err := load(t, c.file, c.env, c.flags...)
		if err != nil || l.Config.Store.WriterLeaseTTL != c.want || l.Sources["store.writerLeaseTTL"] != c.from || l.Config.Validate() != nil {
			t.Errorf("%+v: %v, got %s from %v", c, err, l.Config.Store.WriterLeaseTTL, l.Sources["store.writerLeaseTTL"])
		}
	}
	for _, bad := range []string{"0s", "299ms"} {
		l, err := load(t, "", nil, "--writer-lease-ttl", bad)
		if err == nil {
			err = l.Config.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "store.writerLeaseTTL (MARLOWE_RT_WRITER_LEASE_TTL)") {
			t.Errorf("--writer-lease-ttl %s: %v", bad, err)
		}
	}
}

// fileRefused writes yml as a configuration file and checks that Load
// refuses it (the environment empty) with an error that contains want.
func fileRefused(t *testing.T, what, yml, want string) {
	t.Helper()
	if _, err := Load(nil, configFile(t, yml), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v", what, err)
	}
}

// configFile writes yml to a new configuration file and returns its path.
func configFile(t *testing.T, yml string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}
