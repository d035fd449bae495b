#!/usr/bin/env bash
# Copies the browser libraries Hone Studio embeds from npm (pinned in
# scripts/studio-vendor/package.json and package-lock.json) into internal/studio/assets/vendor,
# with their licenses. The copied files are committed: building Hone needs no npm and the
# binary needs no network. Run it again after changing a pin, and commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
src=scripts/studio-vendor
dst=internal/studio/assets/vendor
(cd "$src" && npm ci --no-audit --no-fund --loglevel=error >&2)
mkdir -p "$dst"
u="$src/node_modules/uplot"
cp "$u/dist/uPlot.esm.js" "$dst/uPlot.esm.js"
cp "$u/dist/uPlot.min.css" "$dst/uPlot.min.css"
cp "$u/LICENSE" "$dst/uPlot.LICENSE"
echo "uplot $(node -p "require('./$u/package.json').version")" > "$dst/VERSIONS"
echo "studio-vendor: copied into $dst: $(ls "$dst" | tr '\n' ' ')" >&2
