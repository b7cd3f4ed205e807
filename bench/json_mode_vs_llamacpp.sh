#!/usr/bin/env bash
# Constrained decoding's cost, ours beside llama.cpp's (node-llama-cpp@3.21.1's CPU build): the same
# Llama-3.2-1B-shaped GGUF (Llama 3's 128,256-token vocabulary, random weights; DTYPE q8_0), 2 threads, the
# same prompt, NGEN greedy tokens (64) plain, held to JSON (ours: `generate --json`; llama.cpp: its JSON
# grammar, grammars/json.gbnf, `run.mjs --grammar json`) and held to a JSON Schema (SCHEMA,
# bench/data/cat_schema.json: ours `generate --json-schema`, engine/json_schema*.c; llama.cpp: the grammar
# node-llama-cpp builds from the same schema, `run.mjs --json-schema`) and held to a GBNF grammar (GRAMMAR,
# bench/data/cat.gbnf, the same file on both sides: ours `generate --grammar-file`, engine/grammar*.c;
# llama.cpp's grammar sampler, `run.mjs --grammar-file`). Decode tokens/s from wall time
# around the token loop on both sides (llama.cpp's own "eval" counter leaves its sampling, where the grammar
# runs, out), best of REPS alternating runs (3), and each engine's constrained/plain ratios. A run that
# completes its value early stops there; the token counts are printed.
#
#   bash bench/json_mode_vs_llamacpp.sh          # DTYPE=q8_0 NGEN=64 REPS=3 THREADS=2
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
THREADS=${THREADS:-2}
DTYPE=${DTYPE:-q8_0}
NGEN=${NGEN:-64}
MODELS=${MODELS:-bench/models}
SCHEMA=${SCHEMA:-bench/data/cat_schema.json}
GRAMMAR=${GRAMMAR:-bench/data/cat.gbnf}
PRESET=llama-3.2-1b

make -s engine
[ -d bench/llamacpp/node_modules/node-llama-cpp ] || npm ci --prefix bench/llamacpp --no-audit --no-fund >/dev/null
mkdir -p "$MODELS"
model="$MODELS/$PRESET-$DTYPE.gguf"
[ -f "$model" ] || build/llm-engine gen-model --preset "$PRESET" --dtype "$DTYPE" --out "$model" --seed 1 2>/dev/null
PROMPT='Describe a cat as a JSON object with a name, an age and a list of toys:'

best() { sort -g | tail -n 1; }

ours() { # extra args; prints "tokens/s tokens"
    err=$(build/llm-engine generate --model "$model" --prompt "$PROMPT" --max-tokens "$NGEN" --threads "$THREADS" \
          --ignore-eos --output-ids "$@" 2>&1 >/dev/null)
    awk '/^generated:/ { print $(NF-1), $2 }' <<<"$err"
}
theirs() { # extra args; prints "tokens/s tokens"
    js=$(node bench/llamacpp/run.mjs --model "$model" --prompt "$PROMPT" --max-tokens "$NGEN" --threads "$THREADS" \
         --json "$@" 2>/dev/null | tail -n 1)
    node -e 'const j = JSON.parse(process.argv[1]); console.log(j.decode_tps_wall, j.n_gen)' "$js"
}

op=(); oj=(); os=(); og=(); lp=(); lj=(); ls=(); lg=(); on=0; ln=0; osn=0; lsn=0; ogn=0; lgn=0
for _ in $(seq "$REPS"); do
    r=$(ours); op+=("${r% *}")
    r=$(ours --json); oj+=("${r% *}"); on=${r#* }
    r=$(ours --json-schema "$SCHEMA"); os+=("${r% *}"); osn=${r#* }
    r=$(ours --grammar-file "$GRAMMAR"); og+=("${r% *}"); ogn=${r#* }
    r=$(theirs); lp+=("${r% *}")
    r=$(theirs --grammar json --stop-at-eos); lj+=("${r% *}"); ln=${r#* }
    r=$(theirs --json-schema "$SCHEMA" --stop-at-eos); ls+=("${r% *}"); lsn=${r#* }
    r=$(theirs --grammar-file "$GRAMMAR" --stop-at-eos); lg+=("${r% *}"); lgn=${r#* }
done
OP=$(printf '%s\n' "${op[@]}" | best); OJ=$(printf '%s\n' "${oj[@]}" | best); OS=$(printf '%s\n' "${os[@]}" | best)
OG=$(printf '%s\n' "${og[@]}" | best)
LP=$(printf '%s\n' "${lp[@]}" | best); LJ=$(printf '%s\n' "${lj[@]}" | best); LS=$(printf '%s\n' "${ls[@]}" | best)
LG=$(printf '%s\n' "${lg[@]}" | best)
echo "llama-3.2-1b shape, $DTYPE, $THREADS threads, decode tokens/s (wall), best of $REPS; schema $SCHEMA, grammar $GRAMMAR"
printf '%-10s | %10s %12s %12s %12s %10s %12s %12s | %s\n' engine plain "JSON mode" "JSON Schema" "GBNF" JSON/plain \
    Schema/plain GBNF/plain "tokens generated (JSON, schema, GBNF)"
div() { awk -v a="$1" -v b="$2" 'BEGIN { print a / b }'; }
printf '%-10s | %10.2f %12.2f %12.2f %12.2f %9.2fx %11.2fx %11.2fx | %s, %s, %s\n' ours "$OP" "$OJ" "$OS" "$OG" \
    "$(div "$OJ" "$OP")" "$(div "$OS" "$OP")" "$(div "$OG" "$OP")" "$on" "$osn" "$ogn"
printf '%-10s | %10.2f %12.2f %12.2f %12.2f %9.2fx %11.2fx %11.2fx | %s, %s, %s\n' llama.cpp "$LP" "$LJ" "$LS" "$LG" \
    "$(div "$LJ" "$LP")" "$(div "$LS" "$LP")" "$(div "$LG" "$LP")" "$ln" "$lsn" "$lgn"
printf '%-10s | %9.2fx %11.2fx %11.2fx %11.2fx\n' "ours/l.cpp" "$(div "$OP" "$LP")" "$(div "$OJ" "$LJ")" \
    "$(div "$OS" "$LS")" "$(div "$OG" "$LG")"
