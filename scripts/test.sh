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

# PostgreSQL: the storage tests run against a real server. Install it where
# it is missing (Debian), start it where it is down, and make sure the test
# database and a password login exist (a password is ignored under the trust
# authentication some machines use).
ensure_postgres() {
	if [ -n "${MARLOWE_TEST_SKIP_POSTGRES:-}" ]; then
		echo "MARLOWE_TEST_SKIP_POSTGRES is set: PostgreSQL tests are skipped"
		return
	fi
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo="sudo"
	if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
		echo "installing PostgreSQL"
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
		$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
	fi
	if ! pg_isready -q -h 127.0.0.1 -p 5432; then
		echo "starting PostgreSQL"
		$sudo pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
		for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
	fi
	local as_postgres=(su postgres -c)
	[ "$(id -u)" -ne 0 ] && as_postgres=(sudo -u postgres sh -c)
	"${as_postgres[@]}" "psql -q -c \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
	"${as_postgres[@]}" "psql -tAc \"SELECT 1 FROM pg_database WHERE datname = 'test'\"" | grep -q 1 ||
		"${as_postgres[@]}" "createdb test"
	export MARLOWE_TEST_DATABASE_URL="${MARLOWE_TEST_DATABASE_URL:-postgres://postgres:postgres@127.0.0.1:5432/test?sslmode=disable}"
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
bash scripts/browser/run.sh
echo "browser step: $((SECONDS - browser_started))s"

step "TypeScript SDK against the runtime view (@marlowe.io/runtime-rest-client 0.4.0-beta, strict, on a devnet)"
# Installs the SDK with npm ci into a cache directory (scripts/sdk/run.sh).
sdk_started=$SECONDS
bash scripts/sdk/run.sh
echo "sdk step: $((SECONDS - sdk_started))s"

step "benchmark suite, --quick (checks that it runs and writes its table and plots, not speed)"
# Without -race: under the race detector the suite measures the detector.
go test -count=1 -timeout 10m -run '^TestQuickSuite$' ./cmd/marlowe-bench

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
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 200x "$pkg" >/tmp/fuzz.$$.log 2>&1 || {
				cat /tmp/fuzz.$$.log
				exit 1
			}
			echo "   $(grep -o 'execs: [0-9]*' /tmp/fuzz.$$.log | tail -1) in $((SECONDS - started))s"
		done
	done
	rm -f /tmp/fuzz.$$.log
fi

step "all tests passed"
