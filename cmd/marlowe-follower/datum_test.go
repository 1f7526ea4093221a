package main

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// realDatum returns the hex of the MarloweData of a real validator run.
func realDatum(t *testing.T) string {
	t.Helper()
	files, _ := filepath.Glob("../../testdata/marlowe-plutus-benchmarks/semantics/*.benchmark")
	if len(files) == 0 {
		t.Fatal("no benchmark files")
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	d, err := pd.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(pd.Encode(d.(*pd.Constr).Fields[0]))
}

func TestDatumDecodeEncodeHash(t *testing.T) {
	datum := realDatum(t)
	code, js, stderr := runCLI(t, datum+"\n", "datum", "decode", "--type", "marlowe-data")
	if code != 0 {
		t.Fatalf("decode: exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(js, `{"marloweParams":{"rolesCurrency":`) {
		t.Fatalf("decode output %.80s", js)
	}
	code, back, stderr := runCLI(t, js, "datum", "encode", "--type", "marlowe-data")
	if code != 0 || strings.TrimSpace(back) != datum {
		t.Fatalf("encode: exit %d, %s, identical=%v", code, stderr, strings.TrimSpace(back) == datum)
	}
	code, hash, _ := runCLI(t, datum, "datum", "hash")
	raw, _ := hex.DecodeString(datum)
	want := marlowe.DatumHash(raw)
	if code != 0 || strings.TrimSpace(hash) != hex.EncodeToString(want[:]) {
		t.Fatalf("hash: exit %d, %s", code, hash)
	}
	code, generic, _ := runCLI(t, datum, "datum", "decode", "--type", "plutus-data")
	if code != 0 || !strings.HasPrefix(generic, `{"constructor":0,"fields":[`) {
		t.Fatalf("plutus-data: %d %.60s", code, generic)
	}
	code, again, _ := runCLI(t, generic, "datum", "encode", "--type", "plutus-data")
	if code != 0 || strings.TrimSpace(again) != datum {
		t.Fatal("plutus-data JSON did not encode back to the same bytes")
	}
}

func TestDatumErrors(t *testing.T) {
	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"missing type", "d87980", []string{"datum", "decode"}, 2, "--type is required"},
		{"unknown type", "d87980", []string{"datum", "decode", "--type", "blob"}, 2, `unknown type "blob"`},
		{"unknown flag", "", []string{"datum", "decode", "--bogus"}, 2, "unknown flag"},
		{"extra argument", "", []string{"datum", "hash", "x"}, 2, "accepts 0 arg"},
		{"bad hex", "zz", []string{"datum", "decode", "--type", "contract"}, 1, "bad hex"},
		{"empty", "  \n", []string{"datum", "decode", "--type", "contract"}, 1, "no input"},
		{"bad cbor", "9f01", []string{"datum", "decode", "--type", "plutus-data"}, 1, "unexpected end of input"},
		{"wrong shape", "d87a80", []string{"datum", "decode", "--type", "contract"}, 1, "contract: Contract constructor 1 takes 5 fields, found 0"},
		{"deep path", "d87c9f9fd8799fd8799fd87a9f4172ffd87a9f4172ffd8799f4040ffd9050780ffd87980ffff00d87980ff", []string{"datum", "decode", "--type", "contract"}, 1, "contract.when[0].case.deposits: unknown Value constructor 14"},
		{"datum wrapper", "8200582000", []string{"datum", "decode", "--type", "marlowe-data"}, 1, "cardano-cli's datum wrapper"},
		{"inline wrapper", "8201d81843d87980", []string{"datum", "hash"}, 1, "inline datum option"},
		{"bad json", "{", []string{"datum", "encode", "--type", "state"}, 1, "invalid JSON"},
		{"json shape", `{"when":[],"timeout":"x","timeout_continuation":"close"}`, []string{"datum", "encode", "--type", "contract"}, 1, "contract.timeout: expected an integer"},
		{"hash of non-data", "6161", []string{"datum", "hash"}, 1, "text string is not Plutus Data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if stdout != "" {
				t.Fatalf("stdout %q on error", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("stderr %q should be one line containing %q", stderr, tc.stderr)
			}
		})
	}
}

func TestReset(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"history.sqlite", "history.sqlite-wal", "contracts.sqlite", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, stderr := runCLI(t, "", "reset", "--data-dir", dir); code != exitUsage || !strings.Contains(stderr, "--yes") {
		t.Fatalf("without --yes: %d %s", code, stderr)
	}
	code, out, stderr := runCLI(t, "", "reset", "--yes", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "removed 3 files") {
		t.Fatalf("reset: %d %q %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "keep.txt")); err != nil {
		t.Fatal("reset removed a file that is not the store's")
	}
}
