package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	dfparser "github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
)

const dockerfilePath = "deploy/Dockerfile"

// parsedDockerfile is deploy/Dockerfile parsed by BuildKit, the parser
// `docker build` itself uses.
type parsedDockerfile struct {
	stages   []instructions.Stage
	metaArgs map[string]string // global ARG defaults
}

func parseDockerfile(t *testing.T) parsedDockerfile {
	t.Helper()
	dt := readRepoFile(t, dockerfilePath)
	res, err := dfparser.Parse(bytes.NewReader(dt))
	if err != nil {
		t.Fatalf("%s: %v", dockerfilePath, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: parser warning: %s", dockerfilePath, w.Short)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []dfparser.Range) {
		t.Errorf("%s:%v: lint %s: %s", dockerfilePath, lineOf(loc), rule, msg)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", dockerfilePath, err)
	}
	p := parsedDockerfile{stages: stages, metaArgs: map[string]string{}}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			p.metaArgs[kv.Key] = kv.ValueString()
		}
	}
	return p
}

func lineOf(loc []dfparser.Range) int {
	if len(loc) == 0 {
		return 0
	}
	return loc[0].Start.Line
}

var argRefRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// expandBase substitutes global ARG defaults in a FROM image reference.
func (p parsedDockerfile) expandBase(s string) string {
	return argRefRE.ReplaceAllStringFunc(s, func(m string) string {
		name := argRefRE.FindStringSubmatch(m)[1]
		if v, ok := p.metaArgs[name]; ok {
			return v
		}
		return m
	})
}

// imageTag returns the tag of an image reference ("" when it has none) and
// whether it is pinned by digest.
func imageTag(ref string) (tag string, digest bool) {
	if i := strings.Index(ref, "@"); i >= 0 {
		return "", true
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		return last[i+1:], false
	}
	return "", false
}

func TestDockerfileStructure(t *testing.T) {
	df := parseDockerfile(t)
	if len(df.stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(df.stages))
	}

	// Every base image is pinned to a tag (or digest), never "latest".
	stageNames := map[string]bool{}
	for _, s := range df.stages {
		if s.Name != "" {
			stageNames[strings.ToLower(s.Name)] = true
		}
	}
	for _, s := range df.stages {
		base := df.expandBase(s.BaseName)
		if base == "scratch" || stageNames[strings.ToLower(base)] {
			continue
		}
		if strings.Contains(base, "$") {
			t.Errorf("stage %q: base image %q has an ARG without a default", s.Name, s.BaseName)
			continue
		}
		tag, digest := imageTag(base)
		if !digest && (tag == "" || tag == "latest") {
			t.Errorf("stage %q: base image %q must name a tag other than latest", s.Name, base)
		}
	}

	build, final := df.stages[0], df.stages[len(df.stages)-1]
	if !strings.HasPrefix(df.expandBase(build.BaseName), "golang:1.26") {
		t.Errorf("build stage: base %q, want golang:1.26 (go.mod asks for go 1.26.8)", df.expandBase(build.BaseName))
	}
	if fb := df.expandBase(final.BaseName); fb != "scratch" &&
		!(strings.HasPrefix(fb, "gcr.io/distroless/static") && strings.HasSuffix(fb, ":nonroot")) {
		t.Errorf("final stage: base %q, want gcr.io/distroless/static-*:nonroot or scratch", fb)
	}

	for _, s := range df.stages {
		for _, c := range s.Commands {
			if add, ok := c.(*instructions.AddCommand); ok {
				for _, src := range add.SourcePaths {
					if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") {
						t.Errorf("stage %q: ADD of a URL (%s): download in a RUN with a checksum, or COPY", s.Name, src)
					}
				}
			}
		}
	}

	checkBuildStage(t, build)
	checkFinalStage(t, final, build.Name)
}

func checkBuildStage(t *testing.T, build instructions.Stage) {
	t.Helper()
	var goBuild *instructions.RunCommand
	for _, c := range build.Commands {
		if r, ok := c.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "go build") {
			goBuild = r
		}
	}
	if goBuild == nil {
		t.Fatal("build stage: no RUN with go build")
	}
	line := strings.Join(goBuild.CmdLine, " ")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-s -w", "-X main.version=", "./cmd/marlowe-follower"} {
		if !strings.Contains(line, want) {
			t.Errorf("go build: missing %q in %q", want, line)
		}
	}
	// Mount flags are parsed when the command is expanded; nothing in them
	// needs a variable, so the identity expander will do.
	if err := goBuild.Expand(func(w string) (string, error) { return w, nil }); err != nil {
		t.Fatalf("go build RUN: %v", err)
	}
	mounts := map[string]bool{}
	for _, m := range instructions.GetMounts(goBuild) {
		if m.Type == instructions.MountTypeCache {
			mounts[m.Target] = true
		}
	}
	for _, target := range []string{"/go/pkg/mod", "/root/.cache/go-build"} {
		if !mounts[target] {
			t.Errorf("go build: no cache mount at %s", target)
		}
	}
}

func checkFinalStage(t *testing.T, final instructions.Stage, buildName string) {
	t.Helper()
	var (
		user        string
		health      *instructions.HealthCheckCommand
		entrypoint  *instructions.EntrypointCommand
		cmd         *instructions.CmdCommand
		exposed     []string
		volumes     []string
		env         = map[string]string{}
		binaryFrom  bool
		dataChowned bool
	)
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.HealthCheckCommand:
			health = c
		case *instructions.EntrypointCommand:
			entrypoint = c
		case *instructions.CmdCommand:
			cmd = c
		case *instructions.ExposeCommand:
			exposed = append(exposed, c.Ports...)
		case *instructions.VolumeCommand:
			volumes = append(volumes, c.Volumes...)
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				env[kv.Key] = kv.Value
			}
		case *instructions.CopyCommand:
			if c.From == buildName && c.DestPath == "/marlowe-follower" {
				binaryFrom = true
			}
			if c.From == buildName && path.Clean(c.DestPath) == "/data" &&
				c.Chown == fmt.Sprintf("%d:%d", followerUID, followerGID) {
				dataChowned = true
			}
		case *instructions.RunCommand:
			t.Errorf("final stage: RUN %q: the distroless/scratch image has no shell", strings.Join(c.CmdLine, " "))
		}
	}

	// Non-root, numeric (Kubernetes' runAsNonRoot can only verify numbers).
	uid, gid, ok := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("final stage: USER %q, want a numeric non-root user", user)
	} else if n != followerUID {
		t.Errorf("final stage: USER %q, the manifests assume uid %d", user, followerUID)
	}
	if ok {
		if n, err := strconv.Atoi(gid); err != nil || n != followerGID {
			t.Errorf("final stage: USER %q, the manifests assume gid %d", user, followerGID)
		}
	}

	if health == nil {
		t.Error("final stage: no HEALTHCHECK")
	} else {
		want := []string{"CMD", "/marlowe-follower", "healthcheck"}
		if !slices.Equal(health.Health.Test, want) {
			t.Errorf("HEALTHCHECK %q, want exec form %q (the image has no shell or curl)", health.Health.Test, want)
		}
		if health.Health.Interval == 0 || health.Health.Timeout == 0 {
			t.Error("HEALTHCHECK: set --interval and --timeout")
		}
	}
	if entrypoint == nil || entrypoint.PrependShell || !slices.Equal(entrypoint.CmdLine, []string{"/marlowe-follower"}) {
		t.Errorf(`final stage: want ENTRYPOINT ["/marlowe-follower"] in exec form`)
	}
	if cmd == nil || cmd.PrependShell || !slices.Equal(cmd.CmdLine, []string{"run"}) {
		t.Errorf(`final stage: want CMD ["run"] in exec form`)
	}
	for _, p := range []string{"3780", "3781"} {
		if !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("final stage: port %s not exposed (EXPOSE %v)", p, exposed)
		}
	}
	if !slices.Contains(volumes, "/data") {
		t.Errorf("final stage: want VOLUME /data, got %v", volumes)
	}
	if !binaryFrom {
		t.Errorf("final stage: want the binary copied from stage %q to /marlowe-follower", buildName)
	}
	if !dataChowned {
		t.Errorf("final stage: /data must be copied with --chown=%d:%d so the user can write it", followerUID, followerGID)
	}
	if env["MARLOWE_RT_DATA_DIR"] != "/data" {
		t.Errorf("final stage: ENV MARLOWE_RT_DATA_DIR=%q, want /data (the volume)", env["MARLOWE_RT_DATA_DIR"])
	}
	// Environment variables outrank a --config YAML file, so each one baked
	// into the image would silently override that file: only the data
	// directory (whose default is a relative path) is set.
	for k := range env {
		if strings.HasPrefix(k, "MARLOWE_RT_") && k != "MARLOWE_RT_DATA_DIR" {
			t.Errorf("final stage: ENV %s would override a --config file's value; leave it to run time", k)
		}
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	checkKnownVars(t, dockerfilePath+" ENV", marloweVarsIn(strings.Join(names, " ")))
	for k := range env {
		if configVars(t)[k].Secret {
			t.Errorf("final stage: ENV %s bakes a secret setting into the image", k)
		}
	}
}

// TestDockerfileVersionVariable checks that -X main.version= has a target:
// a package-level string variable named version in package main.
func TestDockerfileVersionVariable(t *testing.T) {
	dir := filepath.Join(repoRoot, "cmd", "marlowe-follower")
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	found := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if file.Name.Name != "main" {
			continue
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if n.Name != "version" {
						continue
					}
					// -X sets only string variables initialised to a constant or nothing.
					if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "string" {
						found = true
					} else if vs.Type == nil && i < len(vs.Values) {
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							found = true
						}
					}
				}
			}
		}
	}
	if !found {
		t.Errorf("no `var version string` in package main of cmd/marlowe-follower: -X main.version would do nothing")
	}
}

// fakeResolver answers BuildKit's base-image look-ups without a registry, so
// that the full linter runs offline.
type fakeResolver struct{}

func (fakeResolver) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	platform := ocispecs.Platform{OS: "linux", Architecture: "amd64"}
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		platform = *opt.ImageOpt.Platform
	}
	img := ocispecs.Image{
		Platform: platform,
		Config: ocispecs.ImageConfig{
			Env: []string{"PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
	}
	dt, err := json.Marshal(img)
	if err != nil {
		return "", "", nil, err
	}
	return ref, digest.FromBytes(dt), dt, nil
}

// lintDockerfile runs BuildKit's Dockerfile linter, the checks of
// `docker build --check` (undefined variables, JSON argument form, casing,
// secrets in ARG/ENV, ...), with base images answered offline. It returns
// one line per finding.
func lintDockerfile(t *testing.T, name string, dt []byte) []string {
	t.Helper()
	smap := llb.NewSourceMap(nil, name, "Dockerfile", dt)
	smap.Definition = &llb.Definition{}
	opt := dockerfile2llb.ConvertOpt{
		SourceMap:      smap,
		MetaResolver:   fakeResolver{},
		TargetPlatform: &ocispecs.Platform{OS: "linux", Architecture: "amd64"},
	}
	res, err := dockerfile2llb.DockerfileLint(context.Background(), dt, opt)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if res.Error != nil {
		out = append(out, fmt.Sprintf("%s: error: %s", name, res.Error.Message))
	}
	for _, w := range res.Warnings {
		line := 0
		if w.Location != nil && len(w.Location.Ranges) > 0 {
			line = int(w.Location.Ranges[0].Start.Line)
		}
		out = append(out, fmt.Sprintf("%s:%d: %s: %s", name, line, w.RuleName, w.Detail))
	}
	return out
}

func TestDockerfileLint(t *testing.T) {
	for _, finding := range lintDockerfile(t, dockerfilePath, readRepoFile(t, dockerfilePath)) {
		t.Error(finding)
	}
}

// TestDockerfileLintIsLive guards against a linter that silently checks
// nothing: a Dockerfile with known faults must produce findings.
func TestDockerfileLintIsLive(t *testing.T) {
	bad := []byte("FROM golang:1.26 as Build\nENV API_PASSWORD=x\nWORKDIR /src/$UNDEFINED_VAR\nCMD run\n")
	got := strings.Join(lintDockerfile(t, "bad.Dockerfile", bad), "\n")
	for _, rule := range []string{"FromAsCasing", "StageNameCasing", "SecretsUsedInArgOrEnv", "UndefinedVar", "JSONArgsRecommended"} {
		if !strings.Contains(got, rule) {
			t.Errorf("linter did not report %s; findings:\n%s", rule, got)
		}
	}
}

// TestDockerignore checks deploy/Dockerfile.dockerignore against the
// repository: everything `go build ./cmd/marlowe-follower` may need stays in
// the build context, and secrets, VCS data and build outputs stay out.
func TestDockerignore(t *testing.T) {
	f, err := os.Open(filepath.Join(deployDir, "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	excluded := func(rel string) bool {
		m, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			t.Fatalf("match %s: %v", rel, err)
		}
		return m
	}

	mustInclude := []string{"go.mod", "go.sum"}
	var embedded []string
	var testBinaries []string
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch rel {
			case ".git", "deploy":
				return fs.SkipDir
			}
			// Nested modules (with their own go.mod) are not part of the build.
			if rel != "." {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return fs.SkipDir
				}
			}
			return nil
		}
		switch {
		case strings.HasSuffix(rel, ".test"):
			testBinaries = append(testBinaries, rel)
		case strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") && !inTestdata(rel):
			mustInclude = append(mustInclude, rel)
			embedded = append(embedded, embedTargets(t, p)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(mustInclude) < 3 {
		t.Fatalf("found no Go sources under %s", repoRoot)
	}
	for _, rel := range append(mustInclude, embedded...) {
		if excluded(rel) {
			t.Errorf("Dockerfile.dockerignore excludes %s, which the build needs", rel)
		}
	}
	for _, rel := range append([]string{
		".git/HEAD", ".env", "deploy/.env", "deploy/compose.env.example", "deploy/validate/go.mod",
		"docs/deploy.md", "bin/marlowe-follower", "marlowe-follower", "x/y.test",
	}, testBinaries...) {
		if !excluded(rel) {
			t.Errorf("Dockerfile.dockerignore lets %s into the build context", rel)
		}
	}
	if len(embedded) == 0 {
		t.Log("no //go:embed targets found")
	}
}

func inTestdata(rel string) bool {
	return slices.Contains(strings.Split(rel, "/"), "testdata")
}

// embedTargets returns the repository-relative files that the //go:embed
// directives of one Go file match.
func embedTargets(t *testing.T, file string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte("//go:embed")) {
		return nil
	}
	var out []string
	dir := filepath.Dir(file)
	for _, line := range strings.Split(string(src), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "//go:embed ")
		if !ok {
			continue
		}
		for _, pat := range strings.Fields(rest) {
			if uq, err := strconv.Unquote(pat); err == nil {
				pat = uq
			}
			pat = strings.TrimPrefix(pat, "all:")
			matches, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(pat)))
			if len(matches) == 0 {
				t.Errorf("%s: //go:embed %s matches nothing", file, pat)
			}
			for _, m := range matches {
				_ = filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
					if err == nil && !d.IsDir() {
						rel, _ := filepath.Rel(repoRoot, p)
						out = append(out, filepath.ToSlash(rel))
					}
					return err
				})
			}
		}
	}
	return out
}
