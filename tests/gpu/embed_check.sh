#!/bin/bash
# Embeddings on the CUDA backend against the CPU backend: `llm-engine embed` over a file of texts of 5-120
# tokens in steps of at most STEP tokens (default 24: prompts chunked, several in one step), with the given
# poolings (default last-token and mean), the final norm's output copied from the device
# (kernels/cuda_backend.cu, copy_hidden); with IDS, also that one input given as token ids (an encoder's
# pair: its tokens after the first [SEP] of type 1). Each vector's max |diff| and cosine against the CPU's;
# a pooling or norm left out moves the cosine far below 0.9999.
#   tests/gpu/embed_check.sh ENGINE MODEL [MAX_DIFF] [POOLINGS] [IDS]
#       (LLM_CUDA_LIB: the backend; LLM_CUDA_KV as set; STEP: --max-batched-tokens; MIN_COS: the least cosine,
#       default 0.9999)
set -u -o pipefail
E=$1 M=$2 TOL=${3:-1e-3} POOLS=${4:-last mean} IDS=${5:-}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/in.txt" <<'TXT'
Once upon a time
Lily and Ben went to the park to play with a big red ball, and the sun was warm on the grass
A cat
The little dog ran home because it was late and his mom was waiting with a bowl of warm soup for him
Tom saw a bird.
One day, a girl named Sue found a shiny stone in the garden. She showed it to her friend and they smiled.
Once upon a time there was a little girl named Lily who loved to play outside in the sun with her friends, and one day she found a big red ball under a tree near the pond where the ducks swam and the frogs sang all day long until the sun went down and it was time to go home for dinner with her mom and dad
TXT
fail=0
compare() { # label
    python3 - "$W/cpu.txt" "$W/cuda.txt" "$TOL" "$1" "${MIN_COS:-0.9999}" <<'PY'
import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) > 0, (len(a), len(b))
md, mc = 0.0, 1.0
for x, y in zip(a, b):
    md = max(md, max(abs(p - q) for p, q in zip(x, y)))
    mc = min(mc, sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y)))
ok = md <= tol and mc >= float(sys.argv[5])
print("embeddings, %s, %d input%s: max |diff| %.3g, min cosine %.7f%s" % (sys.argv[4], len(a), "s"[len(a) == 1:],
      md, mc, "" if ok else "  <-- FAIL"))
sys.exit(0 if ok else 1)
PY
}
both() { # label, embed arguments...
    local label=$1; shift
    "$E" embed --model "$M" "$@" --threads 2 --max-batched-tokens "${STEP:-24}" \
        > "$W/cpu.txt" 2> "$W/cpu.err" || { cat "$W/cpu.err"; return 1; }
    "$E" embed --model "$M" "$@" --backend cuda --max-batched-tokens "${STEP:-24}" \
        > "$W/cuda.txt" 2> "$W/cuda.err" || { cat "$W/cuda.err"; return 1; }
    compare "$label"
}
for pool in $POOLS; do
    both "$pool pooling" --input-file "$W/in.txt" --pooling $pool || fail=1
    [ -z "$IDS" ] || both "$pool pooling, ids $IDS" --prompt-ids "$IDS" --pooling $pool || fail=1
done
exit $fail
