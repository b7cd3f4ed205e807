#!/usr/bin/env bash
# Our CPU engine beside llama.cpp (node-llama-cpp@3.21.1's CPU build) on the
# same stories110m-shaped GGUF (or PRESET: llama-3.2-1b, ...) in F16, Q8_0 and
# Q4_0: 2 threads each, the same PROMPT_LEN-token prompt (128; given as ids),
# NGEN greedy tokens (128). Prints prefill and decode
# tokens/s for both and our/llama.cpp ratios. Each side runs REPS times,
# alternating, and the best run of each is reported (the machine is noisy).
#
#   bash bench/cpu_vs_llamacpp.sh            # REPS=3 THREADS=2 DTYPES="f16 q8_0 q4_0"
#   DTYPES="q4_K_M q6_K" bash bench/cpu_vs_llamacpp.sh
#   PRESET=llama-3.2-1b DTYPES="q4_K_M q8_0" NGEN=32 REPS=2 bash bench/cpu_vs_llamacpp.sh
#   PROMPT_LEN=1000 NGEN=16 bash bench/cpu_vs_llamacpp.sh   # long-prompt prefill
#   PRESET=qwen3-30b-a3b LAYERS=8 DTYPES="q8_0 q4_K_M" bash bench/cpu_vs_llamacpp.sh
#       # a mixture of experts; LAYERS cuts a model too big for this machine to its first N layers
#   KV=q8_0 PROMPT_LEN=1000 NGEN=64 DTYPES=q8_0 bash bench/cpu_vs_llamacpp.sh
#       # both KV caches in q8_0 (--kv-cache-dtype / llama.cpp's -ctk -ctv); default: both f16
# Types gen-model does not write (q4_K_M, q5_K_M, q6_K, q4_1, ...) are made by
# llama.cpp's own quantiser from the F32 file (build/parity/ggml_ref); our
# engine converts them to Q8_0 at load (engine/gguf_quants.h), llama.cpp runs
# them natively.
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
THREADS=${THREADS:-2}
DTYPES=${DTYPES:-"f16 q8_0 q4_0"}
NGEN=${NGEN:-128}
PROMPT_LEN=${PROMPT_LEN:-128}
PRESET=${PRESET:-stories110m}
LAYERS=${LAYERS:-0}
MODELS=${MODELS:-bench/models}
KV=${KV:-f16}

make -s engine build/parity/ggml_ref
LLAMA_LIBS=bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -d bench/llamacpp/node_modules/node-llama-cpp ] || npm ci --prefix bench/llamacpp --no-audit --no-fund >/dev/null
mkdir -p "$MODELS"

# A fixed prompt: BOS then PROMPT_LEN - 1 ordinary ids.
PROMPT=$(awk -v n="$PROMPT_LEN" 'BEGIN { s = "1"; for (i = 1; i < n; i++) s = s "," (300 + (i * 37) % 400); print s }')

best() { sort -g | tail -n 1; }

printf '%-6s | %14s %14s %7s | %14s %14s %7s\n' dtype "prefill ours" "llama.cpp" ratio "decode ours" "llama.cpp" ratio
printf '%s\n' "-------+----------------------------------------+---------------------------------------"
NAME=$PRESET
[ "$LAYERS" = 0 ] || NAME="$PRESET-${LAYERS}l"
for dt in $DTYPES; do
    model="$MODELS/$NAME-$dt.gguf"
    case $dt in
    f32|f16|bf16|q8_0|q4_0)
        [ -f "$model" ] || build/llm-engine gen-model --preset "$PRESET" --layers "$LAYERS" --dtype "$dt" \
                               --out "$model" --seed 1 2>/dev/null ;;
    *)
        f32="$MODELS/$NAME-f32.gguf"
        [ -f "$f32" ] || build/llm-engine gen-model --preset "$PRESET" --layers "$LAYERS" --dtype f32 --out "$f32" \
                             --seed 1 2>/dev/null
        [ -f "$model" ] || build/parity/ggml_ref quantize "$LLAMA_LIBS" "$f32" "$model" "$dt" >/dev/null 2>&1 ;;
    esac
    op=(); od=(); lp=(); ld=()
    for _ in $(seq "$REPS"); do
        err=$(build/llm-engine generate --model "$model" --prompt-ids "$PROMPT" --max-tokens "$NGEN" \
              --threads "$THREADS" --ignore-eos --output-ids --kv-cache-dtype "$KV" 2>&1 >/dev/null)
        op+=("$(awk '/^prompt:/ { print $(NF-1) }' <<<"$err")")
        od+=("$(awk '/^generated:/ { print $(NF-1) }' <<<"$err")")
        js=$(node bench/llamacpp/run.mjs --model "$model" --prompt-tokens "$PROMPT" --max-tokens "$NGEN" \
             --threads "$THREADS" --kv-type "$KV" --json 2>/dev/null | tail -n 1)
        lp+=("$(node -e 'console.log(JSON.parse(process.argv[1]).prefill_tps)' "$js")")
        ld+=("$(node -e 'console.log(JSON.parse(process.argv[1]).decode_tps)' "$js")")
    done
    p1=$(printf '%s\n' "${op[@]}" | best); p2=$(printf '%s\n' "${lp[@]}" | best)
    d1=$(printf '%s\n' "${od[@]}" | best); d2=$(printf '%s\n' "${ld[@]}" | best)
    awk -v dt="$dt" -v p1="$p1" -v p2="$p2" -v d1="$d1" -v d2="$d2" 'BEGIN {
        printf "%-6s | %14.1f %14.1f %6.2fx | %14.1f %14.1f %6.2fx\n", dt, p1, p2, p1 / p2, d1, d2, d1 / d2 }'
done
echo "($PRESET shape$([ "$LAYERS" = 0 ] || echo ", first $LAYERS layers"); tokens/s, best of $REPS runs each, $THREADS threads, $PROMPT_LEN-token prompt, $NGEN generated, $KV KV caches; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
