#!/usr/bin/env bash
# The project's whole test suite: what the README's test command and CI run.
#   go vet, a gofmt check, go test -race over every package, the explorer
#   pages' unit tests (node --test), the browser end-to-end test
#   (scripts/browser/run.sh: CORS and streams, then the explorer), the official Marlowe
#   TypeScript SDK against the runtime view (scripts/sdk/run.sh), the benchmark
#   suite's quick run (without -race), the deploy/ validation, then every fuzz
#   target for a short while (FUZZTIME, default 10000x: 10,000 runs each; a
#   duration such as 30s works too; FUZZTIME=0 skips them).
#
# Every step runs, whatever the steps before it gave, and is reported: a
# table of the steps, their results and times comes at the end, and the
# exit status is 1 when any step failed (130 when interrupted). What the
# run installs or creates on the machine is said before the first step and
# again at the end, with how to remove it.
set -uo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when the time runs out
# while a worker is mid-run (golang/go#75804, fixed in Go 1.27), though no
# input failed. A count has no deadline to race.
FUZZTIME="${FUZZTIME:-10000x}"

# Everything the suite writes to temporary files (go test's t.TempDir, the
# binaries tests and scripts build, logs) goes under one directory, removed
# when the script ends, however it ends. (The browser step keeps its
# screenshots, CI artefacts, in the machine's temporary directory; it
# removes everything else it makes itself.)
machine_tmp="${TMPDIR:-/tmp}"
work="$(mktemp -d "$machine_tmp/mft.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export TMPDIR="$work" GOTMPDIR="$work"

browser_cache="${MARLOWE_BROWSER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/marlowe-follower/npm-browser}"
sdk_cache="${MARLOWE_SDK_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/marlowe-follower/npm-sdk}"
chromium="${CHROMIUM:-/usr/bin/chromium}"
sudo_="" as_postgres="su postgres -c"
if [ "$(id -u)" -ne 0 ]; then sudo_="sudo " as_postgres="sudo -u postgres sh -c"; fi

# --- What the run installs or creates on the machine -----------------------

# made WHAT REMOVE: the step made WHAT on the machine; REMOVE undoes it.
# Kept in a file, since steps run in subshells.
made() { printf '%s\t%s\n' "$1" "$2" >>"$work/made"; }

# present WHAT: what is on the machine before the run, to tell afterwards
# what the run added.
have_pg_server() { ls /etc/postgresql/*/main >/dev/null 2>&1; }
have_node() { command -v node >/dev/null && command -v npm >/dev/null; }
have_chromium() { [ -x "$chromium" ]; }
had_pg_server=no had_node=no had_chromium=no had_browser_cache=no had_sdk_cache=no had_npm_cache=no
have_pg_server && had_pg_server=yes
have_node && had_node=yes
have_chromium && had_chromium=yes
[ -d "$browser_cache" ] && had_browser_cache=yes
[ -d "$sdk_cache" ] && had_sdk_cache=yes
npm_cache="${npm_config_cache:-${HOME:-/tmp}/.npm}"
[ -d "$npm_cache" ] && had_npm_cache=yes

cat <<EOF
marlowe-follower test suite: every step runs and is reported in a table at the end
(20 minutes or more on a 2-core machine, most of it go test -race).
On this machine it may install or create, where missing (each said again at the end,
with how to remove it):
  - PostgreSQL (apt-get), started where it is down; in it a role and a database of the
    suite's own (marlowe_test), or under CI=true or on a server it installed, the
    database test and the password postgres for the user postgres
    (MARLOWE_TEST_DATABASE_URL set: that database is used as given, nothing installed)
  - Node.js and npm (apt-get), Chromium (apt-get)
  - npm packages (playwright-core; the Marlowe TypeScript SDK) in $browser_cache
    and $sdk_cache, and npm's download cache in $npm_cache
  - Go modules in the module cache and builds and fuzz inputs in the build cache
    ($(go env GOMODCACHE), $(go env GOCACHE))
  - the browser test's screenshots in $machine_tmp/marlowe-browser-test.*/artifacts
Everything else goes under $work, removed at the end.
EOF

# --- Steps -------------------------------------------------------------------

declare -a step_names=() step_results=() step_seconds=()
failed=0 interrupted=0
trap 'interrupted=1' INT TERM

# step NAME FUNCTION [ARG...]: runs FUNCTION in a subshell with errexit,
# records its result and time, and goes on whatever it gave.
step() {
	local name="$1" started=$SECONDS rc
	shift
	if [ "$interrupted" -eq 1 ]; then
		step_names+=("$name") step_results+=("not run") step_seconds+=(0)
		return
	fi
	printf '\n== %s\n' "$name"
	(set -e; "$@")
	rc=$?
	local result=ok
	if [ "$interrupted" -eq 1 ]; then
		result="interrupted"
	elif [ "$rc" -ne 0 ]; then
		result="FAILED"
		failed=$((failed + 1))
		printf '== %s: FAILED (exit status %d)\n' "$name" "$rc"
	fi
	step_names+=("$name") step_results+=("$result") step_seconds+=($((SECONDS - started)))
}

# PostgreSQL: the storage tests run against a real server.
#   - MARLOWE_TEST_DATABASE_URL set: that connection is used as given, and
#     nothing on the server is changed.
#   - Otherwise the local server (127.0.0.1:5432) is used. It is installed
#     with apt-get where it is missing and started where it is down. When
#     this script installed (initialised) the cluster itself, or under CI
#     (CI=true, as .ci/run sets), the server is the suite's: the postgres
#     user gets the password postgres and the database test is created.
#     On any other machine the server's users are left alone: the suite uses
#     a role and a database of its own, marlowe_test, created once (and said
#     so) when missing.
# The URL the tests use is written to $work/pg.env, read by the later steps.
ensure_postgres() {
	if [ -n "${MARLOWE_TEST_SKIP_POSTGRES:-}" ]; then
		echo "MARLOWE_TEST_SKIP_POSTGRES is set: PostgreSQL tests are skipped"
		return
	fi
	if [ -n "${MARLOWE_TEST_DATABASE_URL:-}" ]; then
		echo "using MARLOWE_TEST_DATABASE_URL as given (nothing on its server is changed)"
		if command -v pg_isready >/dev/null; then
			pg_isready -d "$MARLOWE_TEST_DATABASE_URL"
		fi
		return
	fi
	local ours=""
	[ "${CI:-}" = "true" ] && ours="CI=true"
	if ! have_pg_server; then
		echo "installing PostgreSQL (apt-get): its new cluster is the test suite's"
		${sudo_}env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		${sudo_}env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		if ! have_pg_server; then
			${sudo_}pg_createcluster "$(ls /usr/lib/postgresql | sort -V | tail -n 1)" main >/dev/null
		fi
		made "PostgreSQL (the Debian package postgresql, its cluster main, running)" "${sudo_}apt-get purge postgresql 'postgresql-*' (its data in /var/lib/postgresql goes with it)"
		ours="installed by this script"
	fi
	local version
	version="$(ls /etc/postgresql | sort -V | tail -n 1)"
	if ! pg_isready -q -h 127.0.0.1 -p 5432; then
		echo "starting PostgreSQL"
		${sudo_}pg_ctlcluster --skip-systemctl-redirect "$version" main start
		for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
		[ "$ours" = "installed by this script" ] ||
			made "PostgreSQL $version main, started (it was down)" "${sudo_}pg_ctlcluster $version main stop"
	fi
	if [ -n "$ours" ]; then
		# The suite's own server ($ours): a password login for postgres (ignored
		# under trust authentication) and the database test.
		$as_postgres "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
		if ! $as_postgres "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1; then
			$as_postgres "createdb test"
			made "the PostgreSQL database test" "$as_postgres 'dropdb test'"
		fi
		echo "PostgreSQL: the postgres user's password is postgres ($ours)"
		made "the password postgres for the PostgreSQL user postgres ($ours)" "$as_postgres \"psql -c 'ALTER USER postgres PASSWORD NULL'\""
		echo "MARLOWE_TEST_DATABASE_URL=postgres://postgres:postgres@127.0.0.1:5432/test?sslmode=disable" >"$work/pg.env"
	else
		# Someone's server: a role and a database of the suite's own.
		if ! $as_postgres "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'marlowe_test'\"" | grep -q 1; then
			echo "PostgreSQL: creating the role marlowe_test (LOGIN CREATEDB, password marlowe_test) for the tests;"
			echo "  no other role is changed (or set MARLOWE_TEST_DATABASE_URL to use a database of your own)."
			$as_postgres "psql -q -c \"CREATE ROLE marlowe_test LOGIN CREATEDB PASSWORD 'marlowe_test'\""
			made "the PostgreSQL role marlowe_test" "$as_postgres 'dropuser marlowe_test' (after dropping its databases)"
		fi
		if ! $as_postgres "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'marlowe_test'\"" | grep -q 1; then
			echo "PostgreSQL: creating the database marlowe_test, owned by marlowe_test, for the tests."
			$as_postgres "createdb -O marlowe_test marlowe_test"
			made "the PostgreSQL database marlowe_test" "$as_postgres 'dropdb marlowe_test'"
		fi
		echo "MARLOWE_TEST_DATABASE_URL=postgres://marlowe_test:marlowe_test@127.0.0.1:5432/marlowe_test?sslmode=disable" >"$work/pg.env"
	fi
	pg_isready -h 127.0.0.1 -p 5432
}

go_vet() { go vet ./...; }

gofmt_check() {
	local unformatted
	unformatted=$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l)
	if [ -n "$unformatted" ]; then
		echo "gofmt would change:"
		echo "$unformatted"
		return 1
	fi
}

# go test -race over every package; the failing tests are listed under
# the table.
go_test_race() {
	go test -race -count=1 -timeout 15m ./... 2>&1 | tee "$work/go-test.log"
}

explorer_unit() {
	echo "the explorer pages' own code: inputs in words, contract trees, JSON, metrics"
	# Node's own test runner, no packages (Node.js is installed where missing).
	have_node || { . scripts/lib.sh && ensure_node; }
	node --test query/explorer/jstest/
}

# Chromium with apt-get where it is missing, playwright-core into a cache
# directory (scripts/browser/run.sh). Its screenshots stay in the machine's
# temporary directory.
browser() {
	echo "headless Chromium against run --devnet: CORS, EventSource and WebSocket origins, then the explorer's pages"
	TMPDIR="$machine_tmp" bash scripts/browser/run.sh 2>&1 | tee "$work/browser.log"
}

# The SDK with npm ci into a cache directory (scripts/sdk/run.sh).
sdk() {
	echo "@marlowe.io/runtime-rest-client 0.4.0-beta (strict) against /runtime on a devnet, then docs/query.md's example"
	bash scripts/sdk/run.sh
}

# Without -race: under the race detector the suite measures the detector.
bench_quick() {
	echo "cmd/marlowe-bench (a module of its own) with --quick sizes: that it runs and writes its tables and plots, not speed"
	cd cmd/marlowe-bench && go vet ./... && go test -count=1 -timeout 10m .
}

deploy_validate() {
	echo "deploy/validate (a module of its own): Kubernetes, compose, Dockerfile, systemd"
	cd deploy/validate && go vet ./... && go test -count=1 ./...
}

# fuzz PKG TARGET: one fuzz target for FUZZTIME. Minimization is bounded by
# a count as well (the default is 60 s of it for every new input, which
# would dwarf a short run). A failing input is written to PKG/testdata/fuzz
# (go test's way), where it stays to be looked at.
fuzz() {
	local pkg="$1" target="$2" log="$work/fuzz-$2.log"
	if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 200x "$pkg" >"$log" 2>&1; then
		cat "$log"
		return 1
	fi
	echo "$(grep -o 'execs: [0-9]*' "$log" | tail -1)"
}

with_pg() {
	if [ -f "$work/pg.env" ]; then
		export "$(cat "$work/pg.env")"
	fi
	"$@"
}

step "PostgreSQL" ensure_postgres
step "go vet" go_vet
step "gofmt" gofmt_check
step "go test -race (every package)" with_pg go_test_race
step "explorer pages (node --test)" explorer_unit
step "browser end-to-end (Chromium)" browser
step "TypeScript SDK (runtime view)" sdk
step "benchmark suite --quick" with_pg bench_quick
step "deploy/ validation" deploy_validate
if [ "$FUZZTIME" != "0" ]; then
	# Every func FuzzXxx in a _test.go file, run in its own package, for
	# FUZZTIME each.
	while read -r file; do
		pkg="./$(dirname "${file#./}")"
		while read -r target; do
			step "fuzz $target ($pkg)" fuzz "$pkg" "$target"
		done < <(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //')
	done < <(grep -rl --include='*_test.go' '^func Fuzz' . | sort)
fi

# --- Report --------------------------------------------------------------------

printf '\n== summary\n'
width=4
for n in "${step_names[@]}"; do [ ${#n} -gt $width ] && width=${#n}; done
printf "%-${width}s  %-11s  %s\n" "step" "result" "time"
for i in "${!step_names[@]}"; do
	s=${step_seconds[$i]}
	printf "%-${width}s  %-11s  %dm%02ds\n" "${step_names[$i]}" "${step_results[$i]}" $((s / 60)) $((s % 60))
done
printf 'total %dm%02ds; ' $((SECONDS / 60)) $((SECONDS % 60))
if [ "$failed" -eq 0 ] && [ "$interrupted" -eq 0 ]; then
	echo "all ${#step_names[@]} steps passed"
else
	echo "$failed of ${#step_names[@]} steps failed$([ "$interrupted" -eq 1 ] && echo ", interrupted")"
fi
if [ -f "$work/go-test.log" ] && grep -q -- '^--- FAIL' "$work/go-test.log"; then
	echo "failing Go tests:"
	grep -E -- '^(--- FAIL|FAIL[[:space:]])' "$work/go-test.log" | sed 's/^/  /'
fi
if [ -n "$(git -C "$root" status --porcelain -- '*/testdata/fuzz/*' 2>/dev/null)" ]; then
	echo "new fuzz inputs (failures, written by go test): $(git -C "$root" status --porcelain -- '*/testdata/fuzz/*' | awk '{print $2}' | tr '\n' ' ')"
fi

# What this run added to the machine, and how to remove it.
! have_node || [ "$had_node" = yes ] || made "Node.js and npm (the Debian packages nodejs, npm)" "${sudo_}apt-get purge nodejs npm"
! have_chromium || [ "$had_chromium" = yes ] || made "Chromium (the Debian package chromium)" "${sudo_}apt-get purge chromium"
[ ! -d "$browser_cache" ] || [ "$had_browser_cache" = yes ] || made "playwright-core in $browser_cache" "rm -rf $browser_cache"
[ ! -d "$sdk_cache" ] || [ "$had_sdk_cache" = yes ] || made "the Marlowe TypeScript SDK in $sdk_cache" "rm -rf $sdk_cache"
[ ! -d "$npm_cache" ] || [ "$had_npm_cache" = yes ] || made "npm's download cache $npm_cache" "rm -rf $npm_cache"
echo
if [ -s "$work/made" ]; then
	echo "This run installed or created on the machine (and how to remove it):"
	while IFS=$'\t' read -r what how; do
		printf '  - %s\n      remove: %s\n' "$what" "$how"
	done <"$work/made"
else
	echo "This run installed nothing new on the machine (what it uses was there already)."
fi
echo "Kept between runs, as any Go project's: the Go module and build caches (go clean -modcache; go clean -cache -fuzzcache)."
if [ -f "$work/browser.log" ] && shots="$(sed -n 's/^screenshots: //p' "$work/browser.log" | tail -n 1)" && [ -n "$shots" ]; then
	echo "The browser test's screenshots (CI artefacts): $shots; remove: rm -rf $(dirname "$shots")"
fi
rm -rf "$work"
if [ "$interrupted" -eq 1 ]; then exit 130; fi
[ "$failed" -eq 0 ]
