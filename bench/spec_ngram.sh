#!/usr/bin/env bash
# N-gram speculation (`serve --spec-ngram K`) beside plain decoding and llama.cpp (node-llama-cpp@3.21.1, no
# speculation) on the same GGUF: one greedy request of NGEN tokens through the engine's ring
# (`llm-client`, tokens/s from its time per output token), 2 threads each. The model is the PRESET shape with
# random weights, whose greedy output falls into loops: the case speculation is for (output that repeats
# itself or its prompt: code edits, extraction, quoting); text that does not repeat gets ~1.0x (drafts back
# off after misses). The ids with and without speculation must be identical (the script checks). Each side
# runs REPS times, alternating; the best run of each is reported. TEMP > 0: a sampled request (seed SEED; the
# ids with and without must still be identical: a draft stands only where the request's own draw agrees);
# llama.cpp stays greedy (its sampling chain costs it little beside a forward pass).
#
#   bash bench/spec_ngram.sh            # PRESET=stories110m DTYPES="q8_0 f16" K=4 NGEN=256 REPS=3
#   MODEL=../shared/models/stories260K/stories260K.gguf bash bench/spec_ngram.sh   # a trained model's own text
#   TEMP=0.7 SEED=5 bash bench/spec_ngram.sh                                        # a sampled request
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
THREADS=${THREADS:-2}
DTYPES=${DTYPES:-"q8_0 f16"}
PRESET=${PRESET:-stories110m}
K=${K:-4}
NGEN=${NGEN:-256}
TEMP=${TEMP:-0}
SEED=${SEED:-5}
PROMPT=${PROMPT:-"Once upon a time, there was a little robot who lived in a small town by the sea."}
MODELS=${MODELS:-bench/models}

make -s engine
[ -d bench/llamacpp/node_modules/node-llama-cpp ] || npm ci --prefix bench/llamacpp --no-audit --no-fund >/dev/null
mkdir -p "$MODELS"
W=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT

# one served request: prints "tokens/s ids-hash", and the engine's speculation line into $W/spec.txt
served() { # model spec_tokens
    local name="spec$$_$2"
    build/llm-engine serve --model "$1" --shm "$name" --threads "$THREADS" --no-supervise --slots 4 \
        --spec-ngram "$2" > "$W/serve.log" 2>&1 &
    PID=$!
    for _ in $(seq 600); do grep -q 'ready on' "$W/serve.log" && break; sleep 0.05; done
    local js
    js=$(build/llm-client --shm "$name" --model "$1" --prompt "$PROMPT" --max-tokens "$NGEN" --temperature "$TEMP" \
         --seed "$SEED" --ignore-eos | tail -n 1)
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    grep 'n-gram speculation' "$W/serve.log" | sed 's/^serve: //' > "$W/spec.txt" || true
    node -e 'const o = JSON.parse(process.argv[1]); const h = require("crypto").createHash("md5")
        .update(o.ids.join(",")).digest("hex").slice(0, 8); console.log((1000 / o.tpot_ms).toFixed(1), h, o.ids.length)' "$js"
}

best() { sort -g | tail -n 1; }
printf '%-5s | %12s %12s %12s | %9s %9s | %s\n' dtype "plain" "spec K=$K" "llama.cpp" "spec/plain" "spec/lcpp" "drafts confirmed"
printf '%s\n' "------+----------------------------------------+---------------------+------------------"
for dt in $DTYPES; do
    model=${MODEL:-$MODELS/$PRESET-$dt.gguf}
    [ -n "${MODEL:-}" ] || [ -f "$model" ] || build/llm-engine gen-model --preset "$PRESET" --dtype "$dt" --out "$model" --seed 1 2>/dev/null
    p=(); s=(); l=(); same=yes; conf=
    for _ in $(seq "$REPS"); do
        read -r tp hp np <<<"$(served "$model" 0)"
        read -r ts hs ns <<<"$(served "$model" "$K")"
        conf=$(sed -n 's/.*: \([0-9]* of [0-9]*\) drafted tokens confirmed (\([0-9]*%\)).*/\1 (\2)/p' "$W/spec.txt")
        [ "$hp" = "$hs" ] && [ "$np" = "$NGEN" ] || same=NO
        p+=("$tp"); s+=("$ts")
        js=$(node bench/llamacpp/run.mjs --model "$model" --prompt "$PROMPT" --max-tokens "$NGEN" --threads "$THREADS" \
             --json 2>/dev/null | tail -n 1)
        l+=("$(node -e 'console.log(JSON.parse(process.argv[1]).decode_tps)' "$js")")
    done
    bp=$(printf '%s\n' "${p[@]}" | best); bs=$(printf '%s\n' "${s[@]}" | best); bl=$(printf '%s\n' "${l[@]}" | best)
    printf '%-5s | %12.1f %12.1f %12.1f | %8.2fx %8.2fx | %s; same ids: %s\n' "$dt" "$bp" "$bs" "$bl" \
        "$(echo "$bs / $bp" | bc -l)" "$(echo "$bs / $bl" | bc -l)" "$conf" "$same"
done
echo "(decode tokens/s, one request of $NGEN tokens at temperature $TEMP (llama.cpp: greedy), ${MODEL:-$PRESET shape}, $THREADS threads, best of $REPS)"
