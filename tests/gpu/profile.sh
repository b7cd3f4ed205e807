#!/bin/bash
# Where a step's time goes on the GPU (from the repo root, on the GPU machine):
#   tests/gpu/profile.sh            env: DTYPES="bf16 q4_0" BUILD=build-gpu
# For each dtype of the llama-3.2-3b preset: stage times (LLM_CUDA_EVENTS=1 LLM_CUDA_STATS=1: CUDA events, no
# syncs; STAGE_MODE=sync for the synchronised ones; graphs off) at batch 1, 8, 32 and 256, with the device
# sampler, and for a 1x2048 prefill (tensor-core and scalar attention); then, graphs on, the GEMV-vs-cuBLAS switch
# point (LLM_CUDA_GEMV_MAX / LLM_CUDA_GEMV_MAX_Q) at small batches; and an nsys kernel summary where nsys
# exists. Figures only. Output: $OUT/profile_<dtype>.txt.
set -u -o pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/llm_gpu_bench}
RES=${OUT:-$WORK}
DTYPES=${DTYPES:-"bf16 q4_0"}
STAGES=${STAGES:-"$DTYPES"} # the dtypes whose synchronised stage times are wanted
mkdir -p "$WORK" "$RES"
. tests/gpu/gpu_env.sh
bench() { "$B/bench/gpu_decode_bench" --model "$model" --prompt 128 --steps 16 "$@" 2>&1 | grep -v "^cuda: \(NVIDIA\|uploaded\|KV pool\)"; }

for dt in $DTYPES; do
    model="$WORK/llama-3.2-3b-$dt.gguf"
    [ -f "$model" ] || "$B/llm-engine" gen-model --preset llama-3.2-3b --dtype "$dt" --out "$model" >/dev/null ||
        { echo "error: gen-model $dt"; continue; }
    {
      if echo " $STAGES " | grep -q " $dt "; then
        # STAGE_MODE=events (default): CUDA events after each stage, kernels queued back to back;
        # STAGE_MODE=sync: a stream synchronisation after each stage (adds ~10 us a stage, as before).
        if [ "${STAGE_MODE:-events}" = sync ]; then tm="LLM_CUDA_SYNC=1"; else tm="LLM_CUDA_EVENTS=1"; fi
        echo "== $dt: stage times ($tm, graphs off; decode and prefill/mixed steps on separate lines)"
        for b in 1 8 32 256; do
            echo "-- batch $b"
            env $tm LLM_CUDA_STATS=1 bench --batches "$b" --prefill ""
        done
        echo "-- batch 256, the tiled attention kernel for decode too (LLM_CUDA_ATT_DECODE=0)"
        env LLM_CUDA_ATT_DECODE=0 $tm LLM_CUDA_STATS=1 bench --batches 256 --prefill ""
        echo "-- batch 32, every row sampled on the device (temperature 0.8, top-p 0.95, 5 logprobs)"
        env $tm LLM_CUDA_STATS=1 bench --batches 32 --prefill "" --sample 1
        echo "-- prefill 1x2048"
        env $tm LLM_CUDA_STATS=1 bench --batches "" --prefill 1x2048
        echo "-- prefill 1x2048, the scalar attention kernel instead of the tensor-core one (LLM_CUDA_ATT_TC=0)"
        env LLM_CUDA_ATT_TC=0 $tm LLM_CUDA_STATS=1 bench --batches "" --prefill 1x2048
      fi
        echo "== $dt: GEMV up to N tokens, cuBLAS above (graphs on)"
        var=LLM_CUDA_GEMV_MAX
        [ "$dt" = q4_0 ] || [ "$dt" = q8_0 ] && var=LLM_CUDA_GEMV_MAX_Q
        for g in 0 1 2 4 8 16 32; do
            echo "-- $var=$g"
            (export "$var=$g"; bench --batches 1,2,4,8,16,32 --prefill "" | grep "^decode")
        done
        NSYS=$(command -v nsys || ls /usr/local/cuda*/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
        if [ -n "$NSYS" ]; then
            echo "== $dt: nsys kernel summary (batches 1, 32; prefill 1x2048)"
            "$NSYS" profile -o "$WORK/nsys_$dt" --force-overwrite true --stats=false \
                "$B/bench/gpu_decode_bench" --model "$model" --batches 1,32 --prefill 1x2048 --steps 16 >/dev/null 2>&1 &&
                "$NSYS" stats --report cuda_gpu_kern_sum --format table "$WORK/nsys_$dt.nsys-rep" 2>/dev/null | head -40
        else
            echo "(nsys not installed: no kernel summary)"
        fi
    } 2>&1 | tee "$RES/profile_$dt.txt"
done
