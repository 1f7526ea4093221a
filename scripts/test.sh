#!/usr/bin/env bash
# The project's whole test suite: what the README's test command and CI run.
#   go vet, a gofmt check, go test -race over every package, then every fuzz
#   target for a short while (FUZZTIME, default 5s each; FUZZTIME=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-5s}"

step() { printf '\n== %s\n' "$*"; }

step "go vet"
go vet ./...

step "gofmt"
unformatted=$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"
	echo "$unformatted"
	exit 1
fi

step "go test -race"
go test -race -count=1 -timeout 15m ./...

if [ "$FUZZTIME" != "0" ]; then
	step "fuzz targets (${FUZZTIME} each)"
	# Every func FuzzXxx in a _test.go file, run in its own package.
	grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
		pkg="./$(dirname "${file#./}")"
		grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
			echo "-- $pkg $target"
			go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$pkg" >/tmp/fuzz.$$.log 2>&1 || {
				cat /tmp/fuzz.$$.log
				exit 1
			}
		done
	done
	rm -f /tmp/fuzz.$$.log
fi

step "all tests passed"
