#!/usr/bin/env bash
# Embeddings: our engine beside llama.cpp (node-llama-cpp@3.21.1's CPU build, its embedding context) on the
# same GGUF: the qwen3-0.6b preset (Qwen3-Embedding-0.6B's shape: 28 layers, 1024 wide, Llama 3's 128,256-token
# vocabulary here) re-saved with `gen-model --pooling last` (<arch>.pooling_type, what llama.cpp pools by),
# N texts of about LEN tokens each, 2 threads each side, tokenized by each side (the same tokenizer).
# Rows: ours with every input in the scheduler at once (`llm-engine embed`, steps of up to 2048 tokens:
# continuous batching, as /v1/embeddings runs a request's inputs), ours one input at a time
# (--max-batch-size 1), and llama.cpp one input at a time (node-llama-cpp's embedding context holds one
# sequence). Both sides time the embedding calls only, after one throw-away input. Each side runs REPS
# times, alternating; the best run of each is reported (the machine is noisy).
#
#   bash bench/embed_vs_llamacpp.sh             # PRESET=qwen3-0.6b DTYPES="q8_0 bf16" N=32 LEN=100 REPS=2
#   PRESET=bge-small DTYPES="f16 q8_0" bash bench/embed_vs_llamacpp.sh   # a BERT encoder (bge-small-en-v1.5's
#                                               # shape, CLS pooling, as generated; WordPiece vocabulary of 272)
#   PRESET=embeddinggemma-300m DTYPES="f16 q8_0" bash bench/embed_vs_llamacpp.sh   # EmbeddingGemma's shape
#                                               # (bidirectional Gemma 3, mean pooling, Dense modules)
#   PRESET=jina-v2-base DTYPES="f16 q8_0" LEN=200 bash bench/embed_vs_llamacpp.sh   # jina-bert-v2 (ALiBi,
#                                               # a GELU-gated FFN, mean pooling)
#   PRESET=modernbert-base DTYPES="f16 q8_0" LEN=200 bash bench/embed_vs_llamacpp.sh   # ModernBERT-base
#                                               # (LayerNorms, GeGLU, windows of 64 each side on two layers of
#                                               # three, mean pooling; Llama 3's vocabulary instead of OLMo's)
#   PRESET=bge-m3 DTYPES="f16 q8_0" N=16 bash bench/embed_vs_llamacpp.sh   # XLM-RoBERTa large (bge-m3's shape,
#                                               # a Unigram vocabulary): llama.cpp gets our token ids, <s> ... </s>
#                                               # (node-llama-cpp would leave a Unigram vocabulary's <s> out)
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-2}
THREADS=${THREADS:-2}
DTYPES=${DTYPES:-"q8_0 bf16"}
PRESET=${PRESET:-qwen3-0.6b}
N=${N:-32}
LEN=${LEN:-100}
MODELS=${MODELS:-bench/models}

make -s engine
[ -d bench/llamacpp/node_modules/node-llama-cpp ] || npm ci --prefix bench/llamacpp --no-audit --no-fund >/dev/null
mkdir -p "$MODELS"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
# N texts: sentences drawn in turn from a small pool until each has about LEN words' worth of tokens
python3 - "$N" "$LEN" > "$W/in.txt" <<'PY'
import sys
n, length = int(sys.argv[1]), int(sys.argv[2])
pool = ["The little robot counted the stars over the old harbour.", "Lily and Ben went to the park to play.",
        "Embeddings turn text into vectors that a search index can compare.", "It rained for three days in May.",
        "A cat sat on the warm mat and watched the birds.", "Prices rose by 4.5 percent in 2024, the report said."]
for i in range(n):
    words, k = [], i
    while len(words) < length * 3 // 4:
        words += pool[k % len(pool)].split()
        k += 1
    print(" ".join(words))
PY

best() { sort -g | tail -n 1; }
printf '%-5s | %17s %17s %17s | %12s %12s\n' dtype "ours batched" "ours one by one" "llama.cpp" "batched/lcpp" "one/lcpp"
printf '%-5s | %17s %17s %17s |\n' "" "inputs/s (tok/s)" "inputs/s (tok/s)" "inputs/s (tok/s)"
printf '%s\n' "------+-------------------------------------------------------+---------------------------"
for dt in $DTYPES; do
    src="$MODELS/$PRESET-$dt.gguf"
    model="$MODELS/$PRESET-$dt-pool-last.gguf"
    [ -f "$src" ] || build/llm-engine gen-model --preset "$PRESET" --dtype "$dt" --out "$src" --seed 1 2>/dev/null
    lin=(--input-file "$W/in.txt")
    case "$PRESET" in # a BERT encoder declares its own pooling (bge: CLS); a decoder is re-saved to pool last
        *xlm-r*|bge-m3|bge-reranker*)
            model="$src"
            [ -s "$W/ids-$dt.txt" ] || while IFS= read -r line; do
                echo "0,$(build/llm-engine tokenize --tokenizer "$model" --text "$line" | tr -d '[]'),2"
            done < "$W/in.txt" > "$W/ids-$dt.txt"
            lin=(--input-ids "$W/ids-$dt.txt") ;;
        *bert*|bge-*|jina-*|*embeddinggemma*|*modernbert*) model="$src" ;;
        *) [ -f "$model" ] || build/llm-engine gen-model --from "$src" --dtype "$dt" --pooling last --out "$model" 2>/dev/null ;;
    esac
    ob=(); oo=(); lc=(); obt=(); oot=(); lct=()
    for _ in $(seq "$REPS"); do
        e=$(build/llm-engine embed --model "$model" --input-file "$W/in.txt" --threads "$THREADS" --warmup 2>&1 >/dev/null)
        ob+=("$(sed -n 's/.* \([0-9.]*\) inputs\/s.*/\1/p' <<<"$e")"); obt+=("$(sed -n 's/.* \([0-9]*\) tokens\/s$/\1/p' <<<"$e")")
        e=$(build/llm-engine embed --model "$model" --input-file "$W/in.txt" --threads "$THREADS" --warmup \
            --max-batch-size 1 2>&1 >/dev/null)
        oo+=("$(sed -n 's/.* \([0-9.]*\) inputs\/s.*/\1/p' <<<"$e")"); oot+=("$(sed -n 's/.* \([0-9]*\) tokens\/s$/\1/p' <<<"$e")")
        js=$(node bench/llamacpp/embed.mjs --model "$model" "${lin[@]}" --threads "$THREADS" | tail -n 1)
        lc+=("$(node -e 'console.log(JSON.parse(process.argv[1]).inputs_per_s)' "$js")")
        lct+=("$(node -e 'console.log(JSON.parse(process.argv[1]).tokens_per_s)' "$js")")
    done
    b=$(printf '%s\n' "${ob[@]}" | best); o=$(printf '%s\n' "${oo[@]}" | best); l=$(printf '%s\n' "${lc[@]}" | best)
    bt=$(printf '%s\n' "${obt[@]}" | best); ot=$(printf '%s\n' "${oot[@]}" | best); lt=$(printf '%s\n' "${lct[@]}" | best)
    printf '%-5s | %7.2f (%7.0f) %7.2f (%7.0f) %7.2f (%7.0f) | %11.2fx %11.2fx\n' "$dt" "$b" "$bt" "$o" "$ot" "$l" "$lt" \
        "$(echo "$b / $l" | bc -l)" "$(echo "$o / $l" | bc -l)"
done
echo "($N inputs of about $LEN tokens, $PRESET shape, $THREADS threads, best of $REPS)"
