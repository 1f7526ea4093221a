package pipeline

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/marlowe-follower/follower/"

// floors are the module's floors, lowest first (docs/architecture.md,
// Layering): a package's floor is the one of the longest prefix that
// names it. A package imports packages of its own floor or lower ones,
// never a higher one; its tests may use the kits of any floor.
var floors = []struct {
	name     string
	prefixes []string
}{
	{"ground: the plain types", []string{"chainsync/chain", "contracts/plutusdata", "contracts/marlowe", "history/record"}},
	{"chain", []string{"chainsync"}},
	{"history", []string{"history"}},
	{"projection", []string{"contracts"}},
	{"APIs", []string{"streaming", "query"}},
	{"assembly", []string{"actors"}},
	{"binaries", []string{"cmd"}},
}

// folderOrder ranks the top-level folders the way the layout reads them:
// contracts first, since it holds the language every floor uses. An
// import from one folder to a folder ranked above it is an arrow back up.
var folderOrder = map[string]int{"contracts": 0, "chainsync": 1, "history": 2, "streaming": 3, "query": 3, "actors": 4, "cmd": 5}

// exception is the one the layout forces: contracts/ holds the language at
// the ground floor and the projection above history, so the projection's
// imports of the chain's and the history's packages point up the folder
// order although they point down the floors.
var exception = map[string]bool{"contracts -> chainsync": true, "contracts -> history": true}

// pending are the imports up a floor still to be removed, each with who
// removes it. A line here whose import is gone is logged: delete it.
var pending = map[string]string{}

func floorOf(pkg string) int {
	best, floor := -1, -1
	for i, f := range floors {
		for _, p := range f.prefixes {
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > best {
				best, floor = len(p), i
			}
		}
	}
	return floor
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listModule lists the module's packages (without their tests).
func listModule(t *testing.T) []listedPackage {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayering fails when a package imports a floor above its own, and
// counts the arrows back up between top-level folders: only the
// exception's, and the pending ones.
func TestLayering(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	seen := map[string]bool{}
	arrows := map[string][]string{} // folder pair -> imports
	for _, p := range pkgs {
		from := floorOf(p.ImportPath)
		if from < 0 {
			t.Errorf("%s is on no floor: add it to floors (and to docs/architecture.md)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			edge := p.ImportPath + " -> " + imp
			if to := floorOf(imp); to > from {
				seen[edge] = true
				if _, ok := pending[edge]; !ok {
					t.Errorf("%s: the %s floor imports the %s floor above it", edge, floors[from].name, floors[to].name)
				}
			}
			a, b := topFolder(p.ImportPath), topFolder(imp)
			if folderOrder[b] > folderOrder[a] {
				pair := a + " -> " + b
				arrows[pair] = append(arrows[pair], edge)
			}
		}
	}
	for edge, who := range pending {
		if !seen[edge] {
			t.Logf("%s is gone: delete its line in pending (%s)", edge, who)
		}
	}
	var pairs []string
	for pair, edges := range arrows {
		pairs = append(pairs, pair)
		ok := exception[pair]
		for _, e := range edges {
			if _, p := pending[e]; p {
				ok = true
			}
		}
		if !ok {
			t.Errorf("an arrow back up between folders, %s: %s", pair, strings.Join(edges, ", "))
		}
	}
	slices.Sort(pairs)
	t.Logf("arrows back up between top-level folders: %d (%s)", len(pairs), strings.Join(pairs, "; "))
}

// TestStreamingPackagesImportNoServer: the packages under streaming/ (the
// connection and stream actors, the wire, the protocol, the stores, the
// client, the test kit) stand below the server: none imports streaming
// itself (nor, by the floors, actors/ or cmd/).
func TestStreamingPackagesImportNoServer(t *testing.T) {
	n := 0
	for _, p := range listModule(t) {
		if !strings.HasPrefix(p.ImportPath, "streaming/") {
			continue
		}
		n++
		if slices.Contains(p.Imports, module+"streaming") {
			t.Errorf("%s imports streaming, the server above it", p.ImportPath)
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d packages under streaming/", n)
	}
}

// TestHistoryLinksNoNodeProtocol: the history (and the floors between it
// and the assembly: the projection, the APIs) link nothing of the node's
// protocol library; only the follower (chainsync), the devnet and what
// assembles them do.
func TestHistoryLinksNoNodeProtocol(t *testing.T) {
	for _, p := range listModule(t) {
		f := floorOf(p.ImportPath)
		if f < floorOf("history") || f > floorOf("streaming") || strings.HasSuffix(p.ImportPath, "test") {
			continue
		}
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "github.com/blinklabs-io/gouroboros") {
				t.Errorf("%s links %s", p.ImportPath, d)
				break
			}
		}
	}
}

func topFolder(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}
