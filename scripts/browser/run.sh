#!/usr/bin/env bash
# End-to-end test in headless Chromium (Debian's chromium, driven by
# playwright-core): builds the binary, starts `run --devnet` on free ports
# with its store in a temporary directory and cors.origins set to the
# origin of one test page, and runs test.cjs, which serves the page from
# that origin and from a second one and checks, in the browser, that the
# first reads the query API, /events and the WebSocket cross-origin and
# that the second is blocked; then explorer.cjs, the contract explorer's
# pages against the same service. Everything it makes is removed on exit
# but the screenshots ($tmp/artifacts, printed at the end);
# playwright-core is installed once into a cache directory
# (MARLOWE_BROWSER_CACHE, default ~/.cache/marlowe-follower/npm-browser; see
# npm_ci_cached in scripts/lib.sh), and again only when package-lock.json
# changes. Chromium and Node.js are installed with apt-get where they are
# missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
cache="${MARLOWE_BROWSER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/marlowe-follower/npm-browser}"

# shellcheck source=../lib.sh
. "$root/scripts/lib.sh"
[ -x "$CHROMIUM" ] || apt_install chromium
ensure_node

# playwright-core, into the cache (never into the repository). It downloads
# no browser: the test drives Debian's chromium.
modules="$(PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm_ci_cached "$here" "$cache")"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/marlowe-browser-test.XXXXXX")"
artifacts="$tmp/artifacts" # screenshots, kept after the run (CI artefacts)
service_pid=""
cleanup() {
	status=$?
	if [ -n "$service_pid" ] && kill -0 "$service_pid" 2>/dev/null; then
		kill -TERM "$service_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do kill -0 "$service_pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$service_pid" 2>/dev/null || true
	fi
	if [ "$status" -ne 0 ] && [ -f "$tmp/service.log" ]; then
		echo "--- the service's log (last 40 lines):"
		tail -n 40 "$tmp/service.log"
	fi
	if [ -d "$artifacts" ]; then
		find "$tmp" -mindepth 1 -maxdepth 1 ! -name artifacts -exec rm -rf {} +
		echo "screenshots: $artifacts"
	else
		rm -rf "$tmp"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building the binary"
go build -o "$tmp/marlowe-follower" ./cmd/marlowe-follower

# Four free loopback ports: query, streaming, and the two test pages.
read -r qport sport allowed refused < <(free_ports 4)

# Cardano explorer links to a host that never resolves (.invalid): the
# explorer test checks the links and that nothing ever requests them.
EXPLORER_LINKS="tx=https://explorer.invalid/tx/{id},address=https://explorer.invalid/address/{id},policy=https://explorer.invalid/policy/{id}"
"$tmp/marlowe-follower" run --devnet --devnet-block-rate 50 --data-dir "$tmp/data" \
	--query-host 127.0.0.1 --query-port "$qport" --streaming-host 127.0.0.1 --streaming-port "$sport" \
	--cors-origins "http://127.0.0.1:$allowed" --ui-links "$EXPLORER_LINKS" --log-level warn --log-format console --progress-bar never \
	>"$tmp/service.log" 2>&1 &
service_pid=$!
echo "service: query :$qport, streaming :$sport; pages: allowed :$allowed, refused :$refused"

QUERY_URL="http://127.0.0.1:$qport" WS_URL="ws://127.0.0.1:$sport/" \
	ALLOWED_PORT="$allowed" REFUSED_PORT="$refused" CHROMIUM="$CHROMIUM" USER_DATA_DIR="$tmp/chromium-profile" \
	PLAYWRIGHT_CORE="$modules/playwright-core" \
	node "$here/test.cjs"

# The contract explorer (the pages at / of the same service): explorer.cjs.
# Its screenshots are kept in $artifacts (the only thing left of $tmp);
# MARLOWE_EXPLORER_SCREENSHOTS=docs also rewrites docs/explorer.md's
# pictures (docs/explorer-*.png).
QUERY_URL="http://127.0.0.1:$qport" CHROMIUM="$CHROMIUM" USER_DATA_DIR="$tmp/chromium-explorer" \
	PLAYWRIGHT_CORE="$modules/playwright-core" ARTIFACTS="$artifacts" EXPLORER_LINKS="$EXPLORER_LINKS" DOC_SCREENSHOTS="${MARLOWE_EXPLORER_SCREENSHOTS:-}" \
	node "$here/explorer.cjs"
