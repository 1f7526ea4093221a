package validate

import (
	"context"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

const (
	composeFile    = "deploy/docker-compose.yml"
	composeEnvFile = "deploy/compose.env.example"
)

// loadCompose loads docker-compose.yml the way `docker compose --env-file
// <envFile> -f deploy/docker-compose.yml` does: interpolation, the compose
// JSON schema (embedded in compose-go, so offline), normalisation and the
// consistency checks. Only the given variables are visible (not the
// environment of the test process).
func loadCompose(t *testing.T, envFile string, extraEnv ...string) (*types.Project, error) {
	t.Helper()
	return loadComposeFile(t, filepath.Join(repoRoot, filepath.FromSlash(composeFile)), envFile, extraEnv...)
}

func loadComposeFile(t *testing.T, file, envFile string, extraEnv ...string) (*types.Project, error) {
	t.Helper()
	return loadComposeProfiles(t, file, envFile, nil, extraEnv...)
}

// loadComposeProfiles is loadComposeFile with profiles enabled, as
// `docker compose --profile P` does.
func loadComposeProfiles(t *testing.T, file, envFile string, profiles []string, extraEnv ...string) (*types.Project, error) {
	t.Helper()
	opts := []cli.ProjectOptionsFn{
		cli.WithWorkingDirectory(deployDir),
		cli.WithEnv(extraEnv),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
		cli.WithProfiles(profiles),
	}
	if envFile != "" {
		opts = append(opts, cli.WithEnvFiles(filepath.Join(repoRoot, filepath.FromSlash(envFile))), cli.WithDotEnv)
	}
	po, err := cli.NewProjectOptions([]string{file}, opts...)
	if err != nil {
		return nil, err
	}
	return po.LoadProject(context.Background())
}

func mustLoadCompose(t *testing.T, extraEnv ...string) *types.Project {
	t.Helper()
	p, err := loadCompose(t, composeEnvFile, extraEnv...)
	if err != nil {
		t.Fatalf("%s with %s: %v", composeFile, composeEnvFile, err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("%s: no service %q", composeFile, name)
	}
	return s
}

func duration(d *types.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return time.Duration(*d)
}

func TestComposeServices(t *testing.T) {
	p := mustLoadCompose(t)
	if p.Name != "marlowe-follower" {
		t.Errorf("project name %q", p.Name)
	}
	want := []string{"cardano-node", "marlowe-follower", "migrate", "postgres"}
	got := p.ServiceNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	for name, s := range p.Services {
		tag, digest := imageTag(s.Image)
		if s.Image == "" || (!digest && (tag == "" || tag == "latest")) {
			t.Errorf("service %s: image %q must carry a tag other than latest", name, s.Image)
		}
		if name == "migrate" {
			if s.Restart != "no" {
				t.Errorf("service migrate is one-shot: restart %q, want \"no\"", s.Restart)
			}
		} else if s.Restart != "unless-stopped" && s.Restart != "always" && !strings.HasPrefix(s.Restart, "on-failure") {
			t.Errorf("service %s: restart %q", name, s.Restart)
		}
		if s.Logging == nil || s.Logging.Driver == "" {
			t.Errorf("service %s: no logging driver", name)
		} else if s.Logging.Driver == "json-file" && (s.Logging.Options["max-size"] == "" || s.Logging.Options["max-file"] == "") {
			t.Errorf("service %s: json-file logging without max-size/max-file grows without bound", name)
		}
		if name != "migrate" && (s.HealthCheck == nil || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Disable) {
			t.Errorf("service %s: no health check", name)
		}
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeBind {
				t.Errorf("service %s: bind mount %s: use named volumes", name, v.Source)
			}
			if v.Type == types.VolumeTypeVolume {
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("service %s: volume %q is not declared", name, v.Source)
				}
			}
		}
	}
}

func TestComposeFollower(t *testing.T) {
	p := mustLoadCompose(t)
	env, _ := parseEnvFile(t, composeEnvFile)
	node := service(t, p, "cardano-node")
	pg := service(t, p, "postgres")
	mig := service(t, p, "migrate")
	fol := service(t, p, "marlowe-follower")

	// Image built from deploy/Dockerfile with the repository as context.
	for _, s := range []types.ServiceConfig{mig, fol} {
		if s.Build == nil {
			t.Fatalf("service %s: no build section", s.Name)
		}
		if filepath.Clean(s.Build.Context) != repoRoot {
			t.Errorf("service %s: build context %q, want the repository root %q", s.Name, s.Build.Context, repoRoot)
		}
		df := s.Build.Dockerfile
		if !filepath.IsAbs(df) {
			df = filepath.Join(s.Build.Context, df)
		}
		if _, err := os.Stat(df); err != nil {
			t.Errorf("service %s: dockerfile: %v", s.Name, err)
		}
		if s.Image != fol.Image {
			t.Errorf("service %s: image %q, want the follower's %q", s.Name, s.Image, fol.Image)
		}
		uid, _, _ := strings.Cut(s.User, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("service %s: user %q, want a numeric non-root user", s.Name, s.User)
		}
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("service %s: want read_only, cap_drop ALL and no-new-privileges", s.Name)
		}
		names := make([]string, 0, len(s.Environment))
		for k := range s.Environment {
			names = append(names, k)
		}
		checkKnownVars(t, composeFile+" service "+s.Name, marloweVarsIn(strings.Join(names, " ")))
	}
	if !slices.Equal(mig.Command, types.ShellCommand{"migrate"}) {
		t.Errorf("service migrate: command %q, want [migrate]", mig.Command)
	}
	if !slices.Equal(fol.Command, types.ShellCommand{"run"}) {
		t.Errorf("service marlowe-follower: command %q, want [run]", fol.Command)
	}

	// Start order.
	wantDeps := map[string]string{
		"cardano-node": types.ServiceConditionStarted,
		"postgres":     types.ServiceConditionHealthy,
		"migrate":      types.ServiceConditionCompletedSuccessfully,
	}
	for dep, cond := range wantDeps {
		if got := fol.DependsOn[dep].Condition; got != cond {
			t.Errorf("marlowe-follower depends_on %s: condition %q, want %q", dep, got, cond)
		}
	}
	if got := mig.DependsOn["postgres"].Condition; got != types.ServiceConditionHealthy {
		t.Errorf("migrate depends_on postgres: condition %q, want %q", got, types.ServiceConditionHealthy)
	}

	// Health check: the binary itself (no shell or curl in the image).
	if fol.HealthCheck == nil || !slices.Equal([]string(fol.HealthCheck.Test), []string{"CMD", "/marlowe-follower", "healthcheck"}) {
		t.Errorf("marlowe-follower health check: want [CMD /marlowe-follower healthcheck]")
	}
	if g := duration(fol.StopGracePeriod); g < 20*time.Second {
		t.Errorf("marlowe-follower stop_grace_period %v: the service needs ~15 s after SIGTERM", g)
	}

	// Ports: 3780 and 3781 published.
	published := map[uint32]bool{}
	for _, port := range fol.Ports {
		published[port.Target] = true
		if port.Published != strconv.Itoa(int(port.Target)) {
			t.Errorf("port %d published as %q", port.Target, port.Published)
		}
	}
	if !published[3780] || !published[3781] {
		t.Errorf("marlowe-follower ports %+v, want 3780 and 3781", fol.Ports)
	}

	// Settings.
	fe := func(k string) string {
		if v := fol.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	if fe("MARLOWE_RT_QUERY_PORT") != "3780" || fe("MARLOWE_RT_STREAMING_PORT") != "3781" {
		t.Errorf("query/streaming ports in the environment do not match the published ports")
	}
	if magic, want := fe("MARLOWE_RT_NETWORK_MAGIC"), networkMagic[env["CARDANO_NETWORK"]]; magic != want {
		t.Errorf("MARLOWE_RT_NETWORK_MAGIC %q but CARDANO_NETWORK %q has magic %q", magic, env["CARDANO_NETWORK"], want)
	}
	if n := node.Environment["NETWORK"]; n == nil || *n != env["CARDANO_NETWORK"] {
		t.Errorf("cardano-node NETWORK does not follow CARDANO_NETWORK")
	}

	// The socket: same named volume in node and follower, writable in the
	// follower (connect(2) needs write permission), the node socket path
	// inside it, and the node creating it group-writable for the follower.
	sock := fe("MARLOWE_RT_NODE_SOCKET")
	nodeIPC := volumeAt(node, path.Dir(sock))
	folIPC := volumeAt(fol, path.Dir(sock))
	if nodeIPC == nil || folIPC == nil || nodeIPC.Source != folIPC.Source {
		t.Errorf("MARLOWE_RT_NODE_SOCKET %q: its directory must be the same named volume in cardano-node and marlowe-follower", sock)
	} else if folIPC.ReadOnly {
		t.Errorf("marlowe-follower mounts the node socket's volume read-only")
	}
	if !strings.HasSuffix(node.User, ":"+strconv.Itoa(followerGID)) {
		t.Errorf("cardano-node user %q: its primary group must be the follower's (%d) to share the socket", node.User, followerGID)
	}
	if !strings.Contains(strings.Join(node.Entrypoint, " "), "umask 0002") {
		t.Errorf("cardano-node entrypoint %q: must set umask 0002 so the socket is group-writable", node.Entrypoint)
	}
	if volumeAt(node, "/data") == nil {
		t.Errorf("cardano-node: no named volume at /data (its chain database)")
	}
	if volumeAt(pg, "/var/lib/postgresql/data") == nil {
		t.Errorf("postgres: no named volume at /var/lib/postgresql/data")
	}
	if folData := volumeAt(fol, fe("MARLOWE_RT_DATA_DIR")); folData == nil {
		t.Errorf("MARLOWE_RT_DATA_DIR %q is not a named volume of marlowe-follower", fe("MARLOWE_RT_DATA_DIR"))
	}

	// The database URL points at the postgres service with its credentials.
	u, err := url.Parse(fe("MARLOWE_RT_DATABASE_URL"))
	if err != nil {
		t.Fatalf("MARLOWE_RT_DATABASE_URL: %v", err)
	}
	pgEnv := func(k string) string {
		if v := pg.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	pw, _ := u.User.Password()
	if u.Hostname() != "postgres" || u.User.Username() != pgEnv("POSTGRES_USER") ||
		pw != pgEnv("POSTGRES_PASSWORD") || strings.TrimPrefix(u.Path, "/") != pgEnv("POSTGRES_DB") {
		t.Errorf("MARLOWE_RT_DATABASE_URL does not match the postgres service (host, user, password, database)")
	}
	if pw != env["POSTGRES_PASSWORD"] {
		t.Errorf("database password is not POSTGRES_PASSWORD from the env file")
	}
}

// volumeAt returns the named volume mounted at target in a service.
func volumeAt(s types.ServiceConfig, target string) *types.ServiceVolumeConfig {
	for i, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && path.Clean(v.Target) == path.Clean(target) {
			return &s.Volumes[i]
		}
	}
	return nil
}

// TestComposeEnvExample checks compose.env.example: every variable is used
// by docker-compose.yml (a variable that is not would silently do nothing),
// every MARLOWE_RT_* one is a real setting, secrets are marked placeholders.
func TestComposeEnvExample(t *testing.T) {
	env, order := parseEnvFile(t, composeEnvFile)
	compose := string(readRepoFile(t, composeFile))
	for _, k := range order {
		if !strings.Contains(compose, "${"+k) {
			t.Errorf("%s sets %s, which %s never uses", composeEnvFile, k, composeFile)
		}
	}
	checkKnownVars(t, composeEnvFile, marloweVarsIn(strings.Join(order, " ")))
	if _, ok := networkMagic[env["CARDANO_NETWORK"]]; !ok {
		t.Errorf("CARDANO_NETWORK %q: want mainnet, preprod or preview", env["CARDANO_NETWORK"])
	}
	if env["CARDANO_NETWORK"] != "preprod" {
		t.Errorf("the example's default network is %q, want preprod", env["CARDANO_NETWORK"])
	}
	if networkMagic[env["CARDANO_NETWORK"]] != env["MARLOWE_RT_NETWORK_MAGIC"] {
		t.Errorf("CARDANO_NETWORK=%s but MARLOWE_RT_NETWORK_MAGIC=%s", env["CARDANO_NETWORK"], env["MARLOWE_RT_NETWORK_MAGIC"])
	}
	if !strings.Contains(env["POSTGRES_PASSWORD"], "CHANGE-ME") {
		t.Errorf("POSTGRES_PASSWORD in the example must be a marked placeholder (CHANGE-ME)")
	}
	if v := env["CARDANO_NODE_VERSION"]; v == "" || v == "latest" {
		t.Errorf("CARDANO_NODE_VERSION %q: pin a release", v)
	}
	// Defaults in the compose file agree with the example.
	if !strings.Contains(compose, "${CARDANO_NODE_VERSION:-"+env["CARDANO_NODE_VERSION"]+"}") {
		t.Errorf("the compose file's default CARDANO_NODE_VERSION differs from the example's %s", env["CARDANO_NODE_VERSION"])
	}
	if !strings.Contains(compose, "${CARDANO_NETWORK:-"+env["CARDANO_NETWORK"]+"}") ||
		!strings.Contains(compose, "${MARLOWE_RT_NETWORK_MAGIC:-"+env["MARLOWE_RT_NETWORK_MAGIC"]+"}") {
		t.Errorf("the compose file's default network differs from the example's")
	}
}

// TestComposeRequiresPassword: without an env file, POSTGRES_PASSWORD is
// missing and loading must fail with a message that names it, rather than
// start PostgreSQL with an empty password.
func TestComposeRequiresPassword(t *testing.T) {
	_, err := loadCompose(t, "")
	if err == nil || !strings.Contains(err.Error(), "POSTGRES_PASSWORD") {
		t.Errorf("loading without POSTGRES_PASSWORD: err %v, want an error naming POSTGRES_PASSWORD", err)
	}
	if _, err := loadCompose(t, "", "POSTGRES_PASSWORD=x"); err != nil {
		t.Errorf("every other variable must have a default: %v", err)
	}
}

// TestComposeNetworkVolumes: switching CARDANO_NETWORK switches every
// stateful volume, so one network's chain or history never meets another's.
func TestComposeNetworkVolumes(t *testing.T) {
	pre := mustLoadCompose(t)
	main := mustLoadCompose(t, "CARDANO_NETWORK=mainnet", "MARLOWE_RT_NETWORK_MAGIC=764824073")
	for key, v := range pre.Volumes {
		if v.Name == main.Volumes[key].Name {
			t.Errorf("volume %s is named %q on both preprod and mainnet", key, v.Name)
		}
		if !strings.HasSuffix(main.Volumes[key].Name, "-mainnet") {
			t.Errorf("volume %s on mainnet is named %q", key, main.Volumes[key].Name)
		}
	}
	if n := main.Services["cardano-node"].Environment["NETWORK"]; n == nil || *n != "mainnet" {
		t.Errorf("cardano-node NETWORK does not follow CARDANO_NETWORK=mainnet")
	}
}

// TestComposeSchemaIsLive guards against a loader that silently accepts
// anything: a misspelt key and a bad depends_on condition must be rejected.
func TestComposeSchemaIsLive(t *testing.T) {
	for name, body := range map[string]string{
		"unknown key": "services:\n  a:\n    image: busybox:1\n    restart_policy: always\n",
		"bad condition": "services:\n  a:\n    image: busybox:1\n    depends_on:\n      b:\n        condition: service_ready\n" +
			"  b:\n    image: busybox:1\n",
	} {
		file := filepath.Join(t.TempDir(), "compose.yml")
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadComposeFile(t, file, ""); err == nil {
			t.Errorf("%s: a broken compose file loaded without error", name)
		} else {
			t.Logf("%s: rejected as expected: %v", name, err)
		}
	}
}

// TestComposeScaleOut: the scale-out profile adds a standby writer and two
// readers on the same database; without the profile none of them starts.
func TestComposeScaleOut(t *testing.T) {
	p, err := loadComposeProfiles(t, filepath.Join(repoRoot, filepath.FromSlash(composeFile)), composeEnvFile, []string{"scale-out"})
	if err != nil {
		t.Fatalf("%s --profile scale-out: %v", composeFile, err)
	}
	want := []string{"cardano-node", "marlowe-follower", "marlowe-follower-standby", "marlowe-reader-1", "marlowe-reader-2", "migrate", "postgres"}
	got := p.ServiceNames()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("services with --profile scale-out %v, want %v", got, want)
	}
	fol := service(t, p, "marlowe-follower")
	env := func(s types.ServiceConfig, k string) string {
		if v := s.Environment[k]; v != nil {
			return *v
		}
		return ""
	}
	if r := env(fol, "MARLOWE_RT_ROLE"); r != "" && r != "all" && r != "writer" {
		t.Errorf("marlowe-follower: MARLOWE_RT_ROLE %q: the default service must stay a writer", r)
	}
	roles := map[string]string{"marlowe-follower-standby": "writer", "marlowe-reader-1": "reader", "marlowe-reader-2": "reader"}
	hostPorts := map[string]string{}
	for _, port := range fol.Ports {
		hostPorts[port.Published] = fol.Name
	}
	for name, role := range roles {
		s := service(t, p, name)
		if !slices.Equal(s.Profiles, []string{"scale-out"}) {
			t.Errorf("%s: profiles %v, want [scale-out] (it must not start without the profile)", name, s.Profiles)
		}
		if got := env(s, "MARLOWE_RT_ROLE"); got != role {
			t.Errorf("%s: MARLOWE_RT_ROLE %q, want %q", name, got, role)
		}
		if s.Image != fol.Image || !slices.Equal(s.Command, types.ShellCommand{"run"}) {
			t.Errorf("%s: image %q command %q, want the follower's image running run", name, s.Image, s.Command)
		}
		if !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") || !slices.Contains(s.SecurityOpt, "no-new-privileges:true") || s.User != fol.User {
			t.Errorf("%s: want read_only, cap_drop ALL, no-new-privileges and the follower's user", name)
		}
		// One database for all of them.
		if env(s, "MARLOWE_RT_DATABASE_URL") != env(fol, "MARLOWE_RT_DATABASE_URL") || env(s, "MARLOWE_RT_DATABASE_URL") == "" {
			t.Errorf("%s: MARLOWE_RT_DATABASE_URL differs from marlowe-follower's", name)
		}
		names := make([]string, 0, len(s.Environment))
		for k := range s.Environment {
			names = append(names, k)
		}
		checkKnownVars(t, composeFile+" service "+name, marloweVarsIn(strings.Join(names, " ")))
		for dep, cond := range map[string]string{"postgres": types.ServiceConditionHealthy, "migrate": types.ServiceConditionCompletedSuccessfully} {
			if got := s.DependsOn[dep].Condition; got != cond {
				t.Errorf("%s depends_on %s: condition %q, want %q", name, dep, got, cond)
			}
		}
		if s.HealthCheck == nil || !slices.Equal([]string(s.HealthCheck.Test), []string{"CMD", "/marlowe-follower", "healthcheck"}) {
			t.Errorf("%s health check: want [CMD /marlowe-follower healthcheck]", name)
		}
		// The data directory and /tmp are writable (read-only root).
		writable := map[string]bool{}
		for _, tm := range s.Tmpfs {
			writable[path.Clean(tm)] = true
		}
		for _, v := range s.Volumes {
			writable[path.Clean(v.Target)] = true
		}
		if !writable[path.Clean(env(s, "MARLOWE_RT_DATA_DIR"))] || !writable["/tmp"] {
			t.Errorf("%s: MARLOWE_RT_DATA_DIR %q and /tmp must be writable", name, env(s, "MARLOWE_RT_DATA_DIR"))
		}
		sock := env(s, "MARLOWE_RT_NODE_SOCKET")
		switch role {
		case "writer":
			// The standby follows the same node once it holds the lock.
			if v := volumeAt(s, path.Dir(sock)); v == nil || v.Source != volumeAt(fol, path.Dir(sock)).Source || v.ReadOnly {
				t.Errorf("%s: the node socket's volume must be mounted writable, as in marlowe-follower", name)
			}
			if s.DependsOn["cardano-node"].Condition != types.ServiceConditionStarted {
				t.Errorf("%s: must start after cardano-node started", name)
			}
		case "reader":
			if _, ok := s.DependsOn["cardano-node"]; ok {
				t.Errorf("%s: a reader has no node connection and must not wait for cardano-node", name)
			}
			if volumeAt(s, path.Dir(sock)) != nil {
				t.Errorf("%s: a reader must not mount the node socket", name)
			}
			targets := map[uint32]bool{}
			for _, port := range s.Ports {
				targets[port.Target] = true
			}
			if !targets[3780] || !targets[3781] {
				t.Errorf("%s: ports %+v, want the query (3780) and streaming (3781) ports published", name, s.Ports)
			}
		}
		for _, port := range s.Ports {
			if other, dup := hostPorts[port.Published]; dup {
				t.Errorf("%s: host port %s is already published by %s", name, port.Published, other)
			}
			hostPorts[port.Published] = name
		}
	}
}
