#!/usr/bin/env bash
# The official Marlowe TypeScript SDK (@marlowe.io/runtime-rest-client
# 0.4.0-beta) against the runtime view: builds the binary, starts
# `run --devnet` on free ports with its store in a temporary directory and
# the devnet's chain stopped at a number of blocks (a chain at rest, so that
# the check can compare its answers exactly; made at once, it ends before
# now, its open contracts' deadlines ahead), waits until the service has
# stored all of it (wait.mjs), runs sdk-check.mjs against
# http://127.0.0.1:PORT/runtime, then the example program of docs/query.md
# ("Using the Marlowe TS SDK", copied from the page as it is), stops the
# service and exits non-zero when either failed (and when the service does
# not stop cleanly).
# Everything it makes is removed on exit; the SDK is installed once into a
# cache directory (MARLOWE_SDK_CACHE, default
# ~/.cache/marlowe-follower/npm-sdk), and again only when package-lock.json
# changes. Node.js is installed with apt-get where it is missing.
#
#   MARLOWE_SDK_BLOCKS  the chain's length (default 1000: about 130 contracts,
#                       270 steps, 180 payouts, 110 withdrawals)
#   MARLOWE_SDK_SEED    the devnet's seed (default 1)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
# shellcheck source=../lib.sh
. "$root/scripts/lib.sh"

blocks="${MARLOWE_SDK_BLOCKS:-1000}"
seed="${MARLOWE_SDK_SEED:-1}"
cache="${MARLOWE_SDK_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/marlowe-follower/npm-sdk}"

ensure_node
modules="$(npm_ci_cached "$here" "$cache")"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/marlowe-sdk-test.XXXXXX")"
service_pid=""
# stop_service stops the service with SIGTERM, as an operator does; it
# fails when the service needs SIGKILL or exits with an error.
stop_service() {
	[ -n "$service_pid" ] || return 0
	local pid="$service_pid" rc=0
	service_pid=""
	kill -TERM "$pid" 2>/dev/null || true
	for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "FAIL the service did not stop within 15 s of SIGTERM; killing it"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		return 1
	fi
	wait "$pid" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "FAIL the service exited with status $rc on SIGTERM"
		return 1
	fi
	echo "the service stopped cleanly"
}
cleanup() {
	status=$?
	stop_service || status=1
	if [ "$status" -ne 0 ] && [ -f "$tmp/service.log" ]; then
		echo "--- the service's log (last 40 lines):"
		tail -n 40 "$tmp/service.log"
	fi
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$SECONDS
go build -o "$tmp/marlowe-follower" ./cmd/marlowe-follower
echo "built the binary in $((SECONDS - t0)) s"

read -r qport sport < <(free_ports 2)
# --devnet-block-rate 0: the chain is made as fast as it can be, then waits
# at its tip.
"$tmp/marlowe-follower" run --devnet --devnet-block-rate 0 --devnet-blocks "$blocks" --devnet-seed "$seed" \
	--data-dir "$tmp/data" --query-host 127.0.0.1 --query-port "$qport" --streaming-host 127.0.0.1 --streaming-port "$sport" \
	--log-level warn --log-format console --progress-bar never \
	>"$tmp/service.log" 2>&1 &
service_pid=$!
echo "service: query :$qport, streaming :$sport; devnet seed $seed, $blocks blocks"

node "$here/wait.mjs" "http://127.0.0.1:$qport" "$blocks" 90

check=0
t0=$SECONDS
SDK_NODE_MODULES="$modules" node "$here/sdk-check.mjs" "http://127.0.0.1:$qport/runtime" || check=$?
echo "the check took $((SECONDS - t0)) s"

# The example of docs/query.md: the first js block of its "Using the Marlowe
# TS SDK" section, run as a user would run it (node example.mjs beside the
# SDK's node_modules), with RUNTIME_URL the view. It must exit 0, print the
# Runtime version, find an open contract that takes a deposit, a choice or
# a notify now (the devnet's chain ends before now, its deadlines ahead),
# and leave no unhandled rejection (Node exits 1 on one).
if [ "$check" -eq 0 ]; then
	mkdir -p "$tmp/example"
	ln -s "$modules" "$tmp/example/node_modules"
	awk '/^### Using the Marlowe TS SDK/ { section = 1; next }
		section && /^### / { exit }
		section && !code && /^```js$/ { code = 1; next }
		code && /^```$/ { exit }
		code { print }' docs/query.md >"$tmp/example/example.mjs"
	if [ ! -s "$tmp/example/example.mjs" ]; then
		echo "FAIL docs/query.md has no js example under \"Using the Marlowe TS SDK\""
		check=1
	elif ! (cd "$tmp/example" && RUNTIME_URL="http://127.0.0.1:$qport/runtime" node example.mjs >"$tmp/example/out.txt" 2>&1) ||
		! grep -q '^Runtime 1\.0\.0$' "$tmp/example/out.txt" ||
		! grep -Eq 'it takes now deposits: [0-9]+ choices: [0-9]+ notifies: [0-9]+$' "$tmp/example/out.txt" ||
		grep -Eq 'it takes now deposits: 0 choices: 0 notifies: 0$' "$tmp/example/out.txt"; then
		echo "FAIL the example of docs/query.md (Using the Marlowe TS SDK):"
		cat "$tmp/example/out.txt"
		check=1
	else
		echo "the example of docs/query.md ran:"
		sed 's/^/  /' "$tmp/example/out.txt"
	fi
fi
stop_service || [ "$check" -ne 0 ] || check=1
exit "$check"
