#!/bin/sh
# Builds the dashboard page into BUILD_DIR/dashboard/ (served by the nginx
# `location /dashboard/`): index.html, dashboard.js and uPlot's browser bundle
# from npm (pinned in package-lock.json; npm ci when node_modules is missing or stale).
#   dashboard/build.sh [BUILD_DIR]      (default: build; relative to the repository root)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD="$REPO/$BUILD" ;; esac
if [ ! -f "$HERE/node_modules/uplot/dist/uPlot.iife.min.js" ] ||
   [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$HERE" --no-audit --no-fund >/dev/null
fi
OUT="$BUILD/dashboard"
mkdir -p "$OUT"
cp "$HERE/index.html" "$HERE/dashboard.js" "$HERE/dashboard.css" "$OUT/"
cp "$HERE/node_modules/uplot/dist/uPlot.iife.min.js" "$HERE/node_modules/uplot/dist/uPlot.min.css" "$OUT/"
echo "built $OUT"
