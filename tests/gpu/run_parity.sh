#!/bin/bash
# CUDA backend parity, one command on the GPU machine (from the repo root):
#   tests/gpu/run_parity.sh [--skip-hf | --only-tune]
# Uses BUILD (default build-gpu) as prepared by tests/gpu/prebuild.sh on the development machine and carried
# along; builds what is missing here (libllm_cuda.so needs nvcc; the programs need libcjson/libpcre2 headers).
#  1. stories260K (../shared/models or shared/models): CUDA vs CPU logits over 512 positions, greedy ids
#     identical for 200 tokens, a mixed multi-sequence batch; F32 (f32 KV cache) and F16 (f16 KV cache).
#  2. a random Llama-3.2-3B-shaped BF16 model made with PyTorch, saved as a Hugging Face directory, vs
#     transformers' logits over 256 positions (tests/gpu/hf_parity.py).
#  3. decode steps through CUDA Graphs and the on-device argmax (parity part 4), replays checked; the
#     scheduler over both backends (tests/gpu/sched_parity.c), greedy requests identical; the device sampler
#     against engine/sampler.c (tests/gpu/sample_check.cc); the tensor-core weight GEMM against a host
#     reference (tests/gpu/tcgemm_check.cc) and inside a q8_0 / q4_0 model (LLM_CUDA_TC_GEMM=64); Qwen 2 and
#     Qwen 3 layers (biases, q/k norms) against the CPU; Gemma 3 and Gemma 2 (tiny presets: GeGLU, norms after
#     attention and FFN, sliding window, soft caps, the window layers' KV in a pool of their own) against the
#     CPU; embeddings (tests/gpu/embed_check.sh) against the CPU, BERT encoders' too (tiny-bert, bge-small in
#     F16 and Q8_0, nomic-embed, bge-m3, EmbeddingGemma and jina-v2-base in F16);
#     mixtures of experts (tiny-qwen3moe F32, tiny-qwen2moe Q8_0) against the CPU; GGUF
#     Q4_K files (llama.cpp's quantiser, made by prebuild.sh) as CU_Q4_M against the CPU.
#  +  compute-sanitizer memcheck and racecheck over short stories260K runs (SANITIZE=0 skips them).
# Logs and results go to $OUT (or /tmp/llm_gpu_parity). Exit 0 when every part passes.
set -u -o pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-gpu}
RES=${OUT:-/tmp/llm_gpu_parity}
WORK=${WORK:-/tmp/llm_gpu_parity_work}
mkdir -p "$RES" "$WORK"
. tests/gpu/gpu_env.sh

fails=0
run() { # name, command...
    local name=$1; shift
    echo "== $name"
    if "$@" 2>&1 | tee "$RES/$name.log"; then echo "-- $name: ok"; else echo "-- $name: FAILED"; fails=$((fails + 1)); fi
}

S260="$SH/models/stories260K/stories260K.bin"
"$B/llm-engine" gen-model --from "$S260" --dtype f16 --out "$WORK/stories260K-f16.gguf" >/dev/null 2>&1 ||
    echo "warning: could not write the F16 model"
# Kernel tuning (kernels/cuda_tune.cu) runs every product path at every batch size at start: here on
# stories260K in q8_0 (its down matrices stay f16, so both weight classes' paths), then parity with the mix it
# chose, twice: the second start must read the file the first one wrote. --only-tune runs just this (the
# session's first check: a path that faulted on this GPU would stop every later start).
"$B/llm-engine" gen-model --from "$S260" --dtype q8_0 --out "$WORK/stories260K-q8_0.gguf" >/dev/null 2>&1 ||
    echo "warning: could not write the Q8_0 model"
run kernel_tune bash -c "rm -f '$WORK/tune.txt'; for i in 1 2; do LLM_CUDA_TUNE=1 LLM_CUDA_TUNE_FILE='$WORK/tune.txt' \
    '$B/tests/gpu/parity_logits' --model '$WORK/stories260K-q8_0.gguf' --positions 64 --gen 16 --chunk 8 \
    --max-diff 0.6 --min-top1 0.95 || exit 1; done 2>&1 | tee /dev/stderr | grep -q 'kernel tuning read from'"
# The prefill attention part of the tuning (wmma or mma.sync) on a head_dim-128 model with an f16 KV cache.
if python3 tests/gpu/emu_hf_model.py "$WORK/hf128" 128 >/dev/null; then
    run kernel_tune_prefill bash -c "out=\$(LLM_CUDA_TUNE=1 LLM_CUDA_TUNE_MAX=1 LLM_CUDA_TUNE_PREFILL=256 \
        '$B/tests/gpu/parity_logits' --model '$WORK/hf128' --positions 128 --gen 8 --chunk 64 --max-diff 1e-1 \
        --min-top1 0.98 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 0 ] &&
        echo \"\$out\" | grep -q 'tune prefill attention, 256 tokens'"
fi
if [ "${1:-}" = --only-tune ]; then
    echo "parity: $fails part(s) failed"
    [ "$fails" -eq 0 ]
    exit
fi
run stories_f32 env LLM_CUDA_KV=f32 "$B/tests/gpu/parity_logits" --model "$S260" --max-diff 2e-3 --min-top1 0.995
run stories_f16 "$B/tests/gpu/parity_logits" --model "$WORK/stories260K-f16.gguf" --max-diff 5e-2 --min-top1 0.98
# The q8_0 KV cache (both backends quantise the same way; an element near a rounding edge may round the other
# way where the two sides' k / v differ in the last bits, so a looser bound than f32's), and through graphs.
run stories_kv_q8 env LLM_CUDA_KV=q8_0 "$B/tests/gpu/parity_logits" --model "$S260" --graph-cycles 2 \
    --max-diff 2e-2 --min-top1 0.99
# Q4_0 with the int8-activation GEMV (LLM_CUDA_GEMV_DP4A=1): one token a step, as the CPU computes it.
"$B/llm-engine" gen-model --from "$S260" --dtype q4_0 --out "$WORK/stories260K-q4_0.gguf" >/dev/null 2>&1 ||
    echo "warning: could not write the Q4_0 model"
run stories_q4_dp4a env LLM_CUDA_KV=f32 LLM_CUDA_GEMV_DP4A=1 "$B/tests/gpu/parity_logits" \
    --model "$WORK/stories260K-q4_0.gguf" --positions 64 --gen 16 --chunk 1 --mixed 0 --max-diff 1e-3 --min-top1 1
# Decode through CUDA Graphs (buckets 1-32, split classes crossing 64/128/256 positions, real cuBLAS captured
# at 16 and 32) plus the on-device argmax: parity part 4; the counters must show replays and no fallback.
run stories_graphs bash -c "out=\$(LLM_CUDA_KV=f32 LLM_CUDA_STATS=1 '$B/tests/gpu/parity_logits' --model '$S260' \
    --gen 4 --only-graph 1 --graph-cycles 10 --max-diff 2e-3 --min-top1 0.995 2>&1); rc=\$?; echo \"\$out\";
    [ \$rc -eq 0 ] && echo \"\$out\" | grep -q '^cuda: graphs on: .*(bucket:replays 1:[0-9]* 4:[0-9]* 8:[0-9]* 16:[0-9]* 32:'"
# The scheduler end to end: CPU vs CUDA backend, mixed then decode-only steps (graphs + on-device argmax +
# rows sampled on the device); greedy requests identical, seeded sampled ones in at least 6 of 8.
run stories_scheduler env LLM_CUDA_KV=f32 LLM_CUDA_STATS=1 "$B/tests/gpu/sched_parity" --model "$S260" --gen 48 \
    --max-lp-diff 2e-3 --min-sampled 6
# The device sampler against engine/sampler.c on synthetic rows (vocabularies 512 and 128,256): the GPU's
# expf may differ from glibc's in the last bit, so 99% of ids and logprobs within 1e-4.
[ -x "$B/tests/gpu/sample_check" ] && run sampler "$B/tests/gpu/sample_check" --min-same 0.99 --max-lp 1e-4
# The products of 2-130 tokens against an exact host reference: the tensor-core weight-only GEMM
# (LLM_CUDA_TC_GEMM; BF16/F16/Q8_0/Q4_0, K split over 1-16 blocks) and the cuBLAS path with its dequantisation.
[ -x "$B/tests/gpu/tcgemm_check" ] && run tcgemm "$B/tests/gpu/tcgemm_check"
# The same GEMM inside the model, steps of 20 tokens and decode through graphs (buckets 4-32 capture it):
# the emulation's head_dim-128 model (widths 192/320/768, multiples of 64) in q8_0 and q4_0 against the CPU.
if python3 tests/gpu/emu_hf_model.py "$WORK/hf128" 128 >/dev/null; then
    for dt in q8_0 q4_0; do
        "$B/llm-engine" gen-model --from "$WORK/hf128" --dtype $dt --out "$WORK/hf128-$dt.gguf" >/dev/null 2>&1
    done
    run tc_gemm_q8 env LLM_CUDA_TC_GEMM=64 "$B/tests/gpu/parity_logits" --model "$WORK/hf128-q8_0.gguf" \
        --positions 128 --gen 16 --chunk 20 --max-diff 0.5 --min-top1 0.95
    run tc_gemm_q4_graphs env LLM_CUDA_TC_GEMM=64 "$B/tests/gpu/parity_logits" --model "$WORK/hf128-q4_0.gguf" \
        --positions 128 --gen 16 --chunk 20 --graph-cycles 3 --max-diff 0.6 --min-top1 0.95
    # The mma.sync prefill attention (LLM_CUDA_ATT_TC=2) on an all-f32 copy, f16 KV: its half rounding of
    # Q, K, V and P is the only difference from the CPU (as the wmma kernel's, ~3e-3 under the emulation).
    "$B/llm-engine" gen-model --from "$WORK/hf128" --dtype f32 --out "$WORK/hf128-f32.gguf" >/dev/null 2>&1
    run att_mma env LLM_CUDA_ATT_TC=2 LLM_CUDA_GEMV_MAX=64 "$B/tests/gpu/parity_logits" \
        --model "$WORK/hf128-f32.gguf" --positions 256 --gen 8 --chunk 128 --max-diff 1e-2 --min-top1 0.98
    # GPTQ (Q4_0 at load) and AWQ (Q8_0) directories of it (tests/parity/make_intq.py) on the default kernels
    # (int8 GEMVs, tensor-core GEMMs, graphs) against the CPU on their F32 twins (under the emulation with
    # float GEMVs: 3.8e-6; here the activations' 8-bit rounding, as the q8_0 / q4_0 files above)
    for f in gptq awq; do
        python3 tests/parity/make_intq.py $f "$WORK/hf128" "$WORK/hf128-$f" "$WORK/hf128-$f-ref" >/dev/null &&
            "$B/llm-engine" gen-model --from "$WORK/hf128-$f-ref" --dtype f32 --out "$WORK/hf128-$f-ref.gguf" \
                >/dev/null 2>&1
        run hf_$f "$B/tests/gpu/parity_logits" --model "$WORK/hf128-$f" --cpu-model "$WORK/hf128-$f-ref.gguf" \
            --positions 128 --gen 16 --chunk 20 --graph-cycles 3 --max-diff 0.6 --min-top1 0.95
    done
    # through generate (conversions deferred): AWQ's asymmetric 4-bit as Q4_1 blocks on the device
    run hf_awq_q4_1 bash -c "g=\$('$B/llm-engine' generate --backend cuda --model '$WORK/hf128-awq' \
        --prompt-ids 1,403,407 --max-tokens 12 --output-ids --ignore-eos 2>'$WORK/awq.err'); cat '$WORK/awq.err'
        c=\$('$B/llm-engine' generate --model '$WORK/hf128-awq' --prompt-ids 1,403,407 --max-tokens 12 \
            --output-ids --ignore-eos 2>/dev/null); echo \"cuda: \$g\"; echo \"cpu:  \$c\"
        grep -q '^cuda: 14 q4_1 matrices from their own blocks' '$WORK/awq.err' && [ \"\$g\" = \"\$c\" ]"
fi
# Qwen 2 (q/k/v biases) and Qwen 3 (per-head q/k norms): qkv_prep_kernel before the rope, F32 against the CPU,
# prefill and decode (the fused norm+QKV+rope GEMV steps aside for them), and decode through graphs.
for arch in qwen2 qwen3; do
    python3 tests/gpu/emu_hf_model.py "$WORK/hf-$arch" 32 $arch >/dev/null &&
        "$B/llm-engine" gen-model --from "$WORK/hf-$arch" --dtype f32 --out "$WORK/$arch-f32.gguf" >/dev/null 2>&1 &&
        run "${arch}_f32" env LLM_CUDA_KV=f32 "$B/tests/gpu/parity_logits" --model "$WORK/$arch-f32.gguf" \
            --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 5e-2 --min-top1 0.98
done
# YaRN rope scaling: the rope tables with its frequencies and attention factor.
[ -f "$WORK/qwen2-f32.gguf" ] && "$B/llm-engine" gen-model --from "$WORK/qwen2-f32.gguf" --dtype f32 --rope-scaling yarn \
    --rope-factor 4 --rope-orig-ctx 32 --out "$WORK/qwen2-yarn.gguf" >/dev/null 2>&1 &&
    run qwen2_yarn env LLM_CUDA_KV=f32 "$B/tests/gpu/parity_logits" --model "$WORK/qwen2-yarn.gguf" \
        --positions 128 --gen 16 --chunk 32 --max-diff 5e-2 --min-top1 0.98
# Gemma 3 and Gemma 2 (gen-model presets, window 16 on some layers, Gemma 3's second rope base, Gemma 2's soft
# caps): prefill, decode and graphs over 128 positions against the CPU (under the emulation: make test-emu); bf16
# through the mma.sync prefill kernel (f16 KV, 16-bit GeGLU activations). Then the window layers' KV in a window
# pool of 16 blocks (parity part 5: 3 sequences far past the window, stale window blocks reused by another
# sequence) against the CPU with the same tables, and identical to the CUDA backend without the pool.
for arch in gemma3 gemma2; do
    "$B/llm-engine" gen-model --preset tiny-$arch --dtype f32 --out "$WORK/$arch-f32.gguf" >/dev/null 2>&1 &&
        run "${arch}_f32" env LLM_CUDA_KV=f32 "$B/tests/gpu/parity_logits" --model "$WORK/$arch-f32.gguf" \
            --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --window-pool 16 --max-diff 5e-2 --min-top1 0.98
done
"$B/llm-engine" gen-model --preset tiny-gemma2 --dtype bf16 --out "$WORK/gemma2-bf16.gguf" >/dev/null 2>&1 &&
    run gemma2_bf16_mma env LLM_CUDA_ATT_TC=2 "$B/tests/gpu/parity_logits" --model "$WORK/gemma2-bf16.gguf" \
        --positions 128 --gen 16 --chunk 64 --max-diff 0.3 --min-top1 0.98
# head_dim 256 (Gemma 2 / 3's) through the register decode kernel, f16 KV, graphs
python3 tests/gpu/emu_hf_model.py "$WORK/hf256" 256 >/dev/null &&
    run hd256 env "$B/tests/gpu/parity_logits" --model "$WORK/hf256" --positions 128 --gen 16 --chunk 32 \
        --graph-cycles 3 --max-diff 1e-1 --min-top1 0.98
# Mixtures of experts (kernels/cuda_moe.cu: routing and experts on the device): tiny-qwen3moe F32 with the
# scalar attention kernels against the CPU (prefill, mixed batch, graphs); tiny-qwen2moe (a shared expert) Q8_0
# against the CPU on its dequantised copy, every product on the GEMV (under the emulation: 1.5e-5 to 1.6e-4).
"$B/llm-engine" gen-model --preset tiny-qwen3moe --dtype f32 --out "$WORK/qwen3moe-f32.gguf" >/dev/null 2>&1 &&
    run moe_f32 env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$B/tests/gpu/parity_logits" \
        --model "$WORK/qwen3moe-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 1e-3 \
        --min-top1 1
"$B/llm-engine" gen-model --preset tiny-qwen2moe --dtype q8_0 --out "$WORK/qwen2moe-q8_0.gguf" >/dev/null 2>&1 &&
    "$B/llm-engine" gen-model --from "$WORK/qwen2moe-q8_0.gguf" --dtype f32 --out "$WORK/qwen2moe-deq.gguf" \
        >/dev/null 2>&1 &&
    run moe_q8 env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
        LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 "$B/tests/gpu/parity_logits" --model "$WORK/qwen2moe-q8_0.gguf" \
        --cpu-model "$WORK/qwen2moe-deq.gguf" --positions 128 --gen 16 --chunk 32 --max-diff 1e-3 --min-top1 1
# OLMo 3 (no norm before the blocks, q / k normed over whole rows, windows on three layers of four) F32 with
# the scalar attention kernels, then bf16 through the tensor cores (under the emulation: 1.3e-5, 0.071)
"$B/llm-engine" gen-model --preset tiny-olmo3 --dtype f32 --out "$WORK/olmo3-f32.gguf" >/dev/null 2>&1 &&
    run olmo3_f32 env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$B/tests/gpu/parity_logits" \
        --model "$WORK/olmo3-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 1e-3 \
        --min-top1 1
"$B/llm-engine" gen-model --preset tiny-olmo3 --dtype bf16 --out "$WORK/olmo3-bf16.gguf" >/dev/null 2>&1 &&
    run olmo3_bf16 env "$B/tests/gpu/parity_logits" --model "$WORK/olmo3-bf16.gguf" --positions 128 --gen 16 \
        --chunk 32 --max-diff 0.3 --min-top1 0.95
# Granite MoE with GraniteMoeShared's ungated shared expert and Granite's residual scale on the experts' sum
# (under the emulation: 3.7e-5)
"$B/llm-engine" gen-model --preset tiny-granitemoe-shared --dtype f32 --out "$WORK/granitemoe-f32.gguf" \
    >/dev/null 2>&1 &&
    run granitemoe_f32 env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$B/tests/gpu/parity_logits" \
        --model "$WORK/granitemoe-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 1e-3 \
        --min-top1 1
# GGUF Q4_K / Q6_K matrices from their own blocks (CU_Q4_M / CU_Q6), files made by llama.cpp's quantiser on
# the development machine (tests/gpu/prebuild.sh: shared/models/q4k): the float GEMVs and graphs against the
# CPU on the file's exact values (under the emulation Q4_K 0.021 / 0.020, Q6_K 0.0066 / 0.0052; the Q8_0
# copies 0.25 / 0.16), every path at the tuning's choice, and the int8 GEMVs against the CPU's packed Q4_K
# where this CPU packs it.
Q4K=$B/shared/models/q4k
if [ -f "$Q4K/k256-q4k.gguf" ] && [ -f "$Q4K/k256-q6k.gguf" ] &&
    "$B/llm-engine" gen-model --from "$Q4K/k256-q4k.gguf" --dtype f32 --out "$WORK/k256-q4k-f32.gguf" >/dev/null 2>&1 &&
    "$B/llm-engine" gen-model --from "$Q4K/k256-q6k.gguf" --dtype f32 --out "$WORK/k256-q6k-f32.gguf" >/dev/null 2>&1; then
    run q4k_gemv env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
        LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 "$B/tests/gpu/parity_logits" --model "$Q4K/k256-q4k.gguf" \
        --cpu-model "$WORK/k256-q4k-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 0.06 \
        --min-top1 1
    run q6k_gemv env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
        LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 "$B/tests/gpu/parity_logits" --model "$Q4K/k256-q6k.gguf" \
        --cpu-model "$WORK/k256-q6k-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 0.03 \
        --min-top1 1
    run q4k_default env "$B/tests/gpu/parity_logits" --model "$Q4K/k256-q4k.gguf" \
        --cpu-model "$WORK/k256-q4k-f32.gguf" --positions 128 --gen 16 --chunk 32 --max-diff 0.15 --min-top1 0.98
    prep=$("$B/llm-engine" generate --model "$Q4K/wide-q4k.gguf" --prompt-ids 1 --max-tokens 1 2>&1)
    if [[ $prep == *'of them q4_K'* ]]; then
        run q4k_dp4a env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
            LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_KQ=q4_K "$B/tests/gpu/parity_logits" \
            --model "$Q4K/wide-q4k.gguf" --cpu-model "$Q4K/wide-q4k.gguf" --positions 16 --gen 4 --chunk 1 \
            --mixed 0 --max-diff 1e-3 --min-top1 1
    fi
fi
# Q5_K (CU_Q5_M) on llama.cpp's q5_K_M-layers file of the widened stories260K: the float GEMVs and graphs
# against the CPU on the file's exact values (emulation 0.064 / 0.053; the Q8_0 copy 0.30), every path at the
# tuning's choice (emulation 0.13), the int8 GEMVs against the CPU's packed Q5_K (emulation 5.7e-6).
if [ -f "$Q4K/wide-q5k.gguf" ] &&
    "$B/llm-engine" gen-model --from "$Q4K/wide-q5k.gguf" --dtype f32 --out "$WORK/wide-q5k-f32.gguf" >/dev/null 2>&1; then
    run q5k_gemv env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
        LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 "$B/tests/gpu/parity_logits" --model "$Q4K/wide-q5k.gguf" \
        --cpu-model "$WORK/wide-q5k-f32.gguf" --positions 128 --gen 16 --chunk 32 --graph-cycles 3 --max-diff 0.15 \
        --min-top1 1
    run q5k_default env "$B/tests/gpu/parity_logits" --model "$Q4K/wide-q5k.gguf" \
        --cpu-model "$WORK/wide-q5k-f32.gguf" --positions 128 --gen 16 --chunk 32 --max-diff 0.3 --min-top1 0.98
    prep=$("$B/llm-engine" generate --model "$Q4K/wide-q5k.gguf" --prompt-ids 1 --max-tokens 1 2>&1)
    if [[ $prep == *'packed for the cpu'* && $prep != *' 0 q5_K at 6'* ]]; then
        run q5k_dp4a env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 \
            LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_KQ=q5_K "$B/tests/gpu/parity_logits" \
            --model "$Q4K/wide-q5k.gguf" --cpu-model "$Q4K/wide-q5k.gguf" --positions 16 --gen 4 --chunk 1 \
            --mixed 0 --max-diff 1e-3 --min-top1 1
    fi
fi
# The end-to-end CLI on the CUDA backend: the README's known-good greedy text.
run stories_generate bash -c "'$B/llm-engine' generate --model '$S260' --prompt 'Once upon a time' --max-tokens 40 \
    --backend cuda | tee /dev/stderr | grep -q 'there was a little girl named Lily'"

# N-gram speculation: several rows of one sequence in a step, argmaxed on the device (greedy) or drawn in turn on
# the host (sampled); greedy as on the CPU.
run stories_spec env LLM_CUDA_KV=f32 "$B/tests/gpu/sched_parity" --model "$S260" --gen 64 --max-lp-diff 1e-4 --spec 4
# Embeddings (the final norm's output rows copied from the device, pooled by the scheduler) against the CPU's.
run stories_embeddings env LLM_CUDA_KV=f32 tests/gpu/embed_check.sh "$B/llm-engine" "$SH/models/stories260K/stories260K.gguf" 1e-3
# BERT encoders (kernels/cuda_encoder.cu: whole-input attention, post-norm blocks, token types) against the CPU:
# tiny-bert F32 with a pair as ids, bge-small (12 layers) in F16 and Q8_0 over inputs of up to 121 tokens (the
# 16-bit activations of cuBLAS against the CPU's F16 / int8 products over 12 layers: cosine >= 0.999 there).
if "$B/llm-engine" gen-model --preset tiny-bert --dtype f32 --out "$WORK/tiny-bert.gguf" >/dev/null 2>&1; then
    run bert_f32 env LLM_CUDA_KV=f32 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" "$WORK/tiny-bert.gguf" 1e-3 \
        "mean cls" 2,59,117,98,13,3,11,27,39,166,75,7,105,3
fi
for d in f16 q8_0; do
    "$B/llm-engine" gen-model --preset bge-small --dtype $d --out "$WORK/bge-small-$d.gguf" >/dev/null 2>&1 &&
        run bge_small_$d env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
            "$WORK/bge-small-$d.gguf" 2e-2 cls
done
# nomic-embed-text-v1.5's shape (nomic-bert: rope, SwiGLU; 12 layers of 768) in F16
"$B/llm-engine" gen-model --preset nomic-embed --dtype f16 --out "$WORK/nomic-embed-f16.gguf" >/dev/null 2>&1 &&
    run nomic_embed_f16 env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
        "$WORK/nomic-embed-f16.gguf" 2e-2 mean
# bge-m3's shape (XLM-RoBERTa large: 24 layers of 1024, a 250,002-piece Unigram vocabulary) in F16
"$B/llm-engine" gen-model --preset bge-m3 --dtype f16 --out "$WORK/bge-m3-f16.gguf" >/dev/null 2>&1 &&
    run bge_m3_f16 env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
        "$WORK/bge-m3-f16.gguf" 2e-2 cls
# EmbeddingGemma-300m's shape (bidirectional Gemma 3: the symmetric window of 512 on the decoder path; 24 layers
# of 768, head dim 256) in F16, mean pooling
"$B/llm-engine" gen-model --preset embeddinggemma-300m --dtype f16 --out "$WORK/eg300-f16.gguf" >/dev/null 2>&1 &&
    run embeddinggemma_f16 env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
        "$WORK/eg300-f16.gguf" 2e-2 mean
# jina-embeddings-v2-base's shape (ALiBi with twelve heads, a GELU-gated FFN; 12 layers of 768) in F16
"$B/llm-engine" gen-model --preset jina-v2-base --dtype f16 --out "$WORK/jina-base-f16.gguf" >/dev/null 2>&1 &&
    run jina_base_f16 env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
        "$WORK/jina-base-f16.gguf" 2e-2 mean
# ModernBERT-base's shape (LayerNorms on the decoder path, erf GeGLU, windows of 64 each side on two layers of
# three; 22 layers of 768) in F16, mean pooling
"$B/llm-engine" gen-model --preset modernbert-base --dtype f16 --out "$WORK/mb-base-f16.gguf" >/dev/null 2>&1 &&
    run modernbert_f16 env STEP=512 MIN_COS=0.999 tests/gpu/embed_check.sh "$B/llm-engine" \
        "$WORK/mb-base-f16.gguf" 2e-2 mean

# Memory errors and shared-memory races in the kernels (short runs: the tools slow kernels a lot).
if command -v compute-sanitizer >/dev/null && [ "${SANITIZE:-1}" = 1 ]; then
    export LLM_CUDA_TUNE=0 # the tuning's steps would multiply the tools' run time
    run stories_memcheck compute-sanitizer --tool memcheck --error-exitcode 9 \
        "$B/tests/gpu/parity_logits" --model "$S260" --positions 96 --gen 24 --chunk 40 --max-diff 1e-2
    run stories_racecheck compute-sanitizer --tool racecheck --error-exitcode 9 \
        "$B/tests/gpu/parity_logits" --model "$S260" --positions 48 --gen 8 --chunk 48 --max-diff 1e-2
    # the tensor-core GEMM's shared tiles (staging, reuse for the output) and the K-split partials
    [ -x "$B/tests/gpu/tcgemm_check" ] && run tcgemm_racecheck compute-sanitizer --tool racecheck \
        --error-exitcode 9 "$B/tests/gpu/tcgemm_check" --quick 1
    # the mma.sync prefill attention's double-buffered K/V tiles (cp.async)
    [ -f "$WORK/hf128-f32.gguf" ] && run att_mma_racecheck compute-sanitizer --tool racecheck --error-exitcode 9 \
        env LLM_CUDA_ATT_TC=2 LLM_CUDA_GEMV_MAX=64 "$B/tests/gpu/parity_logits" --model "$WORK/hf128-f32.gguf" \
        --positions 192 --gen 2 --chunk 96 --max-diff 1e-2
    # the device sampler's shared-memory histograms and scans (both block sizes), small vocabulary
    [ -x "$B/tests/gpu/sample_check" ] && run sampler_racecheck compute-sanitizer --tool racecheck \
        --error-exitcode 9 "$B/tests/gpu/sample_check" --quick 1 --min-same 0.99 --max-lp 1e-4
fi

if [ "${1:-}" != "--skip-hf" ]; then
    export PYTHONUNBUFFERED=1
    run hf_make python3 tests/gpu/hf_parity.py make --dir "$WORK/hf" --positions 256
    run hf_ours "$B/tests/gpu/logits_dump" --model "$WORK/hf/model" --ids "$WORK/hf/ids.i32" --out "$WORK/hf/ours.f32" --decode 16
    # the CPU backend on the same model (all cores): tells a kernel error from a loader / model one
    run hf_cpu "$B/tests/gpu/logits_dump" --backend cpu --model "$WORK/hf/model" --ids "$WORK/hf/ids.i32" \
        --out "$WORK/hf/ours_cpu.f32" --decode 16
    run hf_compare python3 tests/gpu/hf_parity.py compare --dir "$WORK/hf" --ours "$WORK/hf/ours.f32" \
        --other "$WORK/hf/ours_cpu.f32"
    run hf_compare_cpu python3 tests/gpu/hf_parity.py compare --dir "$WORK/hf" --ours "$WORK/hf/ours_cpu.f32"
fi
echo "parity: $fails part(s) failed"
[ "$fails" -eq 0 ]
