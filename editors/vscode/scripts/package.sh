#!/usr/bin/env bash
# Build editors/vscode/exportlens-<version>.vsix from a clean `npm ci`:
# bundle with esbuild, then package with @vscode/vsce (no publishing, no network).
# Prints the .vsix path as the last line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error >&2
fi
npm run --silent build >&2
version="$(node -p 'require("./package.json").version')"
out="exportlens-$version.vsix"
rm -f "$out"
# --no-dependencies: everything the extension needs is bundled in dist/extension.js.
npx --no-install vsce package --no-dependencies --allow-missing-repository --skip-license --out "$out" >&2
echo "$PWD/$out"
