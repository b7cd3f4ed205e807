#!/usr/bin/env bash
# Engine aggregate decode throughput against concurrency, through the
# shared-memory ring (llm-engine serve + llm-client, no nginx).
#
#   bench/engine_concurrency.sh [BUILD=build] [MODEL=bench/models/stories110m-q8_0.gguf]
#                               [THREADS=all cores] [MAX_TOKENS=32] [LEVELS="1 8 32 64"]
#
# For each concurrency C, C requests run at once (prompt "Once upon a time",
# EOS ignored, MAX_TOKENS each). Printed per level:
#   wall tok/s    every generated token / wall time of the whole run (prefill included)
#   decode tok/s  C * 1000 / mean time per output token (tpot): the engine's
#                 aggregate decode rate while all C stream at once
# and each one's speedup over C = 1. The model (random weights of the
# stories110m shape; timings do not depend on the values) is generated if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
for kv in "$@"; do export "${kv?}"; done
BUILD=${BUILD:-build}
MODEL=${MODEL:-bench/models/stories110m-q8_0.gguf}
THREADS=${THREADS:-$(nproc)}
MAX_TOKENS=${MAX_TOKENS:-32}
LEVELS=${LEVELS:-"1 8 32 64"}
NAME=bench-conc-$$

[ -x "$BUILD/llm-engine" ] && [ -x "$BUILD/llm-client" ] || make BUILD="$BUILD" engine >/dev/null
if [ ! -f "$MODEL" ]; then
    mkdir -p "$(dirname "$MODEL")"
    "$BUILD/llm-engine" gen-model --preset stories110m --dtype q8_0 --out "$MODEL"
fi

LOG=$(mktemp)
"$BUILD/llm-engine" serve --model "$MODEL" --shm "$NAME" --threads "$THREADS" \
    --max-batch-size 64 --batch-timeout-ms 0 2>"$LOG" &
ENGINE=$!
trap 'kill -TERM $ENGINE 2>/dev/null; wait $ENGINE 2>/dev/null; rm -f "$LOG"' EXIT

client() { "$BUILD/llm-client" --shm "$NAME" --model "$MODEL" --prompt "Once upon a time" --ignore-eos "$@"; }
for _ in $(seq 600); do # up to 60 s for the model to load
    client --max-tokens 1 >/dev/null 2>&1 && break
    kill -0 $ENGINE 2>/dev/null || { cat "$LOG"; exit 1; }
    sleep 0.1
done
client --max-tokens 8 >/dev/null # warm-up

echo "model $MODEL, $THREADS threads, $MAX_TOKENS tokens per request, $(nproc) cores ($(uname -m))"
printf '%11s %12s %14s %9s %14s %9s\n' concurrency tokens "wall tok/s" speedup "decode tok/s" speedup
base_wall="" base_dec=""
for c in $LEVELS; do
    t0=$(date +%s.%N)
    out=$(client --max-tokens "$MAX_TOKENS" --concurrency "$c" --requests "$c")
    t1=$(date +%s.%N)
    read -r tokens wall dec < <(python3 -c '
import json, sys
t0, t1, c = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(l) for l in sys.stdin if l.strip()]
bad = [r for r in rows if r.get("finish_reason") != "length"]
if bad or len(rows) != c:
    sys.exit("unexpected results: %d rows, %d not finished by length: %s" % (len(rows), len(bad), bad[:1]))
tokens = sum(len(r["ids"]) for r in rows)
tpot = sum(r["tpot_ms"] for r in rows) / len(rows)
print(tokens, tokens / (t1 - t0), c * 1000.0 / tpot)
' "$t0" "$t1" "$c" <<<"$out")
    base_wall=${base_wall:-$wall} base_dec=${base_dec:-$dec}
    printf '%11d %12d %14.1f %8.2fx %14.1f %8.2fx\n' "$c" "$tokens" "$wall" \
        "$(python3 -c "print($wall/$base_wall)")" "$dec" "$(python3 -c "print($dec/$base_dec)")"
done
