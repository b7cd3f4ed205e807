#!/usr/bin/env bash
# Load test of the whole service: `make serve` on a free port, then
#  1. serve_load (streaming completions, greedy, ignore_eos) at concurrency 1, 8, 32, 64:
#     TTFT p50/p99, TPOT p50/p99, requests/s, output tokens/s;
#  2. what nginx + the ring add at concurrency 1: TTFT p50 of the same request
#     through nginx (serve_load) and straight to the engine (llm-client), in
#     alternating rounds so both see the same machine load.
#   bench/serve_load/run.sh    [BUILD=build] [MODEL=path] [MAX_TOKENS=64] [LEVELS="1 8 32 64"]
#                              [OVERHEAD_REQS=200] [OVERHEAD_TOKENS=16] [ENGINE_ARGS="--threads 1"]
# ENGINE_ARGS: the engine `make serve` started is replaced by one with these extra
# options (same segment name; nginx's workers re-attach). The default, one thread,
# suits stories260K: with more threads every step meets a thread barrier, and on a
# busy machine each barrier can cost a scheduler time slice (~5 ms per token
# measured here). ENGINE_ARGS= keeps make serve's engine as it is.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
cd "$REPO"
BUILD=${BUILD:-build}
MODEL=${MODEL:-../shared/models/stories260K/stories260K.gguf}
MAX_TOKENS=${MAX_TOKENS:-64}
LEVELS=${LEVELS:-1 8 32 64}
OVERHEAD_REQS=${OVERHEAD_REQS:-200}
OVERHEAD_TOKENS=${OVERHEAD_TOKENS:-16}
PROMPT="Once upon a time"
ENGINE_ARGS=${ENGINE_ARGS---threads 1}

mkdir -p "$BUILD"
LOAD="$BUILD/serve_load"
if [ ! -x "$LOAD" ] || [ "$HERE/serve_load.c" -nt "$LOAD" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$LOAD" "$HERE/serve_load.c"
fi

PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })' 2>/dev/null ||
       echo $((20000 + RANDOM % 20000)))
TMP=$(mktemp -d)
trap 'make -C "$REPO" --no-print-directory BUILD="$BUILD" stop PORT="$PORT" >/dev/null 2>&1 || true; rm -rf "$TMP"' EXIT
make -C "$REPO" --no-print-directory BUILD="$BUILD" MODEL="$MODEL" serve PORT="$PORT"
RUN="$BUILD/serve-$PORT"
if [ -n "$ENGINE_ARGS" ]; then
    pid=$(cat "$RUN/engine.pid")
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    # shellcheck disable=SC2086 # ENGINE_ARGS is a list of options
    "$BUILD/llm-engine" serve --model "$MODEL" --shm "serve-$PORT" --shm-mode 0600 $ENGINE_ARGS \
        >"$RUN/logs/engine.log" 2>&1 &
    echo $! >"$RUN/engine.pid" # make stop stops this one
    for _ in $(seq 300); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/health")" = 200 ] && break
        kill -0 "$(cat "$RUN/engine.pid")" 2>/dev/null || { cat "$RUN/logs/engine.log" >&2; exit 1; }
        sleep 0.1
    done
fi
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg); model $MODEL; engine options: ${ENGINE_ARGS:-as make serve starts it}; $MAX_TOKENS tokens per request"

# 1. Throughput and latency by concurrency.
# shellcheck disable=SC2086 # LEVELS is a list
"$HERE/levels.sh" "$LOAD" "$PORT" "$MAX_TOKENS" "$PROMPT" $LEVELS

# 2. nginx + ring overhead at concurrency 1 (same prompt, greedy, same token count).
SHM="serve-$PORT"
rounds=4
per=$((OVERHEAD_REQS / rounds))
for _ in $(seq $rounds); do
    "$LOAD" --port "$PORT" --concurrency 1 --requests "$per" --warmup 5 --max-tokens "$OVERHEAD_TOKENS" \
        --prompt "$PROMPT" --raw "$TMP/nginx.raw" >/dev/null
    cut -d' ' -f1 "$TMP/nginx.raw" >>"$TMP/nginx.ttft"
    "$BUILD/llm-client" --shm "$SHM" --model "$MODEL" --prompt "$PROMPT" --max-tokens "$OVERHEAD_TOKENS" \
        --temperature 0 --ignore-eos --requests $((per + 5)) |
        tail -n +6 | sed -n 's/.*"ttft_ms":\([0-9.e+-]*\).*/\1/p' >>"$TMP/client.ttft"
done
# min / p10 / p50 of a file of numbers.
stats() { sort -g "$1" | awk '{v[NR] = $1} END {print v[1], v[int((NR + 9) / 10)], v[int((NR + 1) / 2)]}'; }
read -r nmin n10 n50 < <(stats "$TMP/nginx.ttft")
read -r cmin c10 c50 < <(stats "$TMP/client.ttft")
awk -v k="$(wc -l <"$TMP/nginx.ttft")" -v t="$OVERHEAD_TOKENS" -v nmin="$nmin" -v n10="$n10" -v n50="$n50" \
    -v cmin="$cmin" -v c10="$c10" -v c50="$c50" 'BEGIN {
    printf "TTFT at concurrency 1 (%d requests each, %d tokens)   min / p10 / p50\n", k, t
    printf "  through nginx (serve_load)    %8.3f %8.3f %8.3f ms\n", nmin, n10, n50
    printf "  straight to the engine        %8.3f %8.3f %8.3f ms  (llm-client)\n", cmin, c10, c50
    printf "  nginx + ring add at p50: %.0f us (at p10: %.0f us)\n", (n50 - c50) * 1000, (n10 - c10) * 1000 }'
