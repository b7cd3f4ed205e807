#!/bin/bash
# `make serve BACKEND=cuda` on the GPU machine, checked with the load generator: llm-engine serve
# --backend cuda plus nginx with the module (tools/serve.sh, configured from nginx.conf.example), then
# bench/serve_load at several concurrency levels through nginx, a chat completion, a rerank and /metrics. The GPU
# machine has no nginx: prebuild.sh carries Debian's nginx (the build the module was compiled against)
# with its libraries and its own dynamic loader, so the device's C library does not matter.
#   run(command="tests/gpu/serve_gpu.sh", carry=["build-gpu"], timeout_s=420)
# Environment: B (build-gpu), MODEL (default: the llama-3.2-3b preset in bf16, generated there),
# BACKEND (cuda; cpu for a dry run anywhere), LEVELS ("1 8 32 128"), MAX_TOKENS (128),
# ENGINE_ARGS (default "--max-batch-size 128 --slots 512 --max-batched-tokens 8192").
set -u -o pipefail
cd "$(dirname "$0")/../.."
B=${B:-build-gpu}
BACKEND=${BACKEND:-cuda}
LEVELS=${LEVELS:-1 8 32 128}
MAX_TOKENS=${MAX_TOKENS:-128}
export ENGINE_ARGS=${ENGINE_ARGS:---max-batch-size 128 --slots 512 --max-batched-tokens 8192}
# shellcheck source=tests/gpu/gpu_env.sh
. tests/gpu/gpu_env.sh
for f in "$B/ngx_http_llm_module.so" "$B/serve_load" "$B/nginx/nginx"; do
    [ -e "$f" ] || { echo "FAIL: $f missing (run tests/gpu/prebuild.sh here and carry $B)"; exit 1; }
done
export NGINX_CMD="$PWD/$B/nginx/ld-linux-x86-64.so.2 --library-path $PWD/$B/nginx/lib $PWD/$B/nginx/nginx"
$NGINX_CMD -v || { echo "FAIL: the carried nginx does not start"; exit 1; }

WORK=${WORK:-/tmp/llm_serve_gpu}
mkdir -p "$WORK"
MODEL=${MODEL:-}
if [ -z "$MODEL" ]; then
    MODEL="$WORK/llama-3.2-3b-bf16.gguf"
    if [ ! -f "$MODEL" ]; then
        t0=$(date +%s.%N)
        "$B/llm-engine" gen-model --preset llama-3.2-3b --dtype bf16 --out "$MODEL" >/dev/null ||
            { echo "FAIL: gen-model"; exit 1; }
        echo "generated $MODEL in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
    fi
fi
PORT=${PORT:-18080}
export SERVE_WAIT_S=${SERVE_WAIT_S:-180}
stop() { tools/serve.sh stop "$B" "$PORT" >/dev/null 2>&1 || true; }
trap stop EXIT
rm -rf "$B/serve-$PORT/logs"
t0=$(date +%s.%N)
tools/serve.sh start "$B" "$PORT" "$MODEL" "$BACKEND" || { echo "FAIL: the service did not start"; exit 1; }
echo "service up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s (engine load included)"
RUN="$B/serve-$PORT"
grep -E "cuda|ready|load" "$RUN/logs/engine.log" | head -20

# one request of each kind, through nginx (bash only: the GPU machine may have no curl)
req() { # method path body
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
    printf '%s %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
        "$1" "$2" "${#3}" "$3" >&3
    cat <&3
    exec 3>&-
}
echo "== POST /v1/chat/completions"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}' |
    tail -1 | cut -c1-400
echo
echo "== POST /v1/rerank (scoring rows sent back from the device as logits)"
req POST /v1/rerank '{"query":"What is the capital of France?","documents":["Paris is the capital of France.","Bananas are yellow.","France borders Spain."]}' |
    tail -1 | cut -c1-400
echo
echo "== load through nginx ($BACKEND, $MAX_TOKENS tokens per request, engine: $ENGINE_ARGS)"
# shellcheck disable=SC2086 # LEVELS is a list
fails=0
bench/serve_load/levels.sh "$B/serve_load" "$PORT" "$MAX_TOKENS" "Once upon a time" $LEVELS ||
    { echo "FAIL: load generator"; fails=1; }
# The same load with sampled requests (temperature 0.8, top-p 0.95): on the CUDA backend they are sampled on
# the device (kernels/cuda_sample.cu); SAMPLED_LEVELS="" skips it.
if [ -n "${SAMPLED_LEVELS-1 32 128}" ]; then
    echo "== load through nginx, sampled requests (temperature 0.8, top-p 0.95)"
    # shellcheck disable=SC2086 # a list
    SAMPLING="--temperature 0.8 --top-p 0.95" bench/serve_load/levels.sh "$B/serve_load" "$PORT" "$MAX_TOKENS" \
        "Once upon a time" ${SAMPLED_LEVELS-1 32 128} || { echo "FAIL: load generator (sampled)"; fails=1; }
fi
echo "== /metrics (engine series)"
req GET /metrics "" | grep -E "^llm_(requests_(finished|failed)_total|generation_tokens_total|oom_shrinks_total|preemptions_total) "
echo "== engine log (tail)"
tail -5 "$RUN/logs/engine.log"
alerts=$(grep -E "\[(alert|crit|emerg)\]" "$RUN/logs/error.log" | head -5)
[ -z "$alerts" ] || { echo "$alerts"; echo "FAIL: nginx logged alerts"; fails=1; }
exit $fails
