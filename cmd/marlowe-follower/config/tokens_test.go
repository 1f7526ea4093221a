package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/streaming/auth"
)

// TestStreamingTokens reads several named tokens with scopes from the YAML
// file and from the environment, keeps the single-token setting as the
// token named default, refuses bad lists naming the setting, and redacts
// the secrets when the configuration is shown.
func TestStreamingTokens(t *testing.T) {
	file := configFile(t, "streaming:\n  tokens:\n    - app1:s3cret-one\n    - ops:s3cret-two:admin\n    - feeds:s3cret-three:subscribe+streams\n  token: legacy-secret\n")
	none := func(string) (string, bool) { return "", false }
	l, err := Load(nil, file, none)
	if err != nil {
		t.Fatal(err)
	}
	want := []auth.Token{
		{Name: "app1", Secret: "s3cret-one"},
		{Name: "ops", Secret: "s3cret-two", Scopes: []auth.Scope{auth.ScopeAdmin}},
		{Name: "feeds", Secret: "s3cret-three", Scopes: []auth.Scope{auth.ScopeSubscribe, auth.ScopeStreams}},
		{Name: auth.LegacyName, Secret: "legacy-secret"},
	}
	if got := l.Config.StreamingTokens(); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the file: %+v", got)
	}
	if l.Config.Open() || l.Config.ListenHost("") != "0.0.0.0" || l.Config.ListenHost("10.0.0.5") != "10.0.0.5" {
		t.Fatal("with tokens the ports listen on every interface unless set")
	}
	shown, err := l.Redacted()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(shown), "s3cret") || strings.Contains(string(shown), "legacy-secret") {
		t.Fatalf("secrets shown:\n%s", shown)
	}

	env := map[string]string{"MARLOWE_RT_STREAMING_TOKENS": "a:secret-a, b:secret-b:streams"}
	l, err = Load(nil, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	want = []auth.Token{{Name: "a", Secret: "secret-a"}, {Name: "b", Secret: "secret-b", Scopes: []auth.Scope{auth.ScopeStreams}}}
	if got := l.Config.StreamingTokens(); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the environment: %+v", got)
	}

	// The single token alone: one token named default, as before.
	l, err = Load(nil, "", func(k string) (string, bool) {
		return "only", k == "MARLOWE_RT_STREAMING_TOKEN"
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Config.StreamingTokens(); !reflect.DeepEqual(got, []auth.Token{{Name: "default", Secret: "only"}}) {
		t.Fatalf("the single token: %+v", got)
	}

	for text, msg := range map[string]string{
		"nosecret":                 "is not NAME:SECRET",
		"a:x,a:y":                  `token name "a" is given twice`,
		"a:x,b:x":                  "its secret is another token's",
		"a:x:root":                 `unknown scope "root"`,
		"bad name:x":               "1 to 64 of the characters",
		"anonymous:x":              "reserved",
		"default:x":                "", // only a conflict with streaming.token, below
		"a:x:subscribe:extra-part": "is not NAME:SECRET",
	} {
		env := map[string]string{"MARLOWE_RT_STREAMING_TOKENS": text}
		if text == "default:x" {
			env["MARLOWE_RT_STREAMING_TOKEN"] = "y"
			msg = `token name "default" is given twice`
		}
		_, err := Load(nil, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err == nil || !strings.Contains(err.Error(), "streaming.tokens (MARLOWE_RT_STREAMING_TOKENS)") || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v", text, err)
		}
		if err != nil && strings.Contains(err.Error(), ":x") {
			t.Errorf("%q: the error shows a secret: %v", text, err)
		}
	}
}

// TestLoopbackByDefault: without a token both ports listen on loopback
// unless their host is set.
func TestLoopbackByDefault(t *testing.T) {
	l, err := Load(nil, "", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	c := &l.Config
	if !c.Open() || c.Query.Host != "" || c.Streaming.Host != "" ||
		c.ListenHost(c.Query.Host) != "127.0.0.1" || c.ListenHost(c.Streaming.Host) != "127.0.0.1" {
		t.Fatalf("open: query %q streaming %q", c.ListenHost(c.Query.Host), c.ListenHost(c.Streaming.Host))
	}
	l, err = Load(nil, "", func(k string) (string, bool) { return "0.0.0.0", k == "MARLOWE_RT_QUERY_HOST" })
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Config.ListenHost(l.Config.Query.Host); got != "0.0.0.0" {
		t.Fatalf("an address the operator set: %q", got)
	}
}
