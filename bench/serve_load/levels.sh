#!/usr/bin/env bash
# One line of figures per concurrency level, through nginx: serve_load (streaming completions, greedy,
# ignore_eos) with 4x the level in requests (at least 64). Used by bench/serve_load/run.sh (CPU) and
# tests/gpu/serve_gpu.sh (GPU).
#   bench/serve_load/levels.sh LOAD_BINARY PORT MAX_TOKENS PROMPT LEVEL...
# env SAMPLING: extra serve_load options, e.g. SAMPLING="--temperature 0.8 --top-p 0.95" (sampled requests).
set -euo pipefail
load=$1 port=$2 max_tokens=$3 prompt=$4
shift 4
printf '%-6s %8s %10s %10s %10s %10s %9s %10s\n' conc reqs ttft_p50 ttft_p99 tpot_p50 tpot_p99 req/s out_tok/s
for c in "$@"; do
    n=$((c * 4 > 64 ? c * 4 : 64))
    # shellcheck disable=SC2086 # SAMPLING is a list of options
    "$load" --port "$port" --concurrency "$c" --requests "$n" --max-tokens "$max_tokens" --prompt "$prompt" \
        ${SAMPLING:-} |
        awk -F'[:,}]' '{for (i = 1; i < NF; i++) v[$i] = $(i + 1)}
            END {printf "%-6s %8s %8.3fms %8.3fms %8.4fms %8.4fms %9s %10s\n", v["{\"concurrency\""],
                 v["\"requests\""], v["\"ttft_p50_ms\""], v["\"ttft_p99_ms\""], v["\"tpot_p50_ms\""],
                 v["\"tpot_p99_ms\""], v["\"req_per_s\""], v["\"out_tok_per_s\""]}'
done
