#!/usr/bin/env bash
# The whole service against llama.cpp serving the same model, over HTTP, in one run:
# ours is `make serve` (nginx + the module + llm-engine serve on the CPU backend), the
# peer is llama.cpp's batched decoding behind a minimal OpenAI-style server
# (bench/llamacpp/server.mjs: node-llama-cpp's prebuilt CPU build, one context with a
# sequence per concurrent request, as llama-server's --parallel slots). The same load
# generator (bench/serve_load/serve_load.c: streaming greedy completions, ignore_eos,
# one connection a request, closed loop) drives both at each concurrency, ours then the
# peer's level by level (both stay up, idle while the other is measured), so both see
# the same machine.
#
#   bench/serve_vs_llamacpp.sh [BUILD=build] [MODEL=bench/models/stories110m-q8_0.gguf] [THREADS=2]
#                              [LEVELS="1 8 32"] [MAX_TOKENS=64] [PROMPT="Once upon a time"] [ROUNDS=1]
#
# Printed per level and server: requests, TTFT p50 / p99, TPOT p50 / p99 (ms), requests/s and
# output tokens/s; then the ratio ours / llama.cpp of tokens/s, and of TTFT and TPOT p50
# (below 1: ours faster), and the peer's own time in llama_decode over the level (GET /perf: llama.cpp's
# performance counters), which tells llama.cpp's compute from what node-llama-cpp adds. The model (random weights of the stories110m shape) is made if
# missing. Needs `npm ci --prefix bench/llamacpp` (node-llama-cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
for kv in "$@"; do export "${kv?}"; done
BUILD=${BUILD:-build}
MODEL=${MODEL:-bench/models/stories110m-q8_0.gguf}
THREADS=${THREADS:-2}
LEVELS=${LEVELS:-"1 8 32"}
MAX_TOKENS=${MAX_TOKENS:-64}
PROMPT=${PROMPT:-Once upon a time}
ROUNDS=${ROUNDS:-1}

[ -d bench/llamacpp/node_modules/node-llama-cpp ] ||
    { echo "bench/serve_vs_llamacpp.sh: run npm ci --prefix bench/llamacpp first" >&2; exit 1; }
make --no-print-directory BUILD="$BUILD" engine module >/dev/null
LOAD="$BUILD/serve_load"
if [ ! -x "$LOAD" ] || [ bench/serve_load/serve_load.c -nt "$LOAD" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$LOAD" bench/serve_load/serve_load.c
fi
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    "$BUILD/llm-engine" gen-model --preset stories110m --dtype q8_0 --out "$MODEL" >/dev/null
fi

free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
OURS=$(free_port)
PEER=$(free_port)
while [ "$PEER" = "$OURS" ]; do PEER=$(free_port); done
MAXC=1
for c in $LEVELS; do [ "$c" -gt "$MAXC" ] && MAXC=$c; done
TMP=$(mktemp -d)
PEER_PID=""
cleanup() {
    [ -n "$PEER_PID" ] && kill -TERM "$PEER_PID" 2>/dev/null && wait "$PEER_PID" 2>/dev/null
    make --no-print-directory BUILD="$BUILD" stop PORT="$OURS" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# ours: every concurrent request in the batch (the default max batch is 32)
ENGINE_ARGS="--threads $THREADS --max-batch-size $((MAXC > 32 ? MAXC : 32))" \
    make --no-print-directory BUILD="$BUILD" MODEL="$MODEL" PORT="$OURS" serve >"$TMP/serve.log" 2>&1 ||
    { cat "$TMP/serve.log" >&2; exit 1; }
node bench/llamacpp/server.mjs --model "$MODEL" --port "$PEER" --threads "$THREADS" --parallel "$MAXC" \
    --ctx-per-seq 512 >"$TMP/peer.log" 2>&1 &
PEER_PID=$!
for port in "$OURS" "$PEER"; do
    for _ in $(seq 600); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && break
        kill -0 "$PEER_PID" 2>/dev/null || { cat "$TMP/peer.log" >&2; exit 1; }
        sleep 0.1
    done
done
grep -h 'server.mjs:' "$TMP/peer.log" || true
echo "# $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load average" \
     "$(cut -d' ' -f1-3 /proc/loadavg); model $MODEL; $THREADS threads each; $MAX_TOKENS tokens a request," \
     "prompt \"$PROMPT\"; requests per level: 4 x concurrency, at least 32, after as many warm-up ones"

# One level against one port: the load generator's JSON line.
measure() {
    local port=$1 c=$2 n=$(($2 * 4 > 32 ? $2 * 4 : 32))
    "$LOAD" --port "$port" --concurrency "$c" --requests "$n" --max-tokens "$MAX_TOKENS" --prompt "$PROMPT"
}
field() { sed -n "s/.*\"$2\":\([-0-9.]*\).*/\1/p" <<<"$1"; }
row() {
    printf '%-6s %-10s %5s %9s %9s %9s %9s %8s %9s\n' "$1" "$2" "$(field "$3" requests)" "$(field "$3" ttft_p50_ms)" \
        "$(field "$3" ttft_p99_ms)" "$(field "$3" tpot_p50_ms)" "$(field "$3" tpot_p99_ms)" "$(field "$3" req_per_s)" \
        "$(field "$3" out_tok_per_s)"
}
printf '%-6s %-10s %5s %9s %9s %9s %9s %8s %9s\n' conc server reqs ttft_p50 ttft_p99 tpot_p50 tpot_p99 req/s out_tok/s
summary=""
for r in $(seq "$ROUNDS"); do
    for c in $LEVELS; do
        a=$(measure "$OURS" "$c")
        curl -s "http://127.0.0.1:$PEER/perf" >/dev/null # (reading the counters resets them)
        b=$(measure "$PEER" "$c")
        p=$(curl -s "http://127.0.0.1:$PEER/perf")
        for x in "$a" "$b"; do
            [ "$(field "$x" errors)" = 0 ] || { echo "errors at concurrency $c: $x" >&2; exit 1; }
        done
        row "$c" ngx_llm "$a"
        row "$c" llama.cpp "$b"
        awk -v bt="$(field "$p" batch_tokens)" -v bm="$(field "$p" batch_ms)" -v st="$(field "$p" single_tokens)" \
            -v sm="$(field "$p" single_ms)" 'BEGIN { if (bm + sm > 0) printf "#      llama.cpp in llama_decode: " \
            "%d tokens in %.1f s, %.0f tokens/s (warm-up, prompts and outputs; no sampling, no server)\n",
            bt + st, (bm + sm) / 1000, (bt + st) * 1000 / (bm + sm) }'
        summary+=$(awk -v c="$c" -v r="$r" -v ta="$(field "$a" out_tok_per_s)" -v tb="$(field "$b" out_tok_per_s)" \
            -v fa="$(field "$a" ttft_p50_ms)" -v fb="$(field "$b" ttft_p50_ms)" \
            -v pa="$(field "$a" tpot_p50_ms)" -v pb="$(field "$b" tpot_p50_ms)" \
            'BEGIN { printf "concurrency %s (round %s): tokens/s %.2fx, TTFT p50 %.2fx, TPOT p50 %.2fx\n",
                     c, r, ta / tb, fa / fb, pa / pb }')$'\n'
    done
done
echo "# ours / llama.cpp (tokens/s above 1 and latencies below 1: ours faster)"
printf '%s' "$summary"
