#!/usr/bin/env bash
# Set up (or reuse) the real-editor test kit: Node 24, code-server and playwright-core
# under ~/.cache/exportlens-test/code-server-<version>/, plus Debian's chromium and the
# libkrb5 headers code-server's native modules build against.
# Idempotent: each part is stamped when finished and reused; an interrupted part is redone.
# Prints `KEY=VALUE` lines (NODE, CODE_SERVER, PLAYWRIGHT_CORE, CHROMIUM) last on stdout,
# for the test to read. Everything else goes to stderr.
set -euo pipefail

CODE_SERVER_VERSION="${CODE_SERVER_VERSION:-4.139.1}"
NODE_VERSION="24.21.0"          # code-server 4.139 refuses any Node major but 24
PLAYWRIGHT_VERSION="1.65.1"     # the driver only: it drives Debian's chromium, downloads no browser
CACHE_ROOT="${EXPORTLENS_TEST_CACHE:-$HOME/.cache/exportlens-test}"
KIT="$CACHE_ROOT/code-server-$CODE_SERVER_VERSION"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

log() { echo "setup-code-server: $*" >&2; }

apt_install() {
    # Only what is missing; `apt-get update` once, and only when something is.
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# One npm project folder per part, so a new driver version does not rebuild code-server.
# $1: folder, $2: stamp name, then the command that fills the folder.
part() {
    local dir="$1" stamp="$1/.ready-$2"
    shift 2
    if [ -f "$stamp" ]; then
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' > "$dir/package.json"
    (cd "$dir" && "$@")
    touch "$stamp"
}

start=$(date +%s)
# Outside the cache, so checked every time (cheap: dpkg -s).
apt_install chromium libkrb5-dev g++ make python3
[ -x "$CHROMIUM" ] || { log "no chromium at $CHROMIUM"; exit 1; }

npm_quiet=(--no-audit --no-fund --loglevel=error)

# 1. Node 24 from the npm package `node` (its binary ships inside the package).
install_node() { npm install "${npm_quiet[@]}" "node@$NODE_VERSION" >&2; }
part "$KIT/node" "$NODE_VERSION" install_node
NODE_BIN="$KIT/node/node_modules/.bin"
"$NODE_BIN/node" --version | grep -q "^v24\." || { log "node 24 is not in $NODE_BIN"; exit 1; }

# 2. code-server, installed by npm running on Node 24: its postinstall reads the Node
# major from npm's user agent, then runs `npm install` in lib/vscode and
# lib/vscode/extensions, building native modules (a few minutes). npm 11 runs no
# dependency's install scripts unless approved, so the package is fetched without
# scripts and its postinstall run explicitly, with scripts allowed for that build only.
install_code_server() {
    export PATH="$NODE_BIN:$PATH"
    npm install "${npm_quiet[@]}" --ignore-scripts "code-server@$CODE_SERVER_VERSION" >&2
    local pkg="$PWD/node_modules/code-server"
    fix_bins "$pkg"
    (cd "$pkg" && npm_config_dangerously_allow_all_scripts=true npm run postinstall >&2)
    fix_bins "$pkg"
    # --version writes a default config file: keep it inside the kit.
    XDG_CONFIG_HOME="$PWD/xdg-config" XDG_DATA_HOME="$PWD/xdg-data" \
        node "$pkg/out/node/entry.js" --version >&2
}
# npm 11 can leave bin targets without their executable bit when it skips scripts;
# build steps that call them (cross-env) then fail with "Permission denied".
fix_bins() {
    find "$1" -path '*/node_modules/.bin/*' -print0 2>/dev/null \
        | while IFS= read -r -d '' link; do
            local target
            target="$(readlink -f "$link" || true)"
            if [ -n "$target" ] && [ -f "$target" ]; then chmod +x "$target"; fi
        done
}
part "$KIT/code-server" "$CODE_SERVER_VERSION-node$NODE_VERSION" install_code_server

# 3. playwright-core, the driver only.
install_driver() { npm install "${npm_quiet[@]}" "playwright-core@$PLAYWRIGHT_VERSION" >&2; }
part "$KIT/driver" "$PLAYWRIGHT_VERSION" install_driver

log "kit ready at $KIT ($(( $(date +%s) - start )) s)"
echo "NODE=$NODE_BIN/node"
echo "CODE_SERVER=$KIT/code-server/node_modules/code-server/out/node/entry.js"
echo "PLAYWRIGHT_CORE=$KIT/driver/node_modules/playwright-core"
echo "CHROMIUM=$CHROMIUM"
