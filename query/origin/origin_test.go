package origin

import (
	"reflect"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	good := map[string]string{
		"https://dapp.example":        "https://dapp.example",
		"HTTPS://Dapp.Example":        "https://dapp.example",
		"https://dapp.example:443":    "https://dapp.example",
		"http://localhost:80":         "http://localhost",
		"http://localhost:5173":       "http://localhost:5173",
		"http://127.0.0.1:08080":      "http://127.0.0.1:8080",
		"http://[::1]:3000":           "http://[::1]:3000",
		"http://[::1]":                "http://[::1]",
		"https://dapp.example:8443":   "https://dapp.example:8443",
		"chrome-extension://abcdefgh": "chrome-extension://abcdefgh",
	}
	for in, want := range good {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		"dapp.example":             "scheme:// is missing",
		"localhost:3000":           "scheme:// is missing",
		"http:/dapp.example":       "scheme:// is missing",
		"https://dapp.example/":    "write https://dapp.example",
		"https://dapp.example/app": "path",
		"https://dapp.example?x=1": "query",
		"https://dapp.example#x":   "fragment",
		"https://u@dapp.example":   "user",
		"https://":                 "host is missing",
		"https://dapp.example:":    "port is empty",
		"https://dapp.example:0":   "1 to 65535",
		"https://dapp.example:x":   "not a URL",
		"https://*.dapp.example":   "wildcards",
		"null":                     "scheme:// is missing",
		"https://dapp example":     "not a URL",
	}
	for in, want := range bad {
		_, err := Normalize(in)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "scheme://host[:port]") {
			t.Errorf("Normalize(%q): %v, want an error with %q", in, err, want)
		}
	}
}

func TestList(t *testing.T) {
	l, err := Parse([]string{" https://dapp.example ", "", "http://localhost:5173"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Any() || l.Empty() {
		t.Fatal("Any or Empty")
	}
	for o, want := range map[string]bool{
		"https://dapp.example": true, "https://DAPP.example:443": true, "http://localhost:5173": true,
		"http://dapp.example": false, "https://dapp.example:8443": false, "https://evil.example": false,
		"http://localhost:5174": false, "null": false, "": false, "dapp.example": false,
	} {
		if l.Allows(o) != want {
			t.Errorf("Allows(%q) = %v", o, !want)
		}
	}
	anyL, err := Parse([]string{"*"})
	if err != nil || !anyL.Any() || !anyL.Allows("null") || !anyL.Allows("https://x.example") {
		t.Fatalf("*: %v %+v", err, anyL)
	}
	var zero List
	if !zero.Empty() || zero.Allows("https://dapp.example") {
		t.Fatal("the zero list allows")
	}
	if _, err := Parse([]string{"https://ok.example", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("a bad entry: %v", err)
	}
	w := zero.With(OfListener("0.0.0.0:3781")...)
	if !w.Allows("http://localhost:3781") || w.Allows("http://localhost:3780") || zero.Allows("http://localhost:3781") {
		t.Fatal("With")
	}
}

func TestOfListener(t *testing.T) {
	loop := []string{"http://127.0.0.1:3781", "http://localhost:3781", "http://[::1]:3781"}
	for _, addr := range []string{"0.0.0.0:3781", "[::]:3781", ":3781", "127.0.0.1:3781", "[::1]:3781", "localhost:3781", "127.0.0.2:3781"} {
		if got := OfListener(addr); !reflect.DeepEqual(got, loop) {
			t.Errorf("OfListener(%q) = %v", addr, got)
		}
	}
	if got := OfListener("10.1.2.3:3781"); !reflect.DeepEqual(got, []string{"http://10.1.2.3:3781"}) {
		t.Errorf("a specific address: %v", got)
	}
	if got := OfListener("[2001:db8::1]:3781"); !reflect.DeepEqual(got, []string{"http://[2001:db8::1]:3781"}) {
		t.Errorf("IPv6: %v", got)
	}
	if got := OfListener(":0"); got != nil {
		t.Errorf("port 0: %v", got)
	}
}
