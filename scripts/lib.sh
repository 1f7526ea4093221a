# Shell functions shared by the end-to-end scripts (scripts/browser/run.sh,
# scripts/sdk/run.sh): source it, then call them.

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

# apt_install PACKAGE...: installs Debian packages.
apt_install() {
	echo "installing $* (apt-get)"
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ensure_node: Node.js and npm, installed with apt-get where missing.
ensure_node() {
	command -v node >/dev/null && command -v npm >/dev/null || apt_install nodejs npm
}

# npm_ci_cached DIR CACHE: installs DIR's package-lock.json (npm ci, no
# install scripts) into CACHE/KEY, KEY the lockfile's hash, never into the
# repository, and prints the node_modules directory. A changed lockfile is a
# new key and installs again (the other keys are removed); an install goes
# to a temporary directory first, so that a run using the cache never sees a
# half-made one. The environment is npm's (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# npm_ci_cached ... passes it on).
npm_ci_cached() {
	local dir="$1" cache="$2" key
	key="$(sha256sum "$dir/package-lock.json" | cut -c1-16)"
	if [ ! -d "$cache/$key/node_modules" ]; then
		echo "installing $dir/package-lock.json into $cache/$key (npm ci)" >&2
		local part
		mkdir -p "$cache" && part="$(mktemp -d "$cache/.install.XXXXXX")" && chmod 755 "$part" || return 1
		cp "$dir/package.json" "$dir/package-lock.json" "$part/" || return 1
		if ! (cd "$part" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2); then
			rm -rf "$part"
			return 1
		fi
		mv -T "$part" "$cache/$key" 2>/dev/null || rm -rf "$part" # a concurrent run made it first
		find "$cache" -mindepth 1 -maxdepth 1 -type d -regextype egrep -regex '.*/[0-9a-f]{16}' ! -name "$key" -exec rm -rf {} +
	fi
	echo "$cache/$key/node_modules"
}

# free_ports N: prints N free loopback TCP ports.
free_ports() {
	node -e '
		const net = require("node:net");
		const n = Number(process.argv[1]);
		Promise.all(Array.from({ length: n }, () => new Promise((ok) => { const s = net.createServer().listen(0, "127.0.0.1", () => ok(s)); })))
			.then((ss) => { console.log(ss.map((s) => s.address().port).join(" ")); ss.forEach((s) => s.close()); });' "$1"
}
