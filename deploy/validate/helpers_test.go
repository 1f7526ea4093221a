package validate

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Paths of the repository and of its deploy directory. Tests run in the
// package directory, deploy/validate.
var (
	repoRoot  = mustAbs("../..")
	deployDir = filepath.Join(repoRoot, "deploy")
)

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return abs
}

// readRepoFile reads a file given by its slash-separated path from the
// repository root.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

// Networks and their magic numbers.
var networkMagic = map[string]string{
	"mainnet": "764824073",
	"preprod": "1",
	"preview": "2",
}

// The follower's runtime user and group, as set in deploy/Dockerfile.
const (
	followerUID = 65532
	followerGID = 65532
)

// configVar is one setting of cmd/marlowe-follower/config.
type configVar struct {
	Env     string
	Field   string // Go field path, e.g. Store.DatabaseURL
	Secret  bool
	Default string // the default tag ("" when none)
}

var (
	configVarsOnce sync.Once
	configVarsMap  map[string]configVar
	configVarsErr  error
)

// configVars returns every setting of the configuration struct, keyed by its
// environment variable, read from the struct tags in
// cmd/marlowe-follower/config (non-test files).
func configVars(t *testing.T) map[string]configVar {
	t.Helper()
	configVarsOnce.Do(func() { configVarsMap, configVarsErr = parseConfigVars() })
	if configVarsErr != nil {
		t.Fatalf("read the configuration struct: %v", configVarsErr)
	}
	return configVarsMap
}

func parseConfigVars() (map[string]configVar, error) {
	dir := filepath.Join(repoRoot, "cmd", "marlowe-follower", "config")
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	// Struct types by name, across the package's files.
	structs := map[string]*ast.StructType{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				structs[ts.Name.Name] = st
			}
			return true
		})
	}
	if structs["Config"] == nil {
		return nil, fmt.Errorf("no type Config in %s", dir)
	}
	vars := map[string]configVar{}
	var walk func(prefix string, st *ast.StructType, depth int) error
	walk = func(prefix string, st *ast.StructType, depth int) error {
		if depth > 8 {
			return fmt.Errorf("configuration struct nested too deeply at %s", prefix)
		}
		for _, field := range st.Fields.List {
			tag := reflect.StructTag("")
			if field.Tag != nil {
				s, err := strconv.Unquote(field.Tag.Value)
				if err != nil {
					return err
				}
				tag = reflect.StructTag(s)
			}
			for _, name := range field.Names {
				path := name.Name
				if prefix != "" {
					path = prefix + "." + name.Name
				}
				if env, ok := tag.Lookup("env"); ok {
					if _, dup := vars[env]; dup {
						return fmt.Errorf("environment variable %s used twice", env)
					}
					vars[env] = configVar{Env: env, Field: path, Secret: tag.Get("secret") == "true", Default: tag.Get("default")}
					continue
				}
				if id, ok := field.Type.(*ast.Ident); ok && structs[id.Name] != nil {
					if err := walk(path, structs[id.Name], depth+1); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk("", structs["Config"], 0); err != nil {
		return nil, err
	}
	return vars, nil
}

var envNameRE = regexp.MustCompile(`MARLOWE_RT_[A-Z0-9_]+`)

// marloweVarsIn returns the MARLOWE_RT_* names that a text mentions, sorted
// and without duplicates.
func marloweVarsIn(text string) []string {
	seen := map[string]bool{}
	for _, m := range envNameRE.FindAllString(text, -1) {
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkKnownVars reports every MARLOWE_RT_* name that is not a setting of
// the configuration struct.
func checkKnownVars(t *testing.T, where string, names []string) {
	t.Helper()
	vars := configVars(t)
	for _, n := range names {
		if _, ok := vars[n]; !ok {
			t.Errorf("%s: %s is not a marlowe-follower setting (cmd/marlowe-follower/config has no such env tag)", where, n)
		}
	}
}

// parseEnvFile reads KEY=VALUE lines (no export, no quotes processing beyond
// what systemd and Compose agree on: none here). Blank lines and # comments
// are skipped. It fails on any other line.
func parseEnvFile(t *testing.T, rel string) (map[string]string, []string) {
	t.Helper()
	data := readRepoFile(t, rel)
	env := map[string]string{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	keyRE := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !keyRE.MatchString(k) {
			t.Errorf("%s:%d: not a KEY=VALUE line: %q", rel, n, line)
			continue
		}
		if strings.ContainsAny(v, `"'$`+"`") {
			t.Errorf("%s:%d: %s: quotes and $ are read differently by Compose and systemd; keep values plain", rel, n, k)
		}
		if _, dup := env[k]; dup {
			t.Errorf("%s:%d: %s set twice", rel, n, k)
		}
		env[k] = v
		order = append(order, k)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env, order
}

func TestConfigVarsKnown(t *testing.T) {
	vars := configVars(t)
	// The settings the artefacts rely on; a rename in config.go must show
	// here first.
	for _, name := range []string{
		"MARLOWE_RT_NODE_SOCKET", "MARLOWE_RT_NETWORK_MAGIC", "MARLOWE_RT_DATABASE_URL",
		"MARLOWE_RT_DATA_DIR", "MARLOWE_RT_QUERY_PORT", "MARLOWE_RT_STREAMING_PORT",
		"MARLOWE_RT_STREAMING_TOKEN", "MARLOWE_RT_LOG_LEVEL", "MARLOWE_RT_LOG_FORMAT",
		"MARLOWE_RT_START", "MARLOWE_RT_READY_DISTANCE", "MARLOWE_RT_PROGRESS_BAR",
	} {
		if _, ok := vars[name]; !ok {
			t.Errorf("cmd/marlowe-follower/config has no setting %s", name)
		}
	}
	for _, name := range []string{"MARLOWE_RT_DATABASE_URL", "MARLOWE_RT_STREAMING_TOKEN"} {
		if !vars[name].Secret {
			t.Errorf("%s is expected to be a secret setting", name)
		}
	}
}
