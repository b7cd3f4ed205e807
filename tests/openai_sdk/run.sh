#!/usr/bin/env bash
# The OpenAI Node.js SDK checks (sdk.test.mjs) against the whole service:
#   tests/openai_sdk/run.sh            [BUILD=build] [MODEL=path]
# npm ci when node_modules is missing or older than the lock, `make serve` on a
# free port, `node --test`, `make stop` (also on failure). Function calling
# (tools.test.mjs) needs the Llama 3 chat format: a second service on a tiny
# random model with Llama 3's tokenizer (gen-model --preset tiny-llama3), which /v1/rerank (rerank.test.mjs)
# uses too.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
BUILD=${BUILD:-build}
MODEL=${MODEL:-../shared/models/stories260K/stories260K.gguf}

if [ ! -d "$HERE/node_modules/openai" ] || [ "$HERE/package-lock.json" -nt "$HERE/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$HERE" --no-audit --no-fund
fi

free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
PORT=$(free_port)
TPORT=$(free_port)
trap 'for p in "$PORT" "$TPORT"; do make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$p" >/dev/null 2>&1 || true; done' EXIT
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$MODEL" serve PORT="$PORT"
TMODEL="$REPO/$BUILD/tiny-llama3-q8_0.gguf"
[ -s "$TMODEL" ] || LLM_SHARED_DIR="$REPO/../shared" "$REPO/$BUILD/llm-engine" gen-model --preset tiny-llama3 \
    --dtype q8_0 --seed 3 --out "$TMODEL" >/dev/null
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$TMODEL" serve PORT="$TPORT"

cd "$HERE"
NGX_LLM_BASE_URL="http://127.0.0.1:$PORT/v1" NGX_LLM_ENGINE="$REPO/$BUILD/llm-engine" \
    NGX_LLM_MODEL="$(cd "$REPO" && realpath "$MODEL")" NGX_LLM_TOOLS_URL="http://127.0.0.1:$TPORT/v1" \
    node --test sdk.test.mjs tools.test.mjs anthropic.test.mjs rerank.test.mjs
