#!/usr/bin/env bash
# Draft-model speculation (`serve --draft-model D --draft-tokens K`, its lengths adapting up to K, and with
# --draft-fixed, K every time) beside plain decoding, n-gram speculation
# (`--spec-ngram K`) and llama.cpp with and without draft-model speculation (node-llama-cpp@3.21.1; the
# speculation as llama.cpp's examples/speculative-simple does it, K greedy drafts a round, in
# bench/llamacpp/spec.mjs) on the same GGUF files: one greedy request of NGEN tokens through the engine's ring
# (`llm-client`; tokens/s from its time per output token), THREADS threads each; llama.cpp's figure with a
# draft is wall time over its rounds.
#
# The target is the PRESET shape with random weights in TDTYPE; the draft is the same model re-saved in DDTYPE
# (`gen-model --from`: the same weights, rounded), so that the two agree as a trained pair would (a random
# model of another shape would not). Such a random model's greedy text falls into loops after a while, where
# n-gram drafts also hit: the rows say how many drafts each way confirmed. The ids of every ngx_llm run must be
# the plain run's (the script checks). Each side runs REPS times, alternating; the best run is reported.
#
#   bash bench/spec_draft.sh      # PRESET=stories110m TDTYPE=f16 DDTYPE=q4_0 K=8 NGEN=128 REPS=3 THREADS=2
#   TDTYPE=f32 DDTYPE=q8_0 bash bench/spec_draft.sh
#   BACKEND=cuda BUILD=build-gpu PEER=0 PRESET=llama-3.2-3b TDTYPE=bf16 bash bench/spec_draft.sh   # on a GPU
#   (tests/gpu/session.sh's part spec), without llama.cpp (its CPU build)
set -euo pipefail
cd "$(dirname "$0")/.."

REPS=${REPS:-3}
THREADS=${THREADS:-2}
PRESET=${PRESET:-stories110m}
TDTYPE=${TDTYPE:-f16}
DDTYPE=${DDTYPE:-q4_0}
K=${K:-8}
NGEN=${NGEN:-128}
PROMPT=${PROMPT:-"Once upon a time, there was a little robot who lived in a small town by the sea."}
MODELS=${MODELS:-bench/models}
BACKEND=${BACKEND:-cpu}
PEER=${PEER:-1}
B=${BUILD:-build}

[ -n "${BUILD:-}" ] || make -s engine
[ "$PEER" = 0 ] || [ -d bench/llamacpp/node_modules/node-llama-cpp ] || npm ci --prefix bench/llamacpp --no-audit --no-fund >/dev/null
mkdir -p "$MODELS"
target=$MODELS/$PRESET-$TDTYPE.gguf
draft=$MODELS/$PRESET-$TDTYPE-draft-$DDTYPE.gguf
[ -f "$target" ] || "$B/llm-engine" gen-model --preset "$PRESET" --dtype "$TDTYPE" --seed 1 --out "$target" >/dev/null 2>&1
[ -f "$draft" ] || "$B/llm-engine" gen-model --from "$target" --dtype "$DDTYPE" --out "$draft" >/dev/null 2>&1
W=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT

# one served request: prints "tokens/s ids-hash n", and the engine's speculation line into $W/spec.txt
served() { # serve options...
    local name="specd$$"
    "$B/llm-engine" serve --model "$target" --shm "$name" --threads "$THREADS" --no-supervise --slots 4 --backend "$BACKEND" "$@" \
        > "$W/serve.log" 2>&1 &
    PID=$!
    for _ in $(seq 2400); do grep -q 'ready on' "$W/serve.log" && break; sleep 0.05; done
    local js
    js=$("$B/llm-client" --shm "$name" --model "$target" --prompt "$PROMPT" --max-tokens "$NGEN" --temperature 0 \
         --ignore-eos | tail -n 1)
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
    sed -n 's/.*: \([0-9]* of [0-9]*\) drafted tokens confirmed (\([0-9]*%\)).*/\1 (\2)/p' "$W/serve.log" > "$W/spec.txt"
    python3 -c 'import hashlib, json, sys; o = json.loads(sys.argv[1]); ids = ",".join(map(str, o["ids"]))
print("%.1f" % (1000 / o["tpot_ms"]), hashlib.md5(ids.encode()).hexdigest()[:8], len(o["ids"]))' "$js"
}

# llama.cpp: prints "tokens/s ids-hash validated refuted"
peer() { # plain | draft
    local js
    if [ "$1" = plain ]; then
        js=$(node bench/llamacpp/run.mjs --model "$target" --prompt "$PROMPT" --max-tokens "$NGEN" --threads "$THREADS" \
             --json 2>/dev/null | tail -n 1)
    else
        js=$(node bench/llamacpp/spec.mjs --model "$target" --draft "$draft" --prompt "$PROMPT" --max-tokens "$NGEN" \
             --threads "$THREADS" --draft-tokens "$K" 2>/dev/null | tail -n 1)
    fi
    node -e 'const o = JSON.parse(process.argv[1]); const h = require("crypto").createHash("md5")
        .update(o.ids.join(",")).digest("hex").slice(0, 8); console.log(o.decode_tps, h, o.validated || 0, o.refuted || 0)' "$js"
}

best() { sort -g | tail -n 1; }
P=(); N=(); D=(); F=(); L=(); LD=(); same=yes; nconf=; dconf=; fconf=; lconf=
for _ in $(seq "$REPS"); do
    read -r tp hp np <<<"$(served)"
    read -r tn hn _ <<<"$(served --spec-ngram "$K")"; nconf=$(cat "$W/spec.txt")
    read -r td hd _ <<<"$(served --draft-model "$draft" --draft-tokens "$K")"; dconf=$(cat "$W/spec.txt")
    read -r tf hf _ <<<"$(served --draft-model "$draft" --draft-tokens "$K" --draft-fixed)"; fconf=$(cat "$W/spec.txt")
    [ "$hp" = "$hn" ] && [ "$hp" = "$hd" ] && [ "$hp" = "$hf" ] && [ "$np" = "$NGEN" ] || same=NO
    tl=0 tld=0 lv=0 lr=0
    [ "$PEER" = 0 ] || read -r tl _ <<<"$(peer plain)"
    [ "$PEER" = 0 ] || read -r tld _ lv lr <<<"$(peer draft)"
    lconf="$lv of $((lv + lr)) ($((100 * lv / (lv + lr > 0 ? lv + lr : 1)))%)"
    P+=("$tp"); N+=("$tn"); D+=("$td"); F+=("$tf"); L+=("$tl"); LD+=("$tld")
done
bp=$(printf '%s\n' "${P[@]}" | best); bn=$(printf '%s\n' "${N[@]}" | best); bd=$(printf '%s\n' "${D[@]}" | best)
bf=$(printf '%s\n' "${F[@]}" | best)
bl=$(printf '%s\n' "${L[@]}" | best); bld=$(printf '%s\n' "${LD[@]}" | best)
ratio() { echo "$1 / $2" | bc -l; }
printf '%-34s | %10s | %9s | %s\n' "" "tokens/s" "vs plain" "drafts confirmed"
printf '%s\n' "-----------------------------------+------------+-----------+------------------"
printf '%-34s | %10.1f | %8.2fx |\n' "ngx_llm plain" "$bp" 1
printf '%-34s | %10.1f | %8.2fx | %s\n' "ngx_llm --spec-ngram $K" "$bn" "$(ratio "$bn" "$bp")" "$nconf"
printf '%-34s | %10.1f | %8.2fx | %s\n' "ngx_llm --draft-model ($DDTYPE) K<=$K" "$bd" "$(ratio "$bd" "$bp")" "$dconf"
printf '%-34s | %10.1f | %8.2fx | %s\n' "ngx_llm ... --draft-fixed K=$K" "$bf" "$(ratio "$bf" "$bp")" "$fconf"
if [ "$PEER" != 0 ]; then
    printf '%-34s | %10.1f | %8.2fx |\n' "llama.cpp plain" "$bl" 1
    printf '%-34s | %10.1f | %8.2fx | %s\n' "llama.cpp draft ($DDTYPE) K=$K" "$bld" "$(ratio "$bld" "$bl")" "$lconf"
    printf 'draft model, ngx_llm / llama.cpp: %.2fx\n' "$(ratio "$bd" "$bld")"
fi
echo "ngx_llm ids the same with and without speculation: $same"
echo "(decode tokens/s, one greedy request of $NGEN tokens, $PRESET shape in $TDTYPE with its $DDTYPE copy as draft, backend $BACKEND, $THREADS threads, best of $REPS)"
