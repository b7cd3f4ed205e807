#!/usr/bin/env bash
# The OpenAI Node.js SDK checks (sdk.test.mjs) against the whole service:
#   tests/openai_sdk/run.sh            [BUILD=build] [MODEL=path]
# npm ci when node_modules is missing or older than the lock, `make serve` on a
# free port, `node --test`, `make stop` (also on failure). Function calling
# (tools.test.mjs) needs the Llama 3 chat format: a second service on a tiny
# random model with Llama 3's tokenizer (gen-model --preset tiny-llama3), which /v1/rerank (rerank.test.mjs)
# uses too. The first service serves that model as well, by name (make serve MODELS=...).
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
PPORT=$(free_port)
RPORT=$(free_port)
trap 'for p in "$PORT" "$TPORT" "$PPORT" "$RPORT"; do make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$p" >/dev/null 2>&1 || true; done' EXIT
TMODEL="$REPO/$BUILD/tiny-llama3-q8_0.gguf"
[ -s "$TMODEL" ] || LLM_SHARED_DIR="$REPO/../shared" "$REPO/$BUILD/llm-engine" gen-model --preset tiny-llama3 \
    --dtype q8_0 --seed 3 --out "$TMODEL" >/dev/null
# the main service has the tiny Llama 3 model behind the same URL too (MODELS: llm_models), on an engine of its own
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$MODEL" MODELS="$TMODEL" serve PORT="$PORT"
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$TMODEL" serve PORT="$TPORT"
# rerank.test.mjs: a model with its own (untied) language-model head, and the same model as llama.cpp converts a
# reranker (gen-model --rank-head: a "yes" / "no" classifier head, the language-model head left out)
PMODEL="$REPO/$BUILD/tiny-phi3-f32.gguf" RMODEL="$REPO/$BUILD/tiny-phi3-rank-f32.gguf"
[ -s "$PMODEL" ] || LLM_SHARED_DIR="$REPO/../shared" "$REPO/$BUILD/llm-engine" gen-model --preset tiny-phi3 \
    --dtype f32 --seed 5 --out "$PMODEL" >/dev/null
[ -s "$RMODEL" ] || "$REPO/$BUILD/llm-engine" gen-model --from "$PMODEL" --rank-head --dtype f32 --out "$RMODEL" \
    >/dev/null
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$PMODEL" serve PORT="$PPORT"
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$RMODEL" serve PORT="$RPORT"

cd "$HERE"
NGX_LLM_BASE_URL="http://127.0.0.1:$PORT/v1" NGX_LLM_ENGINE="$REPO/$BUILD/llm-engine" \
    NGX_LLM_MODEL="$(cd "$REPO" && realpath "$MODEL")" NGX_LLM_TOOLS_URL="http://127.0.0.1:$TPORT/v1" \
    NGX_LLM_HEAD_URL="http://127.0.0.1:$PPORT/v1" NGX_LLM_RANK_URL="http://127.0.0.1:$RPORT/v1" \
    node --test sdk.test.mjs tools.test.mjs anthropic.test.mjs rerank.test.mjs ollama.test.mjs tgi.test.mjs
