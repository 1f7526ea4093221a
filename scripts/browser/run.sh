#!/usr/bin/env bash
# End-to-end test in headless Chromium (Debian's chromium, driven by
# playwright-core): builds the binary, starts `run --devnet` on free ports
# with its store in a temporary directory and cors.origins set to the
# origin of one test page, and runs test.cjs, which serves the page from
# that origin and from a second one and checks, in the browser, that the
# first reads the query API, /events and the WebSocket cross-origin and
# that the second is blocked. Everything it makes is removed on exit;
# playwright-core is installed once into a cache directory
# (MARLOWE_BROWSER_CACHE, default ~/.cache/marlowe-follower/npm-browser),
# and again only when package-lock.json changes. Chromium and Node.js are
# installed with apt-get where they are missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
cache="${MARLOWE_BROWSER_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/marlowe-follower/npm-browser}"

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
apt_install() {
	echo "installing $* (apt-get)"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
[ -x "$CHROMIUM" ] || apt_install chromium
command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm

# playwright-core, into the cache (never into the repository). It downloads
# no browser: the test drives Debian's chromium.
lock_sum="$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)"
if [ "$(cat "$cache/.lock-sha256" 2>/dev/null)" != "$lock_sum" ] || [ ! -d "$cache/node_modules/playwright-core" ]; then
	echo "installing playwright-core into $cache (npm ci)"
	mkdir -p "$cache"
	cp "$here/package.json" "$here/package-lock.json" "$cache/"
	(cd "$cache" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
	echo "$lock_sum" >"$cache/.lock-sha256"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/marlowe-browser-test.XXXXXX")"
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
	rm -rf "$tmp"
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "building the binary"
go build -o "$tmp/marlowe-follower" ./cmd/marlowe-follower

# Four free loopback ports: query, streaming, and the two test pages.
read -r qport sport allowed refused < <(node -e '
	const net = require("node:net");
	Promise.all([0, 1, 2, 3].map(() => new Promise((ok) => { const s = net.createServer().listen(0, "127.0.0.1", () => ok(s)); })))
		.then((ss) => { console.log(ss.map((s) => s.address().port).join(" ")); ss.forEach((s) => s.close()); });')

"$tmp/marlowe-follower" run --devnet --devnet-block-rate 50 --data-dir "$tmp/data" \
	--query-host 127.0.0.1 --query-port "$qport" --streaming-host 127.0.0.1 --streaming-port "$sport" \
	--cors-origins "http://127.0.0.1:$allowed" --log-level warn --log-format console --progress-bar never \
	>"$tmp/service.log" 2>&1 &
service_pid=$!
echo "service: query :$qport, streaming :$sport; pages: allowed :$allowed, refused :$refused"

QUERY_URL="http://127.0.0.1:$qport" WS_URL="ws://127.0.0.1:$sport/" \
	ALLOWED_PORT="$allowed" REFUSED_PORT="$refused" CHROMIUM="$CHROMIUM" USER_DATA_DIR="$tmp/chromium-profile" \
	PLAYWRIGHT_CORE="$cache/node_modules/playwright-core" \
	node "$here/test.cjs"
