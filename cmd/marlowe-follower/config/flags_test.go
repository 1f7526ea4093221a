package config

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestFlagTypesInHelp: --help shows each flag's type (durations, whole
// numbers, lists), a bool flag none, and the flags still load.
func TestFlagTypesInHelp(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	RegisterFlags(fs)
	help := fs.FlagUsages()
	for _, want := range []string{"--min-backoff duration", "--query-port int", "--network-magic uint", "--cors-origins strings",
		"--node-socket string", "(default 3780)", "(default 200ms)"} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if m := regexp.MustCompile(`--ui \S+ `).FindString(help); m != "" {
		t.Errorf("the bool flag --ui shows a type: %q", m)
	}
	for _, s := range Settings() {
		if s.Type != "string" && strings.Contains(help, "--"+s.Flag+" string ") {
			t.Errorf("--%s (%s) shows as a string", s.Flag, s.Type)
		}
	}
	if err := fs.Parse([]string{"--min-backoff", "750ms", "--query-port", "9", "--ui=false", "--cors-origins", "http://a.example"}); err != nil {
		t.Fatal(err)
	}
	l, err := Load(fs, "", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if l.Config.Node.MinBackoff != 750*time.Millisecond || l.Config.Query.Port != 9 || l.Config.Query.UI || len(l.Config.CORS.Origins) != 1 {
		t.Fatalf("%+v", l.Config)
	}
}
