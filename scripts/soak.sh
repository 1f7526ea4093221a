#!/usr/bin/env bash
# The soak: the adversarial set run against the binary for a while, then a
# table (docs/operations.md, "Soak"). kill -9 and SIGTERM at random moments,
# the node's socket cut, PostgreSQL's connections cut, WebSocket subscribers
# and a durable stream dropping and resuming, fuzzed HTTP requests and
# hostile frames, all at once; at the end nothing may be lost or duplicated.
# The test suite runs the same test briefly (TestSoak, about 20 s per
# backend); this script runs it for as long as you like.
#
#   bash scripts/soak.sh [-m MINUTES] [-b sqlite|postgres|both] [-s SEED] [-o FILE]
#
# -m  minutes of faults per backend (default 10)
# -b  backends (default both; PostgreSQL from MARLOWE_TEST_DATABASE_URL, or
#     the local server at 127.0.0.1:5432, database test)
# -s  the faults' random seed (default: from the clock; printed with the table)
# -o  also write the table to FILE
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10 backends=both seed=0 report=""
while getopts "m:b:s:o:h" opt; do
	case "$opt" in
	m) minutes="$OPTARG" ;;
	b) backends="$OPTARG" ;;
	s) seed="$OPTARG" ;;
	o) report="$(realpath -m "$OPTARG")" ;;
	*) sed -n '2,17p' "$0"; exit 2 ;;
	esac
done
case "$minutes" in '' | *[!0-9]*) echo "soak: -m takes whole minutes" >&2; exit 2 ;; esac
if [ "$backends" != sqlite ] && [ -z "${MARLOWE_TEST_DATABASE_URL:-}" ]; then
	export MARLOWE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	if command -v pg_isready >/dev/null && ! pg_isready -q -h 127.0.0.1 -p 5432; then
		echo "soak: PostgreSQL does not answer at 127.0.0.1:5432; start it, set MARLOWE_TEST_DATABASE_URL, or use -b sqlite" >&2
		exit 1
	fi
fi
# Per backend: the faults, the catch-up, and a reference run over the chain.
timeout="$((minutes * 4 + 15))m"
echo "soak: ${minutes} min of faults per backend ($backends); the table follows at the end"
exec go test -count=1 -timeout "$timeout" -run '^TestSoak$' ./cmd/marlowe-follower/ \
	-args -soak.duration "${minutes}m" -soak.backends "$backends" -soak.seed "$seed" ${report:+-soak.report "$report"}
