#!/bin/bash
# GPU decode / prefill figures on the H200 (from the repo root): the llama-3.2-3b preset with random weights
# in each dtype through the CUDA backend (bench/gpu_decode_bench.c: load time, prefill 1x2048 and 8x512,
# time per output token and tokens/s at batch 1, 8, 32, 128, 256 beside the bandwidth floor = weight bytes /
# 4.2 TB/s; the next token chosen on the device, as the server does for greedy requests and the peer
# does), then the two peers in the same run: the PyTorch + cuBLAS + CUDA Graph decoder
# (../shared/peers/torch_cudagraph_decode.py, bf16, batch 1/32/128) and Hugging Face transformers' generate()
# (bench/peer_transformers.py, bf16, batch 1/8; PEER_HF=0 skips it). Figures only, never pass/fail.
# The backend times its product paths per batch size at start (kernel tuning, kernels/cuda_tune.cu): each
# dtype's log shows every path's step time ("cuda: tune N tokens" lines); the choice is kept in
# $WORK/tune-PRESET-DTYPE.txt for the later rows of the same dtype. Rows that set an LLM_CUDA_* path knob by
# hand run without it.
# q4_K / q5_K: the preset written by gen-model in GGUF's Q4_K / Q5_K (every matrix; what most downloaded files
# hold), whose matrices the backend keeps at 5 / 6 bits a weight (CU_Q4_M / CU_Q5_M) where q4_0 takes 4.5 and
# q8_0 8.5; DTYPES may add q3_K and q2_K (gen-model writes them too; kept at 5 and 6 bits as CU_Q3 and CU_Q2_M).
#   bench/gpu_decode.sh            env: DTYPES="bf16 q8_0 q4_0 q4_K q5_K" BATCHES=1,8,32,128,256 BUILD=build-gpu
set -u -o pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/llm_gpu_bench}
RES=${OUT:-$WORK}
DTYPES=${DTYPES:-"bf16 q8_0 q4_0 q4_K q5_K"}
BATCHES=${BATCHES:-1,8,32,128,256}
# A dry run of this script anywhere (e.g. under the CPU emulation of CUDA: LLM_CUDA_LIB=...emu.so PRESET=tiny
# PROMPT=8 STEPS=2 PREFILL=1x16 BATCHES=1,8 PEER=0 PEER_HF=0) takes these; the figures need the defaults.
PRESET=${PRESET:-llama-3.2-3b}
# LAYERS=N: the preset's first N layers only (gen-model --layers), e.g. PRESET=qwen3-30b-a3b LAYERS=24 PEER=0
# PEER_HF=0 (a mixture of experts: the peers are dense Llama models, so they have nothing to run beside it)
LAYERS=${LAYERS:-}
TAG=$PRESET${LAYERS:+-L$LAYERS}
PROMPT=${PROMPT:-128}
STEPS=${STEPS:-32}
PREFILL=${PREFILL:-1x2048,8x512}
mkdir -p "$WORK" "$RES"
. tests/gpu/gpu_env.sh

for dt in $DTYPES; do
    model="$WORK/$TAG-$dt.gguf"
    if [ ! -f "$model" ]; then
        "$B/llm-engine" gen-model --preset "$PRESET" ${LAYERS:+--layers "$LAYERS"} --dtype "$dt" --out "$model" ||
            { echo "error: gen-model $dt"; continue; }
    fi
    echo "== $TAG $dt"
    main_rows() {
        "$B/bench/gpu_decode_bench" --model "$model" --batches "$BATCHES" --argmax 1 --prompt "$PROMPT" \
            --steps "$STEPS" --prefill "$PREFILL" 2>&1 | tee -a "$RES/gpu_decode_$dt.txt"
    }
    : >"$RES/gpu_decode_$dt.txt"
    # The kernel tuning is new on the device: should it fail, the rows still come, with the built-in choice.
    LLM_CUDA_TUNE_FILE="$WORK/tune-$TAG-$dt.txt" main_rows ||
        { echo "== $TAG $dt again without the kernel tuning (LLM_CUDA_TUNE=0)"; LLM_CUDA_TUNE=0 main_rows; }
done

# The peers right after our main rows (same run, same machine state), before the optional experiments.
peer="$SH/peers/torch_cudagraph_decode.py"
if [ "${PEER:-1}" = 0 ]; then
    echo "peer skipped (PEER=0)"
elif [ -f "$peer" ]; then
    echo "== peer: PyTorch + cuBLAS + CUDA Graph, bf16 (context <= 512)"
    PYTHONUNBUFFERED=1 python3 "$peer" 2>&1 | tail -1 | tee "$RES/peer_torch_cudagraph.txt"
else
    echo "peer script not found (../shared/peers or shared/peers): skipped"
fi
# The second peer: Hugging Face transformers' generate() on the same shape (bf16, greedy), batch 1 and 8.
if [ "${PEER_HF:-1}" = 1 ]; then
    echo "== peer: Hugging Face transformers generate(), bf16"
    PYTHONUNBUFFERED=1 OUT="$RES" python3 bench/peer_transformers.py --batches 1,8 2>&1 | grep -v Warning |
        tail -2 | tee "$RES/peer_transformers.txt"
fi

# Decode rows of the preset in dtype $1 under the environment $2 ("VAR=value ..."), batches $3, into file $4.
decode_rows() {
    [ -f "$WORK/$TAG-$1.gguf" ] || return 0
    env $2 "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-$1.gguf" --batches "$3" --argmax 1 --prompt "$PROMPT" \
        --steps "$STEPS" --prefill "" 2>&1 | tee "$RES/$4"
}

# The tensor-core weight-only GEMM (kernels/cuda_tcgemm.cu, LLM_CUDA_TC_GEMM=N) against cuBLAS: by default it
# takes Q8_0/Q4_0 products of up to 64 tokens (cuBLAS would first write a dequantised bf16 copy of every
# matrix) and no BF16 ones. Rows: every dtype with it up to 256 tokens, and the quantised ones without it
# (LLM_CUDA_TC_GEMM=0: dequantise + cuBLAS, as before). TC=0 skips them.
if [ "${TC:-1}" = 1 ]; then
    for dt in $DTYPES; do
        echo "== $TAG $dt, tensor-core weight GEMM (LLM_CUDA_TC_GEMM=256)"
        decode_rows "$dt" LLM_CUDA_TC_GEMM=256 8,32,128,256 "gpu_decode_${dt}_tc_gemm.txt"
    done
    for dt in $DTYPES; do
        [ "$dt" = bf16 ] && continue
        echo "== $TAG $dt, no tensor-core weight GEMM (LLM_CUDA_TC_GEMM=0: dequantise + cuBLAS)"
        decode_rows "$dt" LLM_CUDA_TC_GEMM=0 8,32,128 "gpu_decode_${dt}_no_tc_gemm.txt"
    done
fi

# Programmatic dependent launch (LLM_CUDA_PDL=1: each kernel's launch overlaps the previous one's tail), alone
# and with the tensor-core weight GEMM; off by default until these rows say. PDL=0 skips them.
if [ "${PDL:-1}" = 1 ]; then
    for dt in $DTYPES; do
        echo "== $TAG $dt, programmatic dependent launch (LLM_CUDA_PDL=1), then with LLM_CUDA_TC_GEMM=256"
        decode_rows "$dt" LLM_CUDA_PDL=1 1,32 "gpu_decode_${dt}_pdl.txt"
        decode_rows "$dt" "LLM_CUDA_PDL=1 LLM_CUDA_TC_GEMM=256" 32,128 "gpu_decode_${dt}_pdl_tc.txt" | grep "^decode"
    done
fi

# The decode GEMVs unfused (LLM_CUDA_FUSE=0: RMSNorm, RoPE + KV write and SwiGLU as kernels of their own), to
# show what folding them into the QKV and gate|up GEMVs buys; FUSE=0 skips this.
if [ "${FUSE:-1}" = 1 ]; then
    for dt in $DTYPES; do
        echo "== $TAG $dt, decode GEMVs unfused (LLM_CUDA_FUSE=0)"
        decode_rows "$dt" LLM_CUDA_FUSE=0 1,4 "gpu_decode_${dt}_unfused.txt"
    done
fi

# Decode with every row's logits copied to the host (the engine's plain forward, as `generate` and
# requests that need the whole row use it); the main rows above keep the argmax on the device, as the
# server runs greedy requests and as the peer does.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${LOGITS:-1}" = 1 ]; then
    echo "== $TAG bf16, every row's logits copied to the host (--argmax 0)"
    LLM_CUDA_TUNE_FILE="$WORK/tune-$TAG-bf16.txt" "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches 1,32,128,256 --argmax 0 \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "" 2>&1 | tee "$RES/gpu_decode_bf16_logits.txt"
fi

# Q8_0 / Q4_0 / Q4_K (CU_Q4_M) / Q5_K (CU_Q5_M) / Q3_K (CU_Q3) / Q2_K (CU_Q2_M) GEMVs on int8 activations
# (dp4a) instead of float ones, for the dtypes this run wrote: off by default until this row says.
if [ "${DP4A:-1}" = 1 ]; then
    for dt in q8_0 q4_0 q4_K q5_K q3_K q2_K; do
        [ -f "$WORK/$TAG-$dt.gguf" ] || continue
        echo "== $TAG $dt, int8-activation GEMV (LLM_CUDA_GEMV_DP4A=1)"
        decode_rows "$dt" LLM_CUDA_GEMV_DP4A=1 1,2,4,8 "gpu_decode_${dt}_dp4a.txt"
    done
fi

# A q8_0 KV cache (LLM_CUDA_KV=q8_0: int8 + a float scale per 32, 1.125 bytes an element against f16's 2) on the
# bf16 weights: decode and prefill 1x2048 beside the f16 rows above (the KV reads shrink; the fused
# QKV+RoPE decode GEMV steps aside for the quantising rope_kv_q8_kernel). KVQ8=0 skips it.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${KVQ8:-1}" = 1 ]; then
    echo "== $TAG bf16, q8_0 KV cache (LLM_CUDA_KV=q8_0)"
    LLM_CUDA_KV=q8_0 LLM_CUDA_TUNE_FILE="$WORK/tune-$TAG-bf16-kvq8.txt" "$B/bench/gpu_decode_bench" \
        --model "$WORK/$TAG-bf16.gguf" --batches 1,32,128,256 --argmax 1 --prompt "$PROMPT" --steps "$STEPS" \
        --prefill "${PREFILL%%,*}" 2>&1 | tee "$RES/gpu_decode_bf16_kv_q8.txt"
fi

# The same decode steps launched kernel by kernel, to show what the CUDA Graphs buy.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${GRAPHS_OFF:-1}" = 1 ]; then
    echo "== $TAG bf16, CUDA Graphs off (LLM_CUDA_GRAPHS=0)"
    LLM_CUDA_GRAPHS=0 "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches 1,32 --argmax 1 \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "" 2>&1 | tee "$RES/gpu_decode_bf16_nographs.txt"
fi

# One-token GEMV shapes in the model (LLM_CUDA_GEMV_SHAPE=RxU: R rows per warp, U loads in flight; the
# default kernel is about 1x4), batch 1 bf16 through graphs with on-device argmax; SHAPES="" skips it.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ -n "${SHAPES-1x8 1x12 2x4 4x2}" ]; then
    echo "== $TAG bf16, batch 1, GEMV shapes (LLM_CUDA_GEMV_SHAPE)"
    for shp in ${SHAPES-1x8 1x12 2x4 4x2}; do
        echo "-- $shp"
        LLM_CUDA_GEMV_SHAPE=$shp "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches 1 \
            --argmax 1 --prompt "$PROMPT" --steps $((2 * STEPS)) --prefill "" 2>&1 | grep "^decode"
    done | tee "$RES/gpu_decode_bf16_gemv_shapes.txt"
    if [ -f "$WORK/$TAG-q4_0.gguf" ]; then
        echo "== $TAG q4_0, batch 1, int8-activation GEMV shapes (LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_GEMV_SHAPE)"
        for shp in ${SHAPES-1x8 1x12 2x4 4x2}; do
            echo "-- $shp"
            LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_GEMV_SHAPE=$shp "$B/bench/gpu_decode_bench" \
                --model "$WORK/$TAG-q4_0.gguf" --batches 1 --argmax 1 --prompt "$PROMPT" --steps $((2 * STEPS)) --prefill "" 2>&1 |
                grep "^decode"
        done | tee "$RES/gpu_decode_q4_0_dp4a_shapes.txt"
    fi
fi

# Decode with every row sampled on the device (temperature 0.8, top-p 0.95, 5 logprobs: kernels/cuda_sample.cu),
# as the server runs sampled requests since the device sampler exists; compare with the argmax rows above.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${SAMPLE:-1}" = 1 ]; then
    echo "== $TAG bf16, sampled on the device (--sample 1)"
    LLM_CUDA_TUNE_FILE="$WORK/tune-$TAG-bf16.txt" "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches 1,32,128,256 --sample 1 \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "" 2>&1 | tee "$RES/gpu_decode_bf16_sample.txt"
fi

# Decode attention through the tiled (prefill-shaped) kernel instead of the register kernel: what it buys.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${ATT_TILED:-1}" = 1 ]; then
    echo "== $TAG bf16, decode attention through the tiled kernel (LLM_CUDA_ATT_DECODE=0)"
    LLM_CUDA_ATT_DECODE=0 LLM_CUDA_TUNE_FILE="$WORK/tune-$TAG-bf16.txt" "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches 32,256 \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "" 2>&1 | tee "$RES/gpu_decode_bf16_tiled_attention.txt"
fi

# Prefill attention through the mma.sync kernel (S and P in registers, LLM_CUDA_ATT_TC=2) instead of the wmma one.
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${ATT_MMA:-1}" = 1 ]; then
    echo "== $TAG bf16, prefill with the mma.sync attention (LLM_CUDA_ATT_TC=2)"
    LLM_CUDA_ATT_TC=2 "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches "" \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "$PREFILL" 2>&1 | tee "$RES/gpu_decode_bf16_mma_prefill_attention.txt"
fi

# Prefill attention through the scalar tiled kernel instead of the tensor-core one (attention_tc_kernel).
if [ -f "$WORK/$TAG-bf16.gguf" ] && [ "${ATT_SCALAR:-1}" = 1 ]; then
    echo "== $TAG bf16, prefill 1x2048 with the scalar attention (LLM_CUDA_ATT_TC=0)"
    LLM_CUDA_ATT_TC=0 "$B/bench/gpu_decode_bench" --model "$WORK/$TAG-bf16.gguf" --batches "" \
        --prompt "$PROMPT" --steps "$STEPS" --prefill "${PREFILL%%,*}" 2>&1 | tee "$RES/gpu_decode_bf16_scalar_prefill_attention.txt"
fi
