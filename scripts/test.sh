#!/usr/bin/env bash
# The project's whole test suite: what the README's test command and CI run.
#   go vet, a gofmt check, go test -race over every package, the explorer
#   pages' unit tests (node --test), the browser end-to-end test
#   (scripts/browser/run.sh: CORS and streams, then the explorer), the official Marlowe
#   TypeScript SDK against the runtime view (scripts/sdk/run.sh), the benchmark
#   suite's quick run (without -race), then every fuzz
#   target for a short while (FUZZTIME, default 10000x: 10,000 runs each; a
#   duration such as 30s works too; FUZZTIME=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."

# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# report "context deadline exceeded" as a failure when the time runs out
# while a worker is mid-run (golang/go#75804, fixed in Go 1.27), though no
# input failed. A count has no deadline to race.
FUZZTIME="${FUZZTIME:-10000x}"

step() { printf '\n== %s\n' "$*"; }

# Everything the suite writes to temporary files (go test's t.TempDir, the
# binaries tests and scripts build, logs) goes under one directory, removed
# when the script ends, however it ends.
# (The browser step keeps its screenshots, CI artefacts, in the machine's
# temporary directory; it removes everything else it makes itself.)
machine_tmp="${TMPDIR:-/tmp}"
work="$(mktemp -d "$machine_tmp/mft.XXXXXX")"
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
export TMPDIR="$work" GOTMPDIR="$work"

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
	local sudo="" ours=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	[ "${CI:-}" = "true" ] && ours="CI=true"
	if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
		echo "installing PostgreSQL (apt-get): its new cluster is the test suite's"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
			$sudo pg_createcluster "$(ls /usr/lib/postgresql | sort -V | tail -n 1)" main >/dev/null
		fi
		ours="installed by this script"
	fi
	if ! pg_isready -q -h 127.0.0.1 -p 5432; then
		echo "starting PostgreSQL"
		$sudo pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
		for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
	fi
	local as_postgres=(su postgres -c)
	[ "$(id -u)" -ne 0 ] && as_postgres=(sudo -u postgres sh -c)
	if [ -n "$ours" ]; then
		# The suite's own server ($ours): a password login for postgres (ignored
		# under trust authentication) and the database test.
		"${as_postgres[@]}" "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
		"${as_postgres[@]}" "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1 ||
			"${as_postgres[@]}" "createdb test"
		export MARLOWE_TEST_DATABASE_URL="postgres://postgres:postgres@127.0.0.1:5432/test?sslmode=disable"
	else
		# Someone's server: a role and a database of the suite's own.
		if ! "${as_postgres[@]}" "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname = 'marlowe_test'\"" | grep -q 1; then
			echo "PostgreSQL: creating the role marlowe_test (LOGIN CREATEDB, password marlowe_test) for the tests;"
			echo "  no other role is changed. Remove it with: sudo -u postgres dropuser marlowe_test"
			echo "  (after dropping its databases), or set MARLOWE_TEST_DATABASE_URL to use a database of your own."
			"${as_postgres[@]}" "psql -q -c \"CREATE ROLE marlowe_test LOGIN CREATEDB PASSWORD 'marlowe_test'\""
		fi
		if ! "${as_postgres[@]}" "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'marlowe_test'\"" | grep -q 1; then
			echo "PostgreSQL: creating the database marlowe_test, owned by marlowe_test, for the tests."
			echo "  Remove it with: sudo -u postgres dropdb marlowe_test"
			"${as_postgres[@]}" "createdb -O marlowe_test marlowe_test"
		fi
		export MARLOWE_TEST_DATABASE_URL="postgres://marlowe_test:marlowe_test@127.0.0.1:5432/marlowe_test?sslmode=disable"
	fi
	pg_isready -h 127.0.0.1 -p 5432
}

step "PostgreSQL"
ensure_postgres

step "go vet"
go vet ./...

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"
	echo "$unformatted"
	exit 1
fi

step "go test -race"
go test -race -count=1 -timeout 15m ./...

step "explorer pages: unit tests (node --test: inputs in words, contract trees, JSON, metrics)"
# Node's own test runner, no packages (Node.js is installed where missing).
command -v node >/dev/null || { . scripts/lib.sh && ensure_node; }
node --test query/explorer/jstest/

step "browser end-to-end (headless Chromium: CORS, EventSource, WebSocket origins; the contract explorer)"
# Installs chromium with apt-get where it is missing, playwright-core into a
# cache directory (scripts/browser/run.sh).
browser_started=$SECONDS
TMPDIR="$machine_tmp" bash scripts/browser/run.sh
echo "browser step: $((SECONDS - browser_started))s"

step "TypeScript SDK against the runtime view (@marlowe.io/runtime-rest-client 0.4.0-beta, strict, on a devnet)"
# Installs the SDK with npm ci into a cache directory (scripts/sdk/run.sh).
sdk_started=$SECONDS
bash scripts/sdk/run.sh
echo "sdk step: $((SECONDS - sdk_started))s"

step "benchmark suite, --quick (a separate module; checks that it runs and writes its table and plots, not speed)"
# Without -race: under the race detector the suite measures the detector.
(cd cmd/marlowe-bench && go vet ./... && go test -count=1 -timeout 10m .)

step "deploy/ validation (a separate module: Kubernetes, compose, Dockerfile, systemd)"
(cd deploy/validate && go vet ./... && go test -count=1 ./...)

if [ "$FUZZTIME" != "0" ]; then
	step "fuzz targets (${FUZZTIME} each)"
	# Every func FuzzXxx in a _test.go file, run in its own package.
	# Minimization is bounded by a count as well (the default is 60s of it
	# for every new input, which would dwarf a short run).
	grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
		pkg="./$(dirname "${file#./}")"
		grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
			echo "-- $pkg $target"
			started=$SECONDS
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 200x "$pkg" >"$work/fuzz.log" 2>&1 || {
				cat "$work/fuzz.log"
				exit 1
			}
			echo "   $(grep -o 'execs: [0-9]*' "$work/fuzz.log" | tail -1) in $((SECONDS - started))s"
		done
	done
fi

step "all tests passed"
