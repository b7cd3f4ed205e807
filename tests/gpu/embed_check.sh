#!/bin/bash
# Embeddings on the CUDA backend against the CPU backend: `llm-engine embed` over a file of texts of 5-60
# tokens in steps of at most 24 tokens (prompts chunked, several in one step), last-token and mean pooling,
# the final norm's output copied from the device (kernels/cuda_backend.cu, copy_hidden). Each vector's
# max |diff| and cosine against the CPU's; a pooling or norm left out moves the cosine far below 0.9999.
#   tests/gpu/embed_check.sh ENGINE MODEL [MAX_DIFF]     (LLM_CUDA_LIB: the backend; LLM_CUDA_KV as set)
set -u -o pipefail
E=$1 M=$2 TOL=${3:-1e-3}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
cat > "$W/in.txt" <<'TXT'
Once upon a time
Lily and Ben went to the park to play with a big red ball, and the sun was warm on the grass
A cat
The little dog ran home because it was late and his mom was waiting with a bowl of warm soup for him
Tom saw a bird.
One day, a girl named Sue found a shiny stone in the garden. She showed it to her friend and they smiled.
TXT
fail=0
for pool in last mean; do
    "$E" embed --model "$M" --input-file "$W/in.txt" --pooling $pool --threads 2 --max-batched-tokens 24 \
        > "$W/cpu.txt" 2> "$W/cpu.err" || { cat "$W/cpu.err"; exit 1; }
    "$E" embed --model "$M" --input-file "$W/in.txt" --pooling $pool --backend cuda --max-batched-tokens 24 \
        > "$W/cuda.txt" 2> "$W/cuda.err" || { cat "$W/cuda.err"; exit 1; }
    python3 - "$W/cpu.txt" "$W/cuda.txt" "$TOL" "$pool" <<'PY' || fail=1
import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
tol = float(sys.argv[3])
assert len(a) == len(b) == 6, (len(a), len(b))
md, mc = 0.0, 1.0
for x, y in zip(a, b):
    md = max(md, max(abs(p - q) for p, q in zip(x, y)))
    mc = min(mc, sum(p * q for p, q in zip(x, y)) / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y)))
ok = md <= tol and mc >= 0.9999
print("embeddings, %s pooling, 6 inputs: max |diff| %.3g, min cosine %.7f%s" % (sys.argv[4], md, mc, "" if ok else "  <-- FAIL"))
sys.exit(0 if ok else 1)
PY
done
exit $fail
