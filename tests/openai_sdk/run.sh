#!/usr/bin/env bash
# The OpenAI Node.js SDK checks (sdk.test.mjs) against the whole service:
#   tests/openai_sdk/run.sh            [BUILD=build] [MODEL=path]
# npm ci when node_modules is missing or older than the lock, `make serve` on a
# free port, `node --test`, `make stop` (also on failure).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
BUILD=${BUILD:-build}
MODEL=${MODEL:-../shared/models/stories260K/stories260K.gguf}

if [ ! -d "$HERE/node_modules/openai" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$HERE" --no-audit --no-fund
fi

PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
trap 'make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$PORT" >/dev/null 2>&1 || true' EXIT
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$MODEL" serve PORT="$PORT"

cd "$HERE"
NGX_LLM_BASE_URL="http://127.0.0.1:$PORT/v1" NGX_LLM_ENGINE="$REPO/$BUILD/llm-engine" \
    NGX_LLM_MODEL="$(cd "$REPO" && realpath "$MODEL")" node --test sdk.test.mjs
