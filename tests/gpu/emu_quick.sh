#!/bin/bash
# The CUDA backend in `make test` (CI has no GPU): a few small cases of tests/gpu/emu_parity.sh under the CPU
# emulation of CUDA (kernels/cuda_emu.*), a few minutes on 2 cores, so a change to the kernels or to the
# backend's host code is run, not only compiled, on every submission. The full set stays in emu_parity.sh.
#  1. the device sampler against engine/sampler.c (small vocabulary, every case, both block sizes);
#  2. stories260K F32 against the CPU backend: greedy ids, logits (GEMV path), a mixed multi-sequence batch;
#  3. a Llama-3-style head_dim-128 model (tests/gpu/emu_hf_model.py): the decode attention kernel (one
#     split: its direct output) and the tensor-core prefill attention, f16 KV (wmma; mma.sync over long splits);
#     head_dim 256 through the decode kernel and graphs; the same kernels over a q8_0 KV cache (int8 + scales,
#     quantised as the CPU backend does);
#  4. decode through CUDA Graphs (emulated capture and replay) with the on-device argmax, through the fused
#     decode GEMVs (the launch count per step says so);
#  5. the scheduler over both backends: greedy requests identical, sampled ones (on the device) too; then
#     the CUDA side out of device memory (an oversized KV pool, a capped device): the same tokens; again over
#     q8_0 caches;
#  6. the matrix products of 2-130 tokens against a host reference (tensor-core weight GEMM and cuBLAS path;
#     the grouped one of a mixture of experts; the int8 GEMVs of 1-8 tokens) and a q4_0 model through the tensor-core weight GEMM (LLM_CUDA_TC_GEMM);
#  7. kernel tuning at start: every product path timed, parity with what it chose, its file; the prefill
#     attention kernel timed on a head_dim-128 model;
#  8. Qwen 2 (q/k/v biases) and Qwen 3 (per-head q/k norms) in F32: qkv_prep_kernel before the rope, prefill
#     and decode (the fused norm+QKV+rope GEMV steps aside for them);
#  9. embeddings, last-token and mean pooling, against the CPU backend (tests/gpu/embed_check.sh); YaRN rope
#     scaling on the Qwen 2 model; n-gram speculation over the scheduler (greedy drafts checked on the device,
#     sampled ones drawn in turn on the host: both as on the CPU);
#  9b. BERT encoders (kernels/cuda_encoder.cu) against the CPU backend: F32 with the scalar, tensor-core and
#     decode attention kernels, a pair's token types, a q8_0 KV cache; the bge-small shape in F16 (mma.sync
#     attention, cuBLAS) and Q8_0; nomic-bert (rope, SwiGLU); XLM-RoBERTa; EmbeddingGemma (bidirectional
#     Gemma 3: the symmetric window through the decoder path) in F32, F16 and Q8_0; jina-bert-v2 (ALiBi, a
#     GELU-gated FFN) in F32, F16 and Q8_0; ModernBERT (LayerNorms on the decoder path, erf GeGLU, a symmetric
#     window) in F32, F16 and Q8_0 (tests/gpu/embed_check.sh);
# 10. Gemma 3 and Gemma 2 (gen-model --preset tiny-gemma3 / tiny-gemma2: GeGLU, embedding scale, norms after
#     attention and FFN, a window of 16 on some layers, Gemma 3's second rope base, Gemma 2's soft caps) over
#     texts longer than the window: prefill (wmma, mma.sync, scalar kernels), decode (register and tiled
#     kernels, many splits), graphs with the on-device argmax, bf16 (16-bit activations, f16 KV);
# 10a. tensor parallelism: the model split over 2 and 4 emulated devices (processes), against the CPU backend;
#      the scheduler over it; one rank out of memory for a step; a rank that cannot start; a model refused
#      (Gemma 3's heads do not divide);
#      `serve` over it, with a rank killed, and with a draft model on rank 0's device (mixtures of experts
#      split over 2: part 11);
# 10b. SmolLM3's NoPE layers and Granite's four scales (gen-model --preset tiny-smollm3 / tiny-granite);
#      OLMo 2 / 3's post-norm-only layers, whole-row q/k norms and windows (tiny-olmo2 / tiny-olmo3), also split
#      over 2 emulated devices;
# 11. mixtures of experts (tiny-qwen3moe, tiny-qwen2moe's shared expert, tiny-mixtral, tiny-granitemoe-shared's
#     ungated shared expert, tiny-olmoe, tiny-ernie4_5-moe's dense first layer and biased choice, tiny-glm4moe's
#     sigmoid router, tiny-gpt-oss's sinks, biases and clamped SwiGLU): routing and experts on the device,
#     prefill, mixed batches, decode through graphs; split over 2 emulated devices (tensor parallelism), each
#     expert by columns or the experts dealt out whole (expert parallelism, tiny-qwen3moe-96's unsplittable
#     Q8_0 experts);
#     quantised experts against the dequantised copy;
#     the experts on the grouped tensor-core GEMM, and on int8 activations (dp4a) against the CPU's;
#     the window pool (tiny-gemma3, tiny-gpt-oss): the sliding-window layers' KV in a pool of its own, stale
#     window blocks reused by another sequence, against the CPU and the CUDA backend without the pool;
# 12. GGUF Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_NL / IQ4_XS / Q4_1 / Q5_0 / Q5_1 / MXFP4 matrices uploaded from
#     their own blocks as CU_Q2_M / CU_Q3 / CU_Q4_M / CU_Q5_M / CU_Q6 / CU_IQ4 / CU_MX4 (4.5-7 bits a weight):
#     float GEMVs, graphs, int8 GEMVs against the CPU's packed Q2_K / Q3_K / Q4_K / Q5_K / Q6_K, the CLI on Q2_K,
#     Q3_K_M, Q4_K_M, Q5_K_M and IQ4_XS files (the int8 GEMVs of every block type are checked exactly in tcgemm_check,
#     part 6).
#   tests/gpu/emu_quick.sh [BUILD_DIR]      (make test-emu)
set -u -o pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
E="$B/emu"
W="$B/emu_work"
mkdir -p "$E" "$W"
make -s BUILD="$B" "$B/llm-engine" "$B/llm-client" "$B/libllm.a" || exit 1
tests/gpu/emu_build.sh "$E" || exit 1
LIBS=$(sed -n 's/^LIBS *= *//p' Makefile)
for prog in parity_logits sched_parity; do
    cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 -Iengine -Ishm -o "$E/$prog" tests/gpu/$prog.c \
        "$B/libllm.a" $LIBS || exit 1
done
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 -Iengine -c engine/sampler.c -o "$E/sampler.o" &&
    g++ -std=c++17 -DCU_EMULATE -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -Ikernels -Iengine -Ishm \
        -x c++ tests/gpu/sample_check.cc kernels/cuda_sample.cu -x none kernels/cuda_emu.cc "$E/sampler.o" \
        -o "$E/sample_check" || exit 1
g++ -std=c++17 -DCU_EMULATE -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas -Ikernels -Iengine -Ishm \
    -x c++ tests/gpu/tcgemm_check.cc kernels/cuda_kernels.cu kernels/cuda_tcgemm.cu -x none kernels/cuda_emu.cc \
    -o "$E/tcgemm_check" || exit 1
python3 tests/gpu/emu_hf_model.py "$W/hf128" 128 >/dev/null || exit 1
"$B/llm-engine" gen-model --from "$W/hf128" --dtype q4_0 --out "$W/hf128-q4_0.gguf" >/dev/null 2>&1 || exit 1
"$B/llm-engine" gen-model --from ../shared/models/stories260K/stories260K.bin --dtype q8_0 \
    --out "$W/s260-q8_0.gguf" >/dev/null 2>&1 || exit 1
export LLM_CUDA_LIB="$PWD/$E/libllm_cuda_emu.so"
S260=../shared/models/stories260K/stories260K.bin
# The emulation runs a kernel on one core, so checks run side by side, EMU_JOBS at a time (the cores), while
# this script goes on writing the next models; each one's report is printed in order as it finishes, with
# the seconds it took. A check writes only files named after itself.
fails=0 started=0 shown=0
JOBS=${EMU_JOBS:-$(nproc)}
rm -f "$W"/check.*
trap 'kill $(jobs -p) 2>/dev/null' EXIT
show_done() { # print, in order, the reports of the checks finished so far
    while [ -f "$W/check.$((shown + 1)).rc" ]; do
        shown=$((shown + 1))
        cat "$W/check.$shown.out"
        [ "$(cat "$W/check.$shown.rc")" -eq 0 ] || fails=$((fails + 1))
    done
}
check() { # name, command...
    local name=$1; shift
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    show_done
    started=$((started + 1))
    local n=$started
    (
        t0=$(date +%s)
        out=$("$@" 2>&1)
        rc=$?
        { echo "== $name ($(( $(date +%s) - t0 )) s)"
          echo "$out" | grep -v '^cuda: \(CPU\|uploaded\|KV pool\)' | tail -4
          [ $rc -eq 0 ] || echo "  <-- FAIL"; } > "$W/check.$n.out"
        echo $rc > "$W/check.$n.rc"
    ) &
}
check "device sampler vs engine/sampler.c" "$E/sample_check" --quick 1
check "matrix products of 2-130 tokens (tensor-core GEMM, cuBLAS) vs a host reference" "$E/tcgemm_check" --quick 1
check "head_dim 128, q4_0, steps of 20 tokens through the tensor-core weight GEMM" env LLM_CUDA_TC_GEMM=64 \
    "$E/parity_logits" --model "$W/hf128-q4_0.gguf" --positions 40 --gen 4 --chunk 20 --max-diff 0.6 --min-top1 0.95
check "stories260K f32 vs the CPU backend" env LLM_CUDA_KV=f32 "$E/parity_logits" --model "$S260" --positions 32 \
    --gen 8 --chunk 8 --max-diff 1e-4 --min-top1 1
check "head_dim 128: decode and tensor-core prefill attention, f16 kv" "$E/parity_logits" --model "$W/hf128" \
    --positions 40 --gen 4 --chunk 8 --max-diff 1e-1 --min-top1 0.98
# The q8_0 KV cache (int8 + a float scale per group, quantised in rope_kv_q8_kernel as the CPU's kv_q8_quant):
# both backends cache the same bits from the same k / v, so stories260K (head_dim 8: groups of 8, the scalar
# kernels) agrees as tightly as over f32. Where the two backends' k differ in the last bits (another summation
# order in the products), an element near a rounding edge of the int8 grid may round the other way: a step of
# max|x| / 127 in one element, which moves logits by up to ~3e-3 on the head_dim-128 F32 model (a scale off by
# one part in 127 moves them by 0.08), hence 1e-2 there: the register decode kernel (4 int8s a lane) and the
# scalar prefill kernel; then the wmma prefill kernel (dequantised to half) and head_dim 256 (8 a lane) through
# graphs, whose half rounding sets the bound as for f16.
"$B/llm-engine" gen-model --from "$W/hf128" --dtype f32 --out "$W/hf128-f32.gguf" >/dev/null 2>&1 || exit 1
check "q8_0 kv: stories260K f32 vs the CPU backend's q8_0 cache" env LLM_CUDA_KV=q8_0 "$E/parity_logits" \
    --model "$S260" --positions 32 --gen 8 --chunk 8 --max-diff 1e-4 --min-top1 1
check "q8_0 kv, head_dim 128 f32: register decode and scalar prefill attention" env LLM_CUDA_KV=q8_0 \
    LLM_CUDA_ATT_TC=0 "$E/parity_logits" --model "$W/hf128-f32.gguf" --positions 40 --gen 4 --chunk 8 \
    --max-diff 1e-2 --min-top1 1
check "q8_0 kv, head_dim 128 f32: wmma prefill attention" env LLM_CUDA_KV=q8_0 "$E/parity_logits" \
    --model "$W/hf128-f32.gguf" --positions 40 --gen 4 --chunk 8 --max-diff 5e-2 --min-top1 0.99
# head_dim 256 (Gemma 2 / 3's): the register decode kernel with 8 dimensions a lane (16-byte f16 row loads), graphs.
# Top-1 over the graph part's 43 rows: one near tie apart is 0.977 (the CPU's BF16 products on AMX tiles sum in
# another order than on vdpbf16ps and move it, the logits 0.0165 apart either way), so 0.95 there.
python3 tests/gpu/emu_hf_model.py "$W/hf256" 256 >/dev/null || exit 1
check "head_dim 256: register decode attention, f16 kv, graphs" env CU_EMU_SMS=64 "$E/parity_logits" \
    --model "$W/hf256" --positions 24 --gen 4 --chunk 8 --graph-cycles 1 --max-diff 1e-1 --min-top1 0.95
check "head_dim 256: register decode attention, q8_0 kv, graphs" env LLM_CUDA_KV=q8_0 CU_EMU_SMS=64 \
    "$E/parity_logits" --model "$W/hf256" --positions 24 --gen 4 --chunk 8 --graph-cycles 1 --max-diff 1e-1 \
    --min-top1 0.95
# The mma.sync prefill attention (LLM_CUDA_ATT_TC=2): 1 SM, so a split walks several K/V tiles (both buffers).
check "head_dim 128: mma.sync prefill attention, f16 kv, long splits" env LLM_CUDA_ATT_TC=2 CU_EMU_SMS=1 \
    "$E/parity_logits" --model "$W/hf128" --positions 200 --gen 4 --chunk 100 --max-diff 1e-1 --min-top1 0.98
# Decode through graphs; the fused decode GEMVs really run there: a batch-1 step of stories260K (5 layers) is 6 launches a layer
# + 4 (34), not the 10 + 4 (54) of the unfused kernels (LLM_CUDA_STATS=1 counts them).
check "decode through CUDA Graphs + on-device argmax, fused decode GEMVs" bash -c "out=\$(LLM_CUDA_STATS=1 \
    LLM_CUDA_KV=f32 CU_EMU_SMS=64 '$E/parity_logits' --model '$S260' --gen 2 --only-graph 1 --graph-cycles 2 \
    --max-diff 1e-4 --min-top1 1 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 0 ] &&
    echo \"\$out\" | grep -q 'kernel launches per decode step.*: 34 at 1 token'"
# --oom 1: then twice out of device memory (a KV pool asked larger than the device; the device capped halfway
# between init and the run's peak, so that a step's scratch is refused): same tokens, steps shrunk, nothing leaked.
check "the scheduler over both backends (sampled requests on the device); out of device memory" env LLM_CUDA_KV=f32 \
    "$E/sched_parity" --model "$S260" --gen 12 --max-lp-diff 1e-4 --min-sampled 7 --oom 1
# the same over q8_0 caches (out of memory: the four arrays allocated and shrunk together); the logprobs of
# the sampled requests' 12 steps move by up to ~4e-3 where a k / v element rounds the other way (above)
check "the scheduler over both backends, q8_0 KV caches; out of device memory" env LLM_CUDA_KV=q8_0 \
    "$E/sched_parity" --model "$S260" --gen 12 --max-lp-diff 1e-2 --min-sampled 7 --oom 1
# The fused decode GEMVs on int8 activations (dp4a: x normalised and quantised in shared memory): q4_0 one
# token a step as the CPU computes it, in 34 launches a step (as the float path), not the unfused int8 70.
"$B/llm-engine" gen-model --from ../shared/models/stories260K/stories260K.bin --dtype q4_0 \
    --out "$W/s260-q4_0.gguf" >/dev/null 2>&1 || exit 1
check "fused int8-activation decode GEMVs (q4_0, dp4a) vs the CPU backend" bash -c "out=\$(LLM_CUDA_STATS=1 \
    LLM_CUDA_KV=f32 LLM_CUDA_GEMV_DP4A=1 '$E/parity_logits' --model '$W/s260-q4_0.gguf' --positions 32 --gen 8 \
    --chunk 1 --mixed 0 --max-diff 1e-3 --min-top1 1 2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 0 ] &&
    echo \"\$out\" | grep -q 'kernel launches per decode step.*: 34 at 1 token'"
# Kernel tuning (kernels/cuda_tune.cu; off by default under the emulation): stories260K in q8_0, whose down
# matrices stay f16 (hidden 172 is no multiple of 32), so both weight classes' paths are timed at 1-8 tokens
# and the chosen mix must keep parity; the file it writes is read back by the next start, and a damaged one
# is ignored (timed again).
check "kernel tuning: every path timed, parity with the choice, its file read back, a damaged file ignored" \
    bash -c "f='$W/tune.txt'; rm -f \"\$f\"; run() { LLM_CUDA_TUNE=1 LLM_CUDA_TUNE_REPS=1 LLM_CUDA_TUNE_MAX=8 \
    LLM_CUDA_TUNE_FILE=\"\$f\" '$E/parity_logits' --model '$W/s260-q8_0.gguf' --positions 8 --gen 2 --chunk 8 \
    --max-diff 0.6 --min-top1 0.95 2>&1; }; a=\$(run) && b=\$(run) && sed -i 's/^bucket 2 [0-9]*/bucket 2 -1/' \"\$f\" &&
    c=\$(run) || { echo \"\$a\$b\$c\"; exit 1; }; echo \"\$a\" | grep 'cuda: tune'; echo \"\$b\" | grep 'read from' &&
    echo \"\$c\" | grep 'timing again' && echo \"\$a\" | grep -q 'tune 8 tokens.*quant dp4a.*quant tc.*half cublas'"
# The prefill attention part of the tuning (head_dim 128, f16 KV: wmma or mma.sync on a 64-token prefill), parity
# with its choice, and the choice read back from the file.
check "kernel tuning: prefill attention kernel timed, parity with the choice, read back" \
    bash -c "f='$W/tune128.txt'; rm -f \"\$f\"; run() { LLM_CUDA_TUNE=1 LLM_CUDA_TUNE_REPS=1 LLM_CUDA_TUNE_MAX=1 \
    LLM_CUDA_TUNE_PREFILL=64 LLM_CUDA_TUNE_FILE=\"\$f\" '$E/parity_logits' --model '$W/hf128' --positions 40 --gen 2 \
    --chunk 8 --max-diff 1e-1 --min-top1 0.98 2>&1; }; a=\$(run) && b=\$(run) || { echo \"\$a\$b\"; exit 1; }
    echo \"\$a\" | grep 'tune prefill attention, 64 tokens, ms a step: wmma .*, mma .* -> ' &&
    echo \"\$b\" | grep 'read from.*prefill attention' && grep -q '^att_mma [01]\$' \"\$f\""
for arch in qwen2 qwen3; do
    python3 tests/gpu/emu_hf_model.py "$W/hf-$arch" 32 $arch >/dev/null &&
        "$B/llm-engine" gen-model --from "$W/hf-$arch" --dtype f32 --out "$W/$arch-f32.gguf" >/dev/null 2>&1 || exit 1
    # (F32 logits here differ from the CPU's by up to ~2e-2, Qwen 3's norms sharpening attention; the Llama
    # model of the same shape's by ~3e-3; a bias or a norm left out moves them by 1.9-7)
    check "$arch f32 vs the CPU backend (biases / q-k norms before the rope)" env LLM_CUDA_KV=f32 \
        "$E/parity_logits" --model "$W/$arch-f32.gguf" --positions 32 --gen 4 --chunk 8 --max-diff 5e-2 --min-top1 1
done
# GPTQ (4-bit symmetric: Q4_0) and AWQ (4-bit asymmetric: Q8_0) directories of the head_dim-128 Llama, repacked
# at load (model_hf_intq.c) and uploaded as any Q4_0 / Q8_0 file's: float GEMVs against the CPU on their F32 twins
# (tests/parity/make_intq.py: the value each weight means), measured 3.8e-6 and 3.6e-6
Q_ENV="LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0"
for f in gptq awq; do
    { python3 tests/parity/make_intq.py $f "$W/hf128" "$W/hf128-$f" "$W/hf128-$f-ref" &&
      "$B/llm-engine" gen-model --from "$W/hf128-$f-ref" --dtype f32 --out "$W/hf128-$f-ref.gguf"; } >/dev/null 2>&1 ||
        exit 1
    check "$f directory (repacked at load) vs the CPU on its F32 twin" env $Q_ENV "$E/parity_logits" \
        --model "$W/hf128-$f" --cpu-model "$W/hf128-$f-ref.gguf" --positions 32 --gen 4 --chunk 8 --max-diff 1e-3 \
        --min-top1 1
done
# what, file (in $W), then "N type" for each line the CUDA load must print ("cuda: N type matrices from their
# own blocks"): the CLI's greedy ids on the CUDA backend and on the CPU
cli_ids() {
    local what=$1 file=$2 want="" l
    shift 2
    for l in "$@"; do want="$want grep -q '^cuda: $l matrices from their own blocks' '$W/cli-$file.err' &&"; done
    check "generate --backend cuda on $what: from their blocks, the CPU's greedy ids" bash -c "
        g=\$('$B/llm-engine' generate --backend cuda --model '$W/$file' --prompt-ids 1,403,407 --max-tokens 12 \
            --output-ids --ignore-eos 2>'$W/cli-$file.err'); grep -v '^cuda: tune' '$W/cli-$file.err'
        c=\$('$B/llm-engine' generate --model '$W/$file' --prompt-ids 1,403,407 --max-tokens 12 --output-ids \
            --ignore-eos --threads 2 2>/dev/null)
        echo \"cuda: \$g\"; echo \"cpu:  \$c\"
        $want [ -n \"\$c\" ] && [ \"\$g\" = \"\$c\" ]"
}
# generate and serve load with their conversions deferred: the AWQ directory's asymmetric 4-bit then reaches the
# device as Q4_1 blocks (CU_Q4_M, 5 bits a weight where the Q8_0 above takes 8.5), the CPU's as the same Q8_0
cli_ids "the awq directory (q4_1 blocks on the device)" hf128-awq "14 q4_1"
# YaRN rope scaling (the tables both backends build from llm_rope_freq / llm_rope_mscale) on the Qwen 2 model
"$B/llm-engine" gen-model --from "$W/qwen2-f32.gguf" --dtype f32 --rope-scaling yarn --rope-factor 4 \
    --rope-orig-ctx 16 --out "$W/qwen2-yarn.gguf" >/dev/null 2>&1 || exit 1
check "qwen2 with YaRN rope scaling vs the CPU backend" env LLM_CUDA_KV=f32 "$E/parity_logits" \
    --model "$W/qwen2-yarn.gguf" --positions 32 --gen 4 --chunk 8 --max-diff 5e-2 --min-top1 1
check "n-gram speculation: drafts argmaxed on the device (greedy) or drawn in turn on the host (sampled), as on the CPU" \
    env LLM_CUDA_KV=f32 "$E/sched_parity" --model "$S260" --gen 64 --max-lp-diff 1e-4 --min-sampled 4 --spec 4
check "embeddings (last and mean pooling) vs the CPU backend" env LLM_CUDA_KV=f32 tests/gpu/embed_check.sh \
    "$B/llm-engine" ../shared/models/stories260K/stories260K.gguf 1e-4
# BERT encoders (kernels/cuda_encoder.cu): tiny-bert F32 with the scalar attention kernels on 64 SMs (inputs of
# 3-121 tokens split into several items and splits; every query sees its whole input) within 1e-5 of the CPU,
# mean and CLS pooling, and a pair given as ids ([CLS] a [SEP] b [SEP]: token types); the tensor-core prefill
# kernel and a one-token input (the decode kernel); a q8_0 KV cache; then the bge-small shape (2 layers, head
# dim 32) in F16 through the mma.sync kernel and cuBLAS, and in Q8_0 (the GEMV / tensor-core GEMM / cuBLAS on
# a dequantised copy against the CPU's int8 products: within 5e-3). Measured: 1.6e-7, 6.9e-5, 1.3e-3, 8.1e-5,
# 2.0e-3; the attention mask left causal moves them by 0.14-0.25, token types left out by 0.12-0.2.
"$B/llm-engine" gen-model --preset tiny-bert --dtype f32 --out "$W/tiny-bert.gguf" >/dev/null 2>&1 &&
    for d in f16 q8_0; do "$B/llm-engine" gen-model --preset bge-small --layers 2 --dtype $d \
        --out "$W/bge2-$d.gguf" >/dev/null 2>&1 || exit 1; done || exit 1
PAIR=2,59,117,98,13,3,11,27,39,166,75,7,105,3
check "bert f32 vs the CPU backend: scalar attention, many splits; mean / CLS pooling, a pair" env LLM_CUDA_KV=f32 \
    LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-bert.gguf" 1e-5 \
    "mean cls" $PAIR
check "bert f32: tensor-core prefill attention; a one-token input (decode kernel)" env STEP=128 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-bert.gguf" 1e-3 mean 5
check "bert f32, q8_0 KV cache" env LLM_CUDA_KV=q8_0 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-bert.gguf" 1e-2 mean $PAIR
check "bge-small shape f16 (2 layers): mma.sync prefill attention, cuBLAS" env LLM_CUDA_ATT_TC=2 STEP=512 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/bge2-f16.gguf" 1e-3 cls
check "bge-small shape q8_0 (2 layers): quantised products" env STEP=512 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/bge2-q8_0.gguf" 5e-3 cls
# nomic-bert (gen-model --preset tiny-nomic-bert: rope positions in the encoder, fused q|k|v, SwiGLU, no
# biases): measured 1.5e-7 (scalar kernels) and 9.9e-5 (tensor-core prefill)
"$B/llm-engine" gen-model --preset tiny-nomic-bert --dtype f32 --out "$W/tiny-nomic-bert.gguf" >/dev/null 2>&1 || exit 1
check "nomic-bert f32 vs the CPU backend: scalar attention, many splits; mean / CLS pooling, a pair" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-nomic-bert.gguf" 1e-5 "mean cls" $PAIR
check "nomic-bert f32: tensor-core prefill attention" env STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-nomic-bert.gguf" 1e-3 mean
# EmbeddingGemma (gen-model --preset tiny-embeddinggemma: Gemma 3 without the causal mask, a symmetric window of
# 16 on five layers of six, the decoder path with ti_att / ti_swa, no classifier): F32 with the scalar kernels on
# 64 SMs and on one, mean and last pooling, inputs of 5-70 tokens; then the embeddinggemma-300m shape (2 layers,
# head dim 256) in F16 through the tensor-core prefill kernel and in Q8_0 through mma.sync (quantised products:
# cosine >= 0.9995). Measured: 1.7e-7, 2.9e-7, 7.6e-5, 1.7e-3 (0.99990); the window layers run as global ones
# move the cosine to 0.85, the merge reading splits past the input gives NaN.
"$B/llm-engine" gen-model --preset tiny-embeddinggemma --dtype f32 --out "$W/tiny-eg.gguf" >/dev/null 2>&1 &&
    for d in f16 q8_0; do "$B/llm-engine" gen-model --preset embeddinggemma-300m --layers 2 --dtype $d \
        --out "$W/eg300-$d.gguf" >/dev/null 2>&1 || exit 1; done || exit 1
check "embeddinggemma f32 vs the CPU backend: symmetric window, scalar attention, many splits" env LLM_CUDA_KV=f32 \
    LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-eg.gguf" 1e-5 \
    "mean last"
check "embeddinggemma f32: one split per input" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 STEP=128 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-eg.gguf" 1e-5 mean
check "embeddinggemma-300m shape f16 (2 layers): tensor-core prefill attention" env STEP=512 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/eg300-f16.gguf" 1e-3 mean
check "embeddinggemma-300m shape q8_0 (2 layers): mma.sync attention, quantised products" env LLM_CUDA_ATT_TC=2 \
    MIN_COS=0.9995 STEP=512 tests/gpu/embed_check.sh "$B/llm-engine" "$W/eg300-q8_0.gguf" 5e-3 mean
# jina-bert-v2 (gen-model --preset tiny-jina-bert: ALiBi with six heads, so both slope formulas, from each
# token's own position beside the encoder's whole-input mask; a GELU-gated FFN): F32 with the scalar kernels, a
# pair, then the tensor-core prefill kernel; the jina-v2-base shape (2 layers, twelve heads of 64) in F16
# through mma.sync and the jina-v2-small shape in Q8_0. Measured: 1.6e-7, 6.5e-5, 5.7e-5, 1.5e-3 (0.99995); the
# slopes of a power-of-two head count for every head move the cosine to 0.991 / 0.994.
"$B/llm-engine" gen-model --preset tiny-jina-bert --dtype f32 --out "$W/tiny-jina.gguf" >/dev/null 2>&1 &&
    "$B/llm-engine" gen-model --preset jina-v2-base --layers 2 --dtype f16 --out "$W/jina-base2-f16.gguf" \
        >/dev/null 2>&1 &&
    "$B/llm-engine" gen-model --preset jina-v2-small --layers 2 --dtype q8_0 --out "$W/jina-small2-q8_0.gguf" \
        >/dev/null 2>&1 || exit 1
check "jina-bert-v2 f32 vs the CPU backend: ALiBi in the scalar attention, many splits; mean / CLS, a pair" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=512 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-jina.gguf" 1e-5 "mean cls" $PAIR
check "jina-bert-v2 f32: tensor-core prefill attention; a one-token input" env STEP=512 tests/gpu/embed_check.sh \
    "$B/llm-engine" "$W/tiny-jina.gguf" 1e-3 mean 5
check "jina-v2-base shape f16 (2 layers): mma.sync prefill attention, twelve heads" env LLM_CUDA_ATT_TC=2 STEP=512 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/jina-base2-f16.gguf" 1e-3 mean
check "jina-v2-small shape q8_0 (2 layers): quantised products" env MIN_COS=0.9995 STEP=512 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/jina-small2-q8_0.gguf" 5e-3 mean
# ModernBERT (gen-model --preset tiny-modernbert: the decoder path with LayerNorms without bias, none before the
# first layer's attention, fused q|k|v and gate|up, erf GeGLU, a symmetric window of 16 on two layers of three
# with their own rope base): F32 with the scalar kernels on 64 SMs and on one, mean and CLS pooling, then the
# tensor-core prefill kernel; the modernbert-base shape (3 layers: one global, two windowed) in F16 through
# wmma and in Q8_0 through mma.sync. Measured: 2.5e-7, 2.5e-7, 1.6e-4, 7.6e-5, 1.5e-3 (0.99993); the embedding's
# norm left out moves the cosine to 0.970, the windowed layers run as global ones to 0.951.
"$B/llm-engine" gen-model --preset tiny-modernbert --dtype f32 --out "$W/tiny-mb.gguf" >/dev/null 2>&1 &&
    for d in f16 q8_0; do "$B/llm-engine" gen-model --preset modernbert-base --layers 3 --dtype $d \
        --out "$W/mb-base3-$d.gguf" >/dev/null 2>&1 || exit 1; done || exit 1
check "modernbert f32 vs the CPU backend: LayerNorms, symmetric window, scalar attention; mean / CLS" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-mb.gguf" 1e-5 "mean cls"
check "modernbert f32: one split per input" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 STEP=128 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-mb.gguf" 1e-5 mean
check "modernbert f32: tensor-core prefill attention" env STEP=512 tests/gpu/embed_check.sh "$B/llm-engine" \
    "$W/tiny-mb.gguf" 1e-3 mean
check "modernbert-base shape f16 (3 layers): tensor-core prefill attention" env STEP=512 \
    tests/gpu/embed_check.sh "$B/llm-engine" "$W/mb-base3-f16.gguf" 1e-3 mean
check "modernbert-base shape q8_0 (3 layers): mma.sync attention, quantised products" env LLM_CUDA_ATT_TC=2 \
    MIN_COS=0.9995 STEP=512 tests/gpu/embed_check.sh "$B/llm-engine" "$W/mb-base3-q8_0.gguf" 5e-3 mean
# XLM-RoBERTa (gen-model --preset tiny-xlm-r: one token type, a Unigram vocabulary): a pair as RoBERTa's ids
# (<s> a </s></s> b </s>: no type 1 anywhere with one type row); measured 1.5e-7
"$B/llm-engine" gen-model --preset tiny-xlm-r --dtype f32 --out "$W/tiny-xlm-r.gguf" >/dev/null 2>&1 || exit 1
check "xlm-roberta f32 vs the CPU backend: scalar attention; mean / CLS pooling, a pair" env LLM_CUDA_KV=f32 \
    LLM_CUDA_ATT_TC=0 CU_EMU_SMS=64 STEP=128 tests/gpu/embed_check.sh "$B/llm-engine" "$W/tiny-xlm-r.gguf" 1e-5 \
    "mean cls" 0,6,25,39,2,2,6,25,39,7,39,98,10,29,39,2
# Gemma: the presets have Llama 3's 128,256-token vocabulary, whose classifier GEMV takes ~3 s a step here, so
# both backends run them with its first 512 rows (parity_logits --vocab 512). Window 16 over 40-100 positions
# (chunks of 20 / 50), decode to position 28 (greedy) and 115 (mixed batch), 251 (graph part, 64 SMs: splits
# wholly before a window skipped). F32 logits differ from the CPU's by up to ~1.6e-2 with the tensor-core
# prefill kernels (half Q/K/P; the scalar kernels: 2.5e-5), bf16 by up to ~0.2 (as tiny-qwen3 bf16: 0.13).
for f in gemma3-f32 gemma2-f32 gemma2-bf16; do
    "$B/llm-engine" gen-model --preset tiny-${f%-*} --dtype ${f#*-} --out "$W/$f.gguf" >/dev/null 2>&1 || exit 1
done
check "gemma3 f32 vs the CPU backend: rope base of the window layers, q/k norms; prefill, mixed batch, decode" \
    env LLM_CUDA_KV=f32 "$E/parity_logits" --model "$W/gemma3-f32.gguf" --vocab 512 --positions 40 --gen 24 \
    --chunk 20 --max-diff 5e-2 --min-top1 1
check "gemma2 f32 vs the CPU backend: soft caps; decode through graphs (on-device argmax), many splits" \
    env LLM_CUDA_KV=f32 CU_EMU_SMS=64 "$E/parity_logits" --model "$W/gemma2-f32.gguf" --vocab 512 --positions 100 \
    --gen 24 --chunk 50 --mixed 0 --graph-cycles 1 --max-diff 5e-2 --min-top1 1
# The scalar kernels (prefill and decode), with a score scale other than 1/sqrt(head_dim) (query_pre_attn_scalar)
check "gemma2 f32, scalar attention kernels, attention scale 0.125" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/gemma2-f32.gguf" --vocab 512 --attn-scale 0.125 \
    --positions 40 --gen 24 --chunk 20 --mixed 0 --max-diff 1e-4 --min-top1 1
# bf16: 16-bit activations (GeGLU into them), f16 KV, the mma.sync prefill kernel on 1 SM (a split walks
# several tiles and starts at the one holding its window)
check "gemma2 bf16, mma.sync prefill attention, f16 kv" env LLM_CUDA_ATT_TC=2 CU_EMU_SMS=1 "$E/parity_logits" \
    --model "$W/gemma2-bf16.gguf" --vocab 512 --positions 100 --gen 24 --chunk 50 --mixed 0 --max-diff 0.3 \
    --min-top1 0.98
# Tensor parallelism (engine/backend_tp.c, kernels/cuda_tp.cu): the model split over 2 and 4 emulated devices,
# one process each (CU_EMU_DEVICES), their all-reduces through shared memory; as close to the CPU backend as on one
# device (the same bounds as above): prefill, a mixed batch, decode through graphs with the on-device argmax.
check "split over 2 devices (tensor parallelism): stories260K f32, prefill, mixed batch, graph decode" \
    env LLM_CUDA_KV=f32 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$S260" --positions 32 --gen 8 --chunk 8 \
    --max-diff 1e-4 --min-top1 1 --graph-cycles 1 --tp 2
check "split over 4 devices: one KV head and 43 FFN columns a rank" env LLM_CUDA_KV=f32 CU_EMU_DEVICES=4 \
    "$E/parity_logits" --model "$S260" --positions 32 --gen 8 --chunk 8 --max-diff 1e-4 --min-top1 1 --tp 4
check "split over 2 devices: gemma2 (norms after the blocks over the summed outputs, soft caps), graphs" \
    env LLM_CUDA_KV=f32 CU_EMU_SMS=64 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/gemma2-f32.gguf" --vocab 512 \
    --positions 100 --gen 24 --chunk 50 --mixed 0 --graph-cycles 1 --max-diff 5e-2 --min-top1 1 --tp 2
# The scheduler over a split model (sampled requests drawn on rank 0's device); then one rank's device refuses an
# allocation of a step (CU_EMU_MEM_FAIL_NTH: the 50th of that process, past its init): every rank refuses that
# step (the agreement before its first launch), the scheduler shrinks it, and the tokens stay the same.
tp_sched() { # device, then the check's own environment
    local d=$1; shift
    out=$(env "$@" LLM_CUDA_KV=f32 CU_EMU_DEVICES=2 "$E/sched_parity" --model "$S260" --gen 12 --max-lp-diff 1e-4 \
        --min-sampled 7 --tp 2 2>&1); rc=$?
    echo "$out"
    [ $rc -eq 0 ] && { [ -z "$d" ] || echo "$out" | grep -q 'devices: [1-9][0-9]* steps refused'; }
}
check "split over 2 devices: the scheduler, greedy and sampled requests" tp_sched ""
check "split over 2 devices: rank 1 out of memory for a step, every rank refuses it" tp_sched 1 \
    CU_EMU_MEM_FAIL_NTH=50 CU_EMU_MEM_DEVICE=1
check "split over 2 devices: rank 0 out of memory for a step" tp_sched 0 CU_EMU_MEM_FAIL_NTH=50 CU_EMU_MEM_DEVICE=0
# A rank that cannot start ends them all with its reason; a model the split cannot take is refused up front.
check "split over 2 devices: rank 1's init fails, model refused" bash -c "
    out=\$(CU_EMU_DEVICES=2 CU_EMU_MEM=1000 CU_EMU_MEM_DEVICE=1 '$B/llm-engine' generate --model '$S260' \
        --tokenizer ../shared/models/stories260K/tok512.bin --prompt 'Once upon a time' --max-tokens 4 \
        --backend cuda --tensor-parallel-size 2 2>&1); rc=\$?; echo \"\$out\" | tail -2
    [ \$rc -ne 0 ] && echo \"\$out\" | grep -q 'rank 1 (device 1) exited with status 1: cuda backend: cannot set' &&
    out=\$(CU_EMU_DEVICES=4 '$B/llm-engine' generate --model '$W/gemma3-f32.gguf' --prompt-ids 1,2 --max-tokens 2 \
        --backend cuda --tensor-parallel-size 2 2>&1); rc=\$?; echo \"\$out\" | tail -1
    [ \$rc -ne 0 ] && echo \"\$out\" | grep -q 'KV heads and FFN width must each divide'"
# `serve --tensor-parallel-size 2`: requests through the ring answer as `generate` on the CPU; rank 1 killed, the
# supervisor starts the group again and it serves the same text; SIGTERM ends every rank and removes the segment.
# With "draft": a draft model (stories260K drafting for itself) whole on rank 0's device beside the split target:
# the same text, drafts confirmed; then SIGTERM to every process of the group at once (as systemd stops a
# service): rank 0 drains, the other ranks wait for it.
tp_serve() {
    local shm=emutp$BASHPID log="$W/tp_serve${1:-}.log" sup c c2=2 out draft=()
    [ "${1:-}" = draft ] && draft=(--draft-model "$S260" --draft-tokens 3)
    CU_EMU_DEVICES=2 "$B/llm-engine" serve --model "$S260" --tokenizer "$T512" --shm $shm --backend cuda \
        --tensor-parallel-size 2 --kv-blocks 64 --max-batch-size 4 "${draft[@]}" > "$log" 2>&1 &
    sup=$!
    want=$("$B/llm-engine" generate --model "$S260" --tokenizer "$T512" --prompt "Once upon a time" --max-tokens 16 \
        2>/dev/null)
    for i in $(seq 60); do grep -q 'serve: ready' "$log" && break; sleep 1; done
    ask() { "$B/llm-client" --shm $shm --tokenizer "$T512" --prompt "Once upon a time" --max-tokens 16 --requests 2 \
        --concurrency 2 | sed 's/.*"text":"\([^"]*\)".*/\1/'; }
    out=$(ask); c=$(echo "$out" | grep -cxF -- "$want")
    echo "before: $c of 2 requests gave the CPU's text"
    if [ "${1:-}" = draft ]; then
        pkill -TERM -f "shm $shm "
        wait $sup
        grep 'draft-model speculation\|stopping\|cannot go on' "$log"
        grep -q 'draft-model speculation: [1-9][0-9]* of' "$log" &&
            grep -q 'stopping (drained)' "$log" && ! grep -q 'cannot go on' "$log" || c=0
    else
        pkill -KILL -P "$(pgrep -P $sup)" 2>/dev/null # rank 1 (the worker's child)
        for i in $(seq 60); do [ "$(grep -c 'serve: ready' "$log")" -ge 2 ] && break; sleep 1; done
        grep 'was killed by signal 9\|worker_restart' "$log" | head -2
        out=$(ask); c2=$(echo "$out" | grep -cxF -- "$want")
        echo "after rank 1 was killed and the group restarted: $c2 of 2"
        kill -TERM $sup; wait $sup
    fi
    left=$(pgrep -f "shm $shm " | wc -l)
    echo "after SIGTERM: $left processes left, segment $( [ -e /dev/shm/llm-$shm ] && echo left || echo removed)"
    [ "$c" = 2 ] && [ "$c2" = 2 ] && [ "$left" = 0 ] && [ ! -e /dev/shm/llm-$shm ]
}
T512=../shared/models/stories260K/tok512.bin
check "split over 2 devices: serve, a rank killed, the group restarted, SIGTERM" tp_serve
check "split over 2 devices: serve with a draft model on rank 0's device; SIGTERM to every rank" tp_serve draft
# SmolLM3 (every fourth layer without rope: the rope kernels and the fused QKV GEMV's epilogue get no tables)
# and Granite (embedding, attention, residual and logit scales: the residual one through cuda_add_scaled, the
# logit one in logits_post_kernel), F32 with the scalar attention kernels: within 3e-5 of the CPU (measured);
# NoPE left out moves the logits by 4.1, the residual scale by 10, the logit scale by 18. Then through graphs.
# OLMo 2 / 3 (no norm before the blocks: the products read x itself, the fused GEMVs aside; q and k normed over
# whole rows in qkv_prep_kernel; OLMo 3's windows on three layers of four, unscaled rope there): F32 within
# 1.3e-5 of the CPU (measured), then through graphs, and bf16 (16-bit activations written from x unnormed).
for p in olmo2 olmo3; do
    "$B/llm-engine" gen-model --preset tiny-$p --dtype f32 --out "$W/$p-f32.gguf" >/dev/null 2>&1 || exit 1
    check "$p f32 vs the CPU backend, scalar attention; prefill, mixed batch, decode" env LLM_CUDA_KV=f32 \
        LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/$p-f32.gguf" --vocab 512 \
        --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1
done
check "olmo3 f32: tensor-core prefill, decode through graphs (on-device argmax)" env LLM_CUDA_KV=f32 CU_EMU_SMS=64 \
    "$E/parity_logits" --model "$W/olmo3-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 --mixed 0 \
    --graph-cycles 1 --max-diff 5e-2 --min-top1 1
# ... split over 2 emulated devices (tensor parallelism): OLMo 2's norms over whole q / k rows, which the split
# divides, from each rank's sums of squares all-reduced first (qk_ssq_kernel): olmo2 f32 as on one device
# (measured 6.6e-6), olmo3 through graphs within the tensor-core prefill's bound.
check "split over 2 devices: olmo2 f32, q/k norms over split rows; prefill, mixed batch, decode" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 CU_EMU_DEVICES=2 "$E/parity_logits" \
    --model "$W/olmo2-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1 --tp 2
check "split over 2 devices: olmo3 f32, tensor-core prefill, graphs" env LLM_CUDA_KV=f32 CU_EMU_SMS=64 \
    CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/olmo3-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 \
    --mixed 0 --graph-cycles 1 --max-diff 5e-2 --min-top1 1 --tp 2
# EXAONE 4's 64-layer layout: per-head q/k norms after no pre-norm, windows on three layers of four, the fourth
# without rope (2.4e-5 measured)
"$B/llm-engine" gen-model --preset tiny-exaone4-swa --dtype f32 --out "$W/exaone4-swa-f32.gguf" >/dev/null 2>&1 ||
    exit 1
check "exaone4 (64 layers, windows, global NoPE) f32 vs the CPU backend" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/exaone4-swa-f32.gguf" --vocab 512 --positions 40 --gen 8 \
    --chunk 20 --max-diff 1e-3 --min-top1 1
"$B/llm-engine" gen-model --preset tiny-olmo3 --dtype bf16 --out "$W/olmo3-bf16.gguf" >/dev/null 2>&1 || exit 1
check "olmo3 bf16 (16-bit activations of the unnormed residual)" env CU_EMU_SMS=64 "$E/parity_logits" \
    --model "$W/olmo3-bf16.gguf" --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 0.3 --min-top1 0.95
for p in smollm3 granite; do
    "$B/llm-engine" gen-model --preset tiny-$p --dtype f32 --out "$W/$p-f32.gguf" >/dev/null 2>&1 || exit 1
    check "$p f32 vs the CPU backend, scalar attention; prefill, mixed batch, decode" env LLM_CUDA_KV=f32 \
        LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/$p-f32.gguf" --vocab 512 \
        --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1
    check "$p f32: tensor-core prefill, decode through graphs (on-device argmax)" env LLM_CUDA_KV=f32 CU_EMU_SMS=64 \
        "$E/parity_logits" --model "$W/$p-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 --mixed 0 \
        --graph-cycles 1 --max-diff 5e-2 --min-top1 1
done
# Mixtures of experts (kernels/cuda_moe.cu: routing, sorting, the experts' products and the combine on the
# device). F32 with the scalar attention kernels: the CPU's arithmetic, so a tight bound (measured 1.5e-5 to
# 2.4e-4); a dropped renormalisation or shared-expert gate moves logits by far more. Qwen 2 MoE's quantised
# experts and shared expert on every product path as a GEMV, against the CPU on the file's dequantised F32 copy
# (the CPU's int8 activations, and the 16-bit ones of cuBLAS, flip near-tied expert choices: 0.25-7 apart).
for f in qwen3moe-f32 qwen2moe-q4_0 mixtral-q8_0; do
    "$B/llm-engine" gen-model --preset tiny-${f%-*} --dtype ${f#*-} --out "$W/$f.gguf" >/dev/null 2>&1 || exit 1
done
for f in qwen2moe-q4_0 mixtral-q8_0; do
    "$B/llm-engine" gen-model --from "$W/$f.gguf" --dtype f32 --out "$W/$f-deq.gguf" >/dev/null 2>&1 || exit 1
done
check "qwen3moe f32 vs the CPU backend: device routing and experts; prefill, mixed batch, decode" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/qwen3moe-f32.gguf" \
    --vocab 512 --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1
check "qwen3moe f32: decode through graphs (on-device argmax)" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 CU_EMU_SMS=64 "$E/parity_logits" --model "$W/qwen3moe-f32.gguf" --vocab 512 --gen 4 \
    --only-graph 1 --graph-cycles 1 --max-diff 1e-3 --min-top1 1
for f in qwen2moe-q4_0 mixtral-q8_0; do
    check "$f (shared expert / 4 of 256-wide experts) vs the CPU on its dequantised copy" env LLM_CUDA_KV=f32 \
        LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 \
        LLM_CUDA_MOE_TC=0 "$E/parity_logits" --model "$W/$f.gguf" --cpu-model "$W/$f-deq.gguf" --vocab 512 \
        --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 --min-top1 1
done
# Granite MoE with GraniteMoeShared's shared expert, added without a gate (the combine's sg NULL), and Granite's
# scales; OLMoE (whole-row q/k norms, experts not renormalised): F32 as qwen3moe above (3.7e-5, 1.8e-5).
"$B/llm-engine" gen-model --preset tiny-granitemoe-shared --dtype f32 --out "$W/granitemoe-shared-f32.gguf" \
    >/dev/null 2>&1 || exit 1
"$B/llm-engine" gen-model --preset tiny-olmoe --dtype f32 --out "$W/olmoe-f32.gguf" >/dev/null 2>&1 || exit 1
for f in granitemoe-shared olmoe; do
    check "$f f32 vs the CPU backend; prefill, mixed batch, decode" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
        LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/$f-f32.gguf" --vocab 512 --positions 40 --gen 16 \
        --chunk 20 --max-diff 1e-3 --min-top1 1
done
# ERNIE 4.5 MoE: a dense first layer wider (192) than the shared expert (128) beside the experts' layers, the
# experts chosen with a bias on their probabilities (moe_route_kernel's): F32 as above (1.2e-5), through graphs,
# and Q4_0 as GEMVs against the CPU on its dequantised copy.
for d in f32 q4_0; do
    "$B/llm-engine" gen-model --preset tiny-ernie4_5-moe --dtype $d --out "$W/ernie-moe-$d.gguf" --seed 5 \
        >/dev/null 2>&1 || exit 1
done
"$B/llm-engine" gen-model --from "$W/ernie-moe-q4_0.gguf" --dtype f32 --out "$W/ernie-moe-q4_0-deq.gguf" \
    >/dev/null 2>&1 || exit 1
check "ernie4_5-moe f32 vs the CPU backend: dense and expert layers, biased choice; prefill, mixed, decode" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/ernie-moe-f32.gguf" \
    --vocab 512 --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1
check "ernie4_5-moe f32: decode through graphs (on-device argmax)" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 CU_EMU_SMS=64 "$E/parity_logits" --model "$W/ernie-moe-f32.gguf" --vocab 512 --gen 4 \
    --only-graph 1 --graph-cycles 1 --max-diff 1e-3 --min-top1 1
check "ernie4_5-moe q4_0 vs the CPU on its dequantised copy" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_MOE_TC=0 \
    "$E/parity_logits" --model "$W/ernie-moe-q4_0.gguf" --cpu-model "$W/ernie-moe-q4_0-deq.gguf" --vocab 512 \
    --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 --min-top1 1
# GLM-4.5: ERNIE's layout with q/k/v biases, rope on 16 of 32 dims, and the router's sigmoids chosen with a bias,
# renormalised and times 2.5 (moe_route_kernel's sigmoid and scale): F32 against the CPU backend.
"$B/llm-engine" gen-model --preset tiny-glm4moe --dtype f32 --out "$W/glm-moe-f32.gguf" --seed 5 >/dev/null 2>&1 || exit 1
check "glm4moe f32 vs the CPU backend: sigmoid router with a bias and a scale, partial rope; prefill, mixed, decode" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" --model "$W/glm-moe-f32.gguf" \
    --vocab 512 --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1
# Mixtures of experts split over 2 emulated devices (tensor parallelism: each expert's columns divided as a dense
# FFN's, the router whole on every rank; the chosen experts' weighted partial sums all-reduced, moe_combine_kernel's
# `set`): as close to the CPU backend as on one device (measured 1.2e-5 to 2.7e-5; without the all-reduce 13.4):
# Qwen 3 MoE through graphs; Qwen 2 MoE's gated shared expert, Q4_0 experts in whole blocks; GraniteMoeShared's
# residual scale over the summed combination; ERNIE's dense first layer beside the experts; OLMoE's whole-row q/k
# norms.
check "split over 2 devices: qwen3moe f32, experts split by columns; prefill, mixed batch, graphs" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 CU_EMU_SMS=64 CU_EMU_DEVICES=2 "$E/parity_logits" \
    --model "$W/qwen3moe-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 --graph-cycles 1 --max-diff 1e-3 \
    --min-top1 1 --tp 2
check "split over 2 devices: qwen2moe q4_0 (gated shared expert) vs the CPU on its dequantised copy" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 \
    LLM_CUDA_TC_GEMM=0 LLM_CUDA_MOE_TC=0 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/qwen2moe-q4_0.gguf" \
    --cpu-model "$W/qwen2moe-q4_0-deq.gguf" --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 \
    --min-top1 1 --tp 2
for f in granitemoe-shared ernie-moe olmoe; do
    check "split over 2 devices: $f f32; prefill, mixed batch, decode" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
        LLM_CUDA_ATT_DECODE=0 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/$f-f32.gguf" --vocab 512 \
        --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1 --tp 2
done
# gpt-oss (tiny-gpt-oss: q/k/v, output, router and experts' biases, a sink per head, a window of 8 on every
# other layer, the clamped SwiGLU): F32 on 1 SM, so decode steps take one split and the register kernel finishes
# the softmax with the sink itself, prefill and the mixed batch merge splits with it (measured 6.7e-6 and 8.6e-6;
# without the sinks 10.6, without the experts' biases 3.1); Q8_0 experts on int8 activations against the CPU on
# the same file (logits only, as qwen2moe-q8_0 below); F16 experts on the grouped tensor-core GEMM (the biases
# added per expert after it) against the CPU on its F32 copy, the half rounding of the activations the only
# difference (3.7e-3; BF16's 8 bits flip this random model's expert choices). Through graphs: emu_parity.sh.
for d in f32 q8_0 f16; do
    "$B/llm-engine" gen-model --preset tiny-gpt-oss --dtype $d --out "$W/gpt-oss-$d.gguf" --seed 5 \
        >/dev/null 2>&1 || exit 1
done
"$B/llm-engine" gen-model --from "$W/gpt-oss-f16.gguf" --dtype f32 --out "$W/gpt-oss-f16-deq.gguf" \
    >/dev/null 2>&1 || exit 1
check "gpt-oss f32 vs the CPU backend: sinks, biases, windows, clamped SwiGLU; prefill, mixed, decode" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 "$E/parity_logits" --model "$W/gpt-oss-f32.gguf" \
    --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 --min-top1 1
# ... split over 2 emulated devices: a sink per head goes with its head, the experts' gate / up biases with their
# columns, the down biases are rank 0's alone, bo added after the sum (measured 6.4e-6; with the down biases on
# both ranks 2.7), through graphs
check "split over 2 devices: gpt-oss f32 (sinks, experts' biases, output bias), prefill, graphs" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 CU_EMU_DEVICES=2 "$E/parity_logits" \
    --model "$W/gpt-oss-f32.gguf" --vocab 512 --positions 40 --gen 8 --chunk 20 --mixed 0 --graph-cycles 1 \
    --max-diff 1e-3 --min-top1 1 --tp 2
check "gpt-oss q8_0 on int8 activations (dp4a experts with their biases) vs the CPU on the same file" \
    env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_GEMV_MAX_Q=1000 \
    LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_MOE_TC=0 "$E/parity_logits" --model "$W/gpt-oss-q8_0.gguf" \
    --vocab 512 --positions 40 --gen 8 --chunk 20 --mixed 0 --max-diff 1e-3 --min-top1 1
check "gpt-oss f16, experts on the tensor cores vs the CPU on its f32 copy" env LLM_CUDA_MOE_TC=1 \
    LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 \
    "$E/parity_logits" --model "$W/gpt-oss-f16.gguf" --cpu-model "$W/gpt-oss-f16-deq.gguf" --vocab 512 \
    --positions 40 --gen 8 --chunk 20 --mixed 0 --max-diff 2e-2 --min-top1 1
# Expert parallelism (--expert-parallel: the experts dealt out whole, rank r holding [r E / N, (r + 1) E / N);
# each rank sorts only its own experts' choices (moe_sort_kernel's lo, hi), combines them, and the all-reduce sums
# the ranks' shares): as close to the CPU as on one device. Qwen 3 MoE through graphs (measured 1.3e-5), gpt-oss
# (its experts' biases whole, 6.7e-6), its F16 experts on the grouped tensor-core GEMM (3.7e-3 as on one device),
# OLMoE over 4 (two experts a rank, 1.3e-5); tiny-qwen3moe-96's Q8_0 experts, 96 columns that do not split over 2
# in whole blocks, against the CPU on the file's values (1.1e-5), and `generate` taking that split by itself
# when asked for 2 GPUs: the ids of one device. The scheduler over the split: greedy requests' logprobs within
# 9.8e-6 of the CPU's, seeded device-sampled ones identical (scalar attention: the tensor-core kernels' half
# rounding moves this model's logprobs by 7.7e-3 on one device too).
check "experts whole over 2 devices (expert parallelism): qwen3moe f32; prefill, mixed batch, graphs" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 CU_EMU_SMS=64 CU_EMU_DEVICES=2 "$E/parity_logits" \
    --model "$W/qwen3moe-f32.gguf" --vocab 512 --positions 40 --gen 16 --chunk 20 --graph-cycles 1 --max-diff 1e-3 \
    --min-top1 1 --tp 2 --ep 1
check "experts whole over 2 devices: gpt-oss f32 (experts' biases whole), graphs" env LLM_CUDA_KV=f32 \
    LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/gpt-oss-f32.gguf" --vocab 512 \
    --positions 40 --gen 8 --chunk 20 --mixed 0 --graph-cycles 1 --max-diff 1e-3 --min-top1 1 --tp 2 --ep 1
check "experts whole over 2 devices: gpt-oss f16 experts on the tensor cores" env LLM_CUDA_MOE_TC=1 \
    LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0 LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 \
    CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/gpt-oss-f16.gguf" --cpu-model "$W/gpt-oss-f16-deq.gguf" \
    --vocab 512 --positions 40 --gen 8 --chunk 20 --mixed 0 --max-diff 2e-2 --min-top1 1 --tp 2 --ep 1
check "experts whole over 2 devices: the scheduler, greedy and device-sampled requests (qwen3moe f32)" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 CU_EMU_DEVICES=2 "$E/sched_parity" \
    --model "$W/qwen3moe-f32.gguf" --gen 12 --max-lp-diff 1e-3 --min-sampled 6 --tp 2 --ep 1
check "experts whole over 4 devices: olmoe f32, two experts a rank" env LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 \
    LLM_CUDA_ATT_DECODE=0 CU_EMU_DEVICES=4 "$E/parity_logits" --model "$W/olmoe-f32.gguf" --vocab 512 \
    --positions 40 --gen 16 --chunk 20 --max-diff 1e-3 --min-top1 1 --tp 4 --ep 1
"$B/llm-engine" gen-model --preset tiny-qwen3moe-96 --dtype q8_0 --out "$W/qwen3moe96-q8_0.gguf" >/dev/null 2>&1 &&
    "$B/llm-engine" gen-model --from "$W/qwen3moe96-q8_0.gguf" --dtype f32 --out "$W/qwen3moe96-q8_0-deq.gguf" \
        >/dev/null 2>&1 || exit 1
check "experts whole over 2 devices: Q8_0 experts of 96 columns vs the CPU on the file's values" env \
    LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 \
    LLM_CUDA_TC_GEMM=0 LLM_CUDA_MOE_TC=0 CU_EMU_DEVICES=2 "$E/parity_logits" --model "$W/qwen3moe96-q8_0.gguf" \
    --cpu-model "$W/qwen3moe96-q8_0-deq.gguf" --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 \
    --min-top1 1 --tp 2 --ep 1
check "generate over 2 devices: experts that do not split by columns are dealt out whole, the ids of one device" \
    bash -c "
    gen() { '$B/llm-engine' generate --model '$W/qwen3moe96-q8_0.gguf' --prompt-ids 1,2,3,4,5,6 --max-tokens 12 \
        --backend cuda --output-ids \"\$@\"; }
    one=\$(gen 2>/dev/null) && split=\$(CU_EMU_DEVICES=2 gen --tensor-parallel-size 2 2>'$W/ep_gen.err') &&
    grep 'dealt out whole instead' '$W/ep_gen.err' && echo \"one device: \$one\" && echo \"split:      \$split\" &&
    [ -n \"\$one\" ] && [ \"\$one\" = \"\$split\" ]"
# The window pool (--window-pool 12: the sliding-window layers' KV in a pool of its own, llm_backend_opts.swa_blocks):
# 3 sequences prefilled in chunks of 20 side by side, then decoded through graphs, to position 87; before each step
# the blocks wholly before a sequence's window go back to the pool and are taken at once by another sequence, so
# stale entries of a table name blocks being written (parity part 5). Against the CPU backend on the same tables,
# and identical to the CUDA backend without the pool. tiny-gemma3 (window 16, 5 layers of 6) on the wmma prefill
# and register decode kernels, 4 SMs (splits wholly before a window); tiny-gpt-oss (window 8, every other layer,
# sinks) over a q8_0 cache (the scales' offsets too) on the scalar kernels and 1 SM (a split walks tiles that hold
# stale blocks, masked). Measured: 1.2e-2 (wmma's half rounding) and 5.2e-4; 0 from the CUDA backend without the
# pool; the window layers' attention through the main tables moves the logits by 32.
check "window pool: gemma3 f32, stale window blocks reused by another sequence; vs the CPU, and as without the pool" \
    env LLM_CUDA_KV=f32 "$E/parity_logits" --model "$W/gemma3-f32.gguf" --vocab 512 --positions 40 --gen 4 \
    --chunk 20 --only-graph 1 --window-pool 12 --max-diff 5e-2 --min-top1 1
check "window pool: gpt-oss f32, q8_0 kv, scalar attention; vs the CPU, and as without the pool" \
    env LLM_CUDA_KV=q8_0 LLM_CUDA_ATT_TC=0 CU_EMU_SMS=1 "$E/parity_logits" --model "$W/gpt-oss-f32.gguf" \
    --vocab 512 --positions 40 --gen 4 --chunk 20 --only-graph 1 --window-pool 12 --max-diff 1e-2 --min-top1 1
# On int8 activations (LLM_CUDA_GEMV_DP4A=1: the dense GEMVs and the experts' products, moe_mm_i8_kernel) the
# device computes what the CPU computes on the same quantised file: a tight bound where the float GEMVs differ
# by 0.25-7 (above). Qwen 2 MoE's experts in Q4_0 and Q8_0 (tiny-mixtral's random weights are too near their
# ties for this: one activation rounded the other way at position 0 already moves its logits by 1e-4, 0.2 by
# position 4, on either path); the Q8_0 model's mixed batch drifts the same way (0.12), so its logits only.
"$B/llm-engine" gen-model --preset tiny-qwen2moe --dtype q8_0 --out "$W/qwen2moe-q8_0.gguf" >/dev/null 2>&1 || exit 1
for f in qwen2moe-q4_0 qwen2moe-q8_0; do
    check "$f on int8 activations (dp4a experts) vs the CPU on the same file" env LLM_CUDA_KV=f32 \
        LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 \
        LLM_CUDA_TC_GEMM=0 LLM_CUDA_MOE_TC=0 "$E/parity_logits" --model "$W/$f.gguf" --vocab 512 --positions 40 \
        --gen 8 --chunk 20 --mixed $([ "$f" = qwen2moe-q4_0 ] && echo 1 || echo 0) --max-diff 1e-3 --min-top1 1
done
# The experts on the grouped tensor-core GEMM (cuda_moe_tc; LLM_CUDA_MOE_TC=1: every step, decode graphs too;
# the kernel itself is exact against a host reference in tcgemm_check above): bf16, 16-bit activations.
"$B/llm-engine" gen-model --preset tiny-qwen3moe --dtype bf16 --out "$W/qwen3moe-bf16.gguf" >/dev/null 2>&1 || exit 1
check "qwen3moe bf16, experts on the tensor cores (grouped GEMM), graphs" bash -c "out=\$(LLM_CUDA_STATS=1 \
    LLM_CUDA_MOE_TC=1 LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 '$E/parity_logits' \
    --model '$W/qwen3moe-bf16.gguf' --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 0.3 --min-top1 0.98 \
    2>&1); rc=\$?; echo \"\$out\"; [ \$rc -eq 0 ] && echo \"\$out\" | grep -q 'replays'"
# GGUF Q4_K, Q5_K and Q6_K matrices on the device from their own blocks (CU_Q4_M: 4-bit quants, fp16 (d, m) a
# block, 5 bits a weight; CU_Q5_M: the same with a fifth bit, 6; CU_Q6: 6-bit quants, an fp16 scale per 16, 7
# bits) instead of a Q8_0 copy (8.5). Files from llama.cpp's quantiser (bench/llamacpp), every layer matrix in
# one type (q4_K_M-layers: --pure, embedding and output in q8_0). On k256 (every matrix 256 or 512 wide, so no
# fallback types) against the CPU on the file's exact values (gen-model converts from the file's blocks): the
# float GEMVs measured 0.021 (Q4_K), 0.022 (Q5_K) and 0.0066 (Q6_K) where the Q8_0 copies give 0.25, 0.15 and
# 0.16 (the fp16 rounding of the folded scales, not the bits, sets the first two); then decode through graphs.
# On stories260K widened to 256 (trained weights, far from ties): the int8 (dp4a) GEMVs against the CPU on the
# same file, which packs the same blocks into the same values where it has the kernels (otherwise it runs the
# Q8_0 copy: skipped). The tensor-core GEMM and cuBLAS paths on Q4_M / Q5_M: tcgemm_check above (exact).
LLAMA_LIBDIR=bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ -d "$LLAMA_LIBDIR" ]; then
    make -s BUILD="$B" "$B/parity/pad_model" "$B/parity/ggml_ref" || exit 1
    { python3 tests/gpu/emu_hf_model.py "$W/k256" 32 k256 &&
      "$B/llm-engine" gen-model --from "$W/k256" --dtype f32 --out "$W/k256-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-q4k.gguf" q4_K_M-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-q4k.gguf" --dtype f32 --out "$W/k256-q4k-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-q6k.gguf" q6_K-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-q6k.gguf" --dtype f32 --out "$W/k256-q6k-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-q5k.gguf" q5_K_M-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-q5k.gguf" --dtype f32 --out "$W/k256-q5k-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-q3k.gguf" q3_K_M-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-q3k.gguf" --dtype f32 --out "$W/k256-q3k-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-q2k.gguf" q2_K-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-q2k.gguf" --dtype f32 --out "$W/k256-q2k-f32.gguf" &&
      "$B/parity/pad_model" "$S260" "$W/wide.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q4k.gguf" q4_K_M-layers &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q4_K_M.gguf" q4_K_M &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q5k.gguf" q5_K_M-layers &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q5_K_M.gguf" q5_K_M &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q6k.gguf" q6_K-layers &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q3k.gguf" q3_K_M-layers &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q3_K_M.gguf" q3_K_M &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-q2_K.gguf" q2_K &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-iq4_xs.gguf" iq4_xs-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-iq4_xs.gguf" --dtype f32 --out "$W/k256-iq4_xs-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-iq4_nl.gguf" iq4_nl-layers &&
      "$B/llm-engine" gen-model --from "$W/k256-iq4_nl.gguf" --dtype f32 --out "$W/k256-iq4_nl-f32.gguf" &&
      "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/wide.gguf" "$W/wide-IQ4_XS.gguf" iq4_xs &&
      for f in q4_1 q5_0 q5_1; do
          "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/k256-f32.gguf" "$W/k256-$f.gguf" $f-layers &&
              "$B/llm-engine" gen-model --from "$W/k256-$f.gguf" --dtype f32 --out "$W/k256-$f-f32.gguf" || exit 1
      done; } \
        >"$W/q4k.log" 2>&1 || { cat "$W/q4k.log"; exit 1; }
    Q4K_ENV="LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 LLM_CUDA_GEMV_MAX_Q=1000 LLM_CUDA_GEMV_MAX=1000 LLM_CUDA_TC_GEMM=0"
    # file type, file (k256-*.gguf, and its f32 copy *-f32.gguf), bound
    kq_float() {
        check "$1 file: its matrices from their blocks (float GEMVs) vs the CPU on the file's exact values" bash -c "
            out=\$(env $Q4K_ENV '$E/parity_logits' --model '$W/$2.gguf' --cpu-model '$W/$2-f32.gguf' --positions 40 \
                --gen 8 --chunk 20 --max-diff $3 --min-top1 1 --mixed 0 2>&1); rc=\$?; echo \"\$out\"
            [ \$rc -eq 0 ] && echo \"\$out\" | grep -q '^cuda: 14 $1 matrices from their own blocks'"
    }
    kq_float q4_K k256-q4k 0.06
    kq_float q6_K k256-q6k 0.03
    kq_float q5_K k256-q5k 0.06
    # Q3_K as CU_Q3 (3-bit quants in nibbles, an fp16 d per 16: 5 bits a weight) and Q2_K as CU_Q2_M (2-bit
    # quants in nibbles, an fp16 (d, m) per 16: 6 bits) where the Q8_0 copy takes 8.5 and re-rounds; only the
    # folded scales' fp16 rounding apart
    kq_float q3_K k256-q3k 0.03
    kq_float q2_K k256-q2k 0.03
    # IQ4_XS / IQ4_NL (CU_IQ4: Q4_0's nibbles through a level table, an fp16 scale a block): IQ4_NL's values
    # are exact on the device (measured 5e-6 where the Q8_0 copy gives 0.017), IQ4_XS's folded scales round
    # once (0.0053; the copy 0.024); llama.cpp's IQ4_XS mixture (IQ4_NL where rows are narrow) through the CLI.
    kq_float iq4_xs k256-iq4_xs 0.015
    kq_float iq4_nl k256-iq4_nl 1e-3
    # Q4_1 / Q5_0 / Q5_1 (the narrow rows of K-quant files) go up exactly as CU_Q4_M / CU_Q5_M: 5e-6 to 7e-6
    for f in q4_1 q5_0 q5_1; do kq_float $f k256-$f 1e-3; done
    # MXFP4 (gpt-oss's experts; llama.cpp's mxfp4_moe, the rest Q8_0) as CU_MX4 (its codes in Q4_0's nibbles
    # through a level table, its power of two as an fp16 scale: the file's values exactly, 4.5 bits a weight
    # where the Q8_0 copy takes 8.5): float GEMVs against the CPU on the F32 copy (measured 5.5e-6), then the
    # experts on the grouped tensor-core GEMM (bf16 activations: 0.12).
    { "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$W/gpt-oss-f32.gguf" "$W/gpt-oss-mxfp4.gguf" mxfp4_moe &&
      "$B/llm-engine" gen-model --from "$W/gpt-oss-mxfp4.gguf" --dtype f32 --out "$W/gpt-oss-mxfp4-f32.gguf" &&
      rm -rf "$W/gpt-oss-mxfp4-hf" &&
      "$B/llm-engine" gen-model --from "$W/gpt-oss-mxfp4.gguf" --dtype f32 --format hf --out "$W/gpt-oss-mxfp4-hf"; } \
        >"$W/mxfp4.log" 2>&1 || { cat "$W/mxfp4.log"; exit 1; }
    check "gpt-oss mxfp4 file: its experts from their blocks (float GEMVs) vs the CPU on the file's exact values" \
        bash -c "out=\$(env $Q4K_ENV LLM_CUDA_MOE_TC=0 '$E/parity_logits' --model '$W/gpt-oss-mxfp4.gguf' \
            --cpu-model '$W/gpt-oss-mxfp4-f32.gguf' --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 \
            --min-top1 1 2>&1); rc=\$?; echo \"\$out\"
            [ \$rc -eq 0 ] && echo \"\$out\" | grep -q '^cuda: 96 mxfp4 matrices from their own blocks'"
    # the same experts from a Hugging Face directory (U8 blocks and scales, as OpenAI ships gpt-oss), repacked
    # at load into MXFP4 blocks: uploaded from them as the file's are
    check "gpt-oss Hugging Face MXFP4 directory: its experts from the repacked blocks vs the CPU on the same values" \
        bash -c "out=\$(env $Q4K_ENV LLM_CUDA_MOE_TC=0 '$E/parity_logits' --model '$W/gpt-oss-mxfp4-hf' \
            --cpu-model '$W/gpt-oss-mxfp4-f32.gguf' --vocab 512 --positions 40 --gen 8 --chunk 20 --max-diff 1e-3 \
            --min-top1 1 2>&1); rc=\$?; echo \"\$out\"
            [ \$rc -eq 0 ] && echo \"\$out\" | grep -q '^cuda: 96 mxfp4 matrices from their own blocks'"
    check "gpt-oss mxfp4 file: its experts on the tensor cores" env LLM_CUDA_MOE_TC=1 LLM_CUDA_GEMV_MAX=1000 \
        LLM_CUDA_TC_GEMM=0 LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 LLM_CUDA_ATT_DECODE=0 "$E/parity_logits" \
        --model "$W/gpt-oss-mxfp4.gguf" --cpu-model "$W/gpt-oss-mxfp4-f32.gguf" --vocab 512 --positions 40 --gen 8 \
        --chunk 20 --mixed 0 --max-diff 0.3 --min-top1 0.95
    cli_ids "an iq4_xs file" wide-IQ4_XS.gguf "30 iq4_xs" "5 iq4_nl"
    check "q4_K file as q4_m: decode through graphs (on-device argmax)" env $Q4K_ENV CU_EMU_SMS=64 \
        "$E/parity_logits" --model "$W/k256-q4k.gguf" --cpu-model "$W/k256-q4k-f32.gguf" --gen 4 --only-graph 1 \
        --graph-cycles 1 --max-diff 0.06 --min-top1 1
    # The CLI on llama.cpp's own Q4_K_M / Q5_K_M mixtures (Q4_K or Q5_K, Q6_K, Q5_0 / Q5_1 where rows are
    # narrow): llm_backend_prepare leaves every matrix to the upload (no Q8_0 copy made); the greedy ids
    # are those of the CPU, which packs the same values. Then the int8 GEMVs against the CPU's packed blocks.
    for k in 2 3 4 5 6; do
        # (Q2_K: llama.cpp's own Q2_K mixture, which keeps Q3_K and Q6_K in some matrices, all from their blocks
        # on both sides. Its one-type file (q2_K-layers) puts one activation on a rounding boundary at the
        # third position, where the CPU's and the device's float sums round it to neighbouring int8 values:
        # 0.2 in the logits from there on, while the first two positions agree within 2e-6.)
        f=wide-q${k}k.gguf kq=q${k}_K
        [ $k = 2 ] && f=wide-q2_K.gguf kq=q2_K,q3_K,q6_K
        prep=$("$B/llm-engine" generate --model "$W/$f" --prompt-ids 1 --max-tokens 1 --threads 2 2>&1)
        if [[ $prep != *'packed for the cpu'* || ($k == 4 && $prep == *' 0 of them q4_K'*) ||
              ($k == 5 && $prep == *' 0 q5_K at 6'*) || ($k == 6 && $prep == *' 0 q6_K at 7'*) ||
              ($k == 3 && $prep == *' 0 q3_K at 5'*) || ($k == 2 && $prep == *' 0 q2_K at 6'*) ]]; then
            echo "== SKIP q${k} dp4a vs the CPU: this CPU runs q${k}_K as q8_0 (no packed kernels)"
            continue
        fi
        [ $k = 2 ] && cli_ids "a q2_K file" "wide-q2_K.gguf" "20 q2_K" "10 q3_K" "1 q6_K"
        [ $k = 3 ] && cli_ids "a q3_K_M file" "wide-q3_K_M.gguf" "20 q3_K" "8 q4_K" "2 q5_K" "1 q6_K" "5 q5_0"
        [[ $k == [236] ]] || cli_ids "a q${k}_K_M file" "wide-q${k}_K_M.gguf" "26 q${k}_K" "5 q6_K" "5 q5_[01]"
        # (LLM_CUDA_KQ: only that type from its blocks: the narrow rows' Q5_0 / Q5_1 go to both sides as Q8_0)
        check "q${k}_K on int8 activations (dp4a) vs the CPU's packed q${k}_K, same file" env $Q4K_ENV \
            LLM_CUDA_GEMV_DP4A=1 LLM_CUDA_KQ=$kq "$E/parity_logits" --model "$W/$f" --cpu-model "$W/$f" \
            --positions 16 --gen 4 --chunk 1 --mixed 0 --max-diff 1e-3 --min-top1 1
    done
else
    echo "== SKIP q4_K files: no llama.cpp libraries in $LLAMA_LIBDIR (npm ci --prefix bench/llamacpp)"
fi
wait
show_done
echo "emulated CUDA, quick set: $fails failed ($started checks, $SECONDS s)"
[ "$fails" -eq 0 ]
