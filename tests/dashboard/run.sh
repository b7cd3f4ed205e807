#!/usr/bin/env bash
# The dashboard in headless Chromium against the whole service:
#   tests/dashboard/run.sh            [BUILD=build] [MODEL=path] [CHROMIUM=/usr/bin/chromium] [LOAD_S=10]
# npm ci when node_modules is missing or older than the lock, dashboard/build.sh,
# `make serve` on a free port, ~LOAD_S seconds of llm-client load straight into the
# engine while check.mjs opens /dashboard/ (charts hold points from the live engine,
# keep updating, no console errors), screenshot to BUILD/dashboard-screenshot.png,
# `make stop` (also on failure). Prints TAP and "N passed, N failed"; non-zero on failure.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
BUILD=${BUILD:-build}
MODEL=${MODEL:-../shared/models/stories260K/stories260K.gguf}
LOAD_S=${LOAD_S:-10}
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] || { echo "1..0 # SKIP no Chromium at $CHROMIUM (apt-get install chromium)"; echo "0 passed, 1 failed"; exit 1; }

if [ ! -d "$HERE/node_modules/playwright-core" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$HERE" --no-audit --no-fund >/dev/null
fi
dashboard/build.sh "$BUILD" >/dev/null

PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
LOAD_PID=
cleanup() {
    [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null && wait "$LOAD_PID" 2>/dev/null
    make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$PORT" >/dev/null 2>&1 || true
}
trap cleanup EXIT
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$MODEL" serve PORT="$PORT" >/dev/null

# Load for LOAD_S seconds: batches of 64 requests, 8 at a time, straight into the engine.
(
    end=$((SECONDS + LOAD_S))
    while [ "$SECONDS" -lt "$end" ]; do
        "$BUILD/llm-client" --shm "serve-$PORT" --model "$MODEL" --prompt "Once upon a time" \
            --max-tokens 50 --concurrency 8 --requests 64 >/dev/null || exit 1
    done
) &
LOAD_PID=$!
sleep 2 # a couple of samples with tokens in them before the page opens

rc=0
node "$HERE/check.mjs" "http://127.0.0.1:$PORT/dashboard/" "$REPO/$BUILD/dashboard-screenshot.png" || rc=$?
if ! wait "$LOAD_PID"; then echo "# llm-client failed while loading the engine"; rc=1; fi
LOAD_PID=
exit $rc
