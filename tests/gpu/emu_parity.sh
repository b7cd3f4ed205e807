#!/bin/bash
# The CUDA backend's kernels and host code under the CPU emulation of CUDA (kernels/cuda_emu.*), against the
# CPU backend: no GPU needed, a few minutes on 2 cores. Checks index math, barriers/shuffles (a barrier not
# reached by every thread aborts), reads of unwritten memory (NaN-poisoned) and, with ASAN=1, out-of-bounds
# accesses, leaks, misaligned loads and other undefined behaviour. Not a check of speed or of real-device
# behaviour (async streams, cuBLAS itself).
#   tests/gpu/emu_parity.sh          (BUILD=build-gpu holds libllm.a and the parity program; ASAN=1 optional)
set -u -o pipefail
cd "$(dirname "$0")/../.."
B=${BUILD:-build-gpu}
E=${EMU_DIR:-build-emu}
W=${WORK:-/tmp/llm_emu_parity}
mkdir -p "$W"
# Always (incremental): a stale libllm.a would miss header changes such as llm_backend.forward_device.
make -s -j"$(nproc)" BUILD="$B" "$B/llm-engine" "$B/libllm.a" || exit 1
P="$E/parity_logits"
if [ "${ASAN:-0}" = 1 ]; then
    # UBSan too: its alignment check catches a misaligned vector load, which a GPU would fault on.
    SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    EMU_FLAGS="$SAN" tests/gpu/emu_build.sh "$E" || exit 1
    CAP_FLAGS="$SAN"
    PROG_FLAGS="-O1 $SAN"
else
    tests/gpu/emu_build.sh "$E" || exit 1
    CAP_FLAGS=""
    PROG_FLAGS="-O2"
fi
for prog in parity_logits sched_parity; do
    cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g $PROG_FLAGS -Iengine -Ishm -o "$E/$prog" \
        tests/gpu/$prog.c "$B/libllm.a" $(sed -n 's/^LIBS *= *//p' Makefile) || exit 1
done
export LLM_CUDA_LIB="$PWD/$E/libllm_cuda_emu.so"
S260=../shared/models/stories260K/stories260K.bin
for dt in f16 q8_0 q4_0; do
    "$B/llm-engine" gen-model --from "$S260" --dtype $dt --out "$W/s260-$dt.gguf" >/dev/null 2>&1 || exit 1
done
python3 tests/gpu/emu_hf_model.py "$W/hf" >/dev/null || exit 1
python3 tests/gpu/emu_hf_model.py "$W/hf128" 128 >/dev/null || exit 1
fails=0
# The emulation's stream capture itself (frozen arguments, replay-time reads, illegal calls inside a capture).
echo "== emulated stream capture"
g++ -std=c++17 -DCU_EMULATE -O1 -g -Wall -Wextra -Werror -Wno-unknown-pragmas $CAP_FLAGS -Ikernels -Iengine \
    -x c++ tests/gpu/emu_capture.cc -x none kernels/cuda_emu.cc -o "$E/emu_capture" || exit 1
"$E/emu_capture" 2>/dev/null | grep -v '^ok' || fails=$((fails + 1))
# The device sampler (kernels/cuda_sample.cu) against engine/sampler.c, kernel level: the same token, logprob
# and top-n for every pattern x parameter case (vocabularies 512 and 128,256).
echo "== device sampler vs engine/sampler.c"
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 $CAP_FLAGS -Iengine -c engine/sampler.c -o "$E/sampler.o" &&
g++ -std=c++17 -DCU_EMULATE -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas $CAP_FLAGS -Ikernels -Iengine -Ishm \
    -x c++ tests/gpu/sample_check.cc kernels/cuda_sample.cu -x none kernels/cuda_emu.cc "$E/sampler.o" \
    -o "$E/sample_check" || exit 1
out=$("$E/sample_check" 2>&1)
echo "$out" | grep 'FAIL\|cases'
echo "$out" | grep -q '^PASS$' || fails=$((fails + 1))
# The matrix products of 2-130 tokens (tensor-core weight-only GEMM and cuBLAS path) against an exact host
# reference, every weight type, K split over 1-16 blocks.
echo "== tensor-core weight GEMM and cuBLAS path vs a host reference"
g++ -std=c++17 -DCU_EMULATE -O2 -g -Wall -Wextra -Werror -Wno-unknown-pragmas $CAP_FLAGS -Ikernels -Iengine -Ishm \
    -x c++ tests/gpu/tcgemm_check.cc kernels/cuda_kernels.cu kernels/cuda_tcgemm.cu -x none kernels/cuda_emu.cc \
    -o "$E/tcgemm_check" || exit 1
out=$("$E/tcgemm_check" 2>&1)
echo "$out" | grep 'FAIL\|products'
echo "$out" | grep -q '^PASS$' || fails=$((fails + 1))
check() { # name, args...
    local name=$1; shift
    echo "== $name"
    if "$P" "$@" 2>&1 | grep -v '^cuda:'; then :; else fails=$((fails + 1)); fi
}
# GEMV path only (chunks of 8): the same float32 math as the CPU, so tight bounds.
LLM_CUDA_KV=f32 check "stories260K f32, gemv" --model "$S260" --positions 64 --gen 20 --chunk 8 --max-diff 1e-4 --min-top1 1
LLM_CUDA_GEMV_MAX=8 LLM_CUDA_KV=f32 check "llama3-style hf bf16, gemv" --model "$W/hf" --positions 160 --gen 8 --chunk 8 --max-diff 1e-1 --min-top1 0.98
# head_dim 128 (Llama 3.2 3B's): the decode attention kernel with 4 dimensions per lane, f16 and f32 KV;
# the graph part decodes 1-20 sequences per step through it.
check "llama3-style hf bf16, head_dim 128 (f16 kv)" --model "$W/hf128" --positions 96 --gen 12 --chunk 8 --max-diff 1e-1 --min-top1 0.98
LLM_CUDA_KV=f32 CU_EMU_SMS=64 check "llama3-style hf bf16, head_dim 128, graphs" --model "$W/hf128" --positions 40 --gen 4 --chunk 8 --only-graph 1 --graph-cycles 3 --max-diff 1e-1 --min-top1 0.98
# Tensor-core prefill attention (attention_tc_kernel: steps with > 1 token per item, head_dim % 16 == 0; the
# HF checks above already go through it). All-f32 copies of the HF models, so the kernel's half rounding of
# Q, K, V and P is the only difference from the CPU (the scalar kernel there: ~7e-6; this one ~3e-3):
# head_dim 32 (items of 21 tokens = 63 rows) and 128 (items of 21 tokens), f32 and f16 KV, 64 SMs for
# several splits per item; then the scalar kernel (LLM_CUDA_ATT_TC=0) with its own tight bound.
for m in hf hf128; do
    "$B/llm-engine" gen-model --from "$W/$m" --dtype f32 --out "$W/$m-f32.gguf" >/dev/null 2>&1 || exit 1
done
LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f32 check "tensor-core prefill attention, head_dim 32, f32 kv" --model "$W/hf-f32.gguf" --positions 96 --gen 4 --chunk 40 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f16 check "tensor-core prefill attention, head_dim 32, f16 kv" --model "$W/hf-f32.gguf" --positions 96 --gen 4 --chunk 40 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f32 check "tensor-core prefill attention, head_dim 128, f32 kv" --model "$W/hf128-f32.gguf" --positions 96 --gen 4 --chunk 48 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f16 CU_EMU_SMS=64 check "tensor-core prefill attention, head_dim 128, f16 kv, 64 SMs" --model "$W/hf128-f32.gguf" --positions 96 --gen 4 --chunk 48 --max-diff 1e-2 --min-top1 0.98
# The mma.sync kernel (LLM_CUDA_ATT_TC=2, f16 KV only): S and P in registers, K/V tiles double-buffered by
# cp.async; on 1 SM a split holds several 64-position tiles, so both buffers are reused.
LLM_CUDA_ATT_TC=2 LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f16 check "mma.sync prefill attention, head_dim 32, f16 kv" --model "$W/hf-f32.gguf" --positions 96 --gen 4 --chunk 40 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_ATT_TC=2 LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f16 CU_EMU_SMS=64 check "mma.sync prefill attention, head_dim 128, f16 kv, 64 SMs" --model "$W/hf128-f32.gguf" --positions 96 --gen 4 --chunk 48 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_ATT_TC=2 LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f16 CU_EMU_SMS=1 check "mma.sync prefill attention, head_dim 128, f16 kv, 1 SM (long splits)" --model "$W/hf128-f32.gguf" --positions 200 --gen 4 --chunk 100 --max-diff 1e-2 --min-top1 0.98
LLM_CUDA_ATT_TC=0 LLM_CUDA_GEMV_MAX=64 LLM_CUDA_KV=f32 check "scalar prefill attention (LLM_CUDA_ATT_TC=0), head_dim 128, f32 kv" --model "$W/hf128-f32.gguf" --positions 96 --gen 4 --chunk 48 --max-diff 1e-4 --min-top1 1
# cuBLAS path (chunks > 8 tokens): activations rounded to the weights' half type.
LLM_CUDA_KV=f32 check "stories260K f32, gemm" --model "$S260" --positions 64 --gen 8 --chunk 24 --max-diff 1e-4 --min-top1 1
check "stories260K f16 (f16 kv)" --model "$W/s260-f16.gguf" --positions 48 --gen 16 --chunk 20 --max-diff 5e-2 --min-top1 0.98
check "stories260K q8_0 (cpu quantises activations)" --model "$W/s260-q8_0.gguf" --positions 48 --gen 16 --chunk 20 --max-diff 0.5 --min-top1 0.95
check "stories260K q4_0 (cpu quantises activations)" --model "$W/s260-q4_0.gguf" --positions 48 --gen 16 --chunk 20 --max-diff 0.6 --min-top1 0.95
# LLM_CUDA_TC_GEMM=64: steps of 2-64 tokens through the tensor-core weight-only GEMM (cuda_tcgemm.cu) instead
# of cuBLAS, same rounding of the activations, the weights dequantised in shared memory: the same bounds as
# the cuBLAS checks (for Q8_0/Q4_0 it is the default, so the stories260K q8_0/q4_0 checks above use it too). The head_dim-128 model's widths (192, 320, 768) are multiples of 64, so every matrix
# takes it; stories260K's hidden width (172) is not, so its down projection stays on cuBLAS beside it.
for dt in q8_0 q4_0; do
    "$B/llm-engine" gen-model --from "$W/hf128" --dtype $dt --out "$W/hf128-$dt.gguf" >/dev/null 2>&1 || exit 1
done
LLM_CUDA_TC_GEMM=64 check "tensor-core weight GEMM, head_dim-128 model bf16" --model "$W/hf128" --positions 64 --gen 8 --chunk 20 --max-diff 1e-1 --min-top1 0.98
LLM_CUDA_TC_GEMM=64 check "tensor-core weight GEMM, head_dim-128 model q8_0" --model "$W/hf128-q8_0.gguf" --positions 64 --gen 8 --chunk 20 --max-diff 0.5 --min-top1 0.95
LLM_CUDA_TC_GEMM=64 check "tensor-core weight GEMM, head_dim-128 model q4_0" --model "$W/hf128-q4_0.gguf" --positions 64 --gen 8 --chunk 20 --max-diff 0.6 --min-top1 0.95
LLM_CUDA_TC_GEMM=64 check "tensor-core weight GEMM beside cuBLAS, stories260K f16" --model "$W/s260-f16.gguf" --positions 48 --gen 16 --chunk 20 --max-diff 5e-2 --min-top1 0.98
# LLM_CUDA_GEMV_DP4A=1: the GEMV on int8 activations quantised as the CPU does it, so one token per step
# (where the CPU takes its Q8 path too) must agree to float rounding.
LLM_CUDA_KV=f32 LLM_CUDA_GEMV_DP4A=1 check "stories260K q8_0, int8-activation GEMV" --model "$W/s260-q8_0.gguf" --positions 24 --gen 8 --chunk 1 --mixed 0 --max-diff 1e-4 --min-top1 1
LLM_CUDA_KV=f32 LLM_CUDA_GEMV_DP4A=1 check "stories260K q4_0, int8-activation GEMV" --model "$W/s260-q4_0.gguf" --positions 24 --gen 8 --chunk 1 --mixed 0 --max-diff 1e-4 --min-top1 1
# CUDA Graphs (kernels/cuda_graph.cu): part 4 of parity_logits decodes 1/3/6/13/20 of 20 sequences per step
# (buckets 1, 4, 8, 16, 32; 16 and 32 capture cuBLAS) over positions crossing 64, 128 and 256. 64 emulated SMs
# give buckets 1-16 several attention splits, so the split classes change along the way. The counters printed
# with LLM_CUDA_STATS=1 must show replays in every bucket (graphs really ran); with CU_EMU_CAPTURE_FAIL=1 the
# capture fails, which must be reported once and leave every step eager with the same results.
check_graph() { # name, expect (replays|fallback), args...
    local name=$1 expect=$2; shift 2
    echo "== $name"
    local out
    out=$(CU_EMU_SMS=64 LLM_CUDA_STATS=1 "$P" --gen 4 --only-graph 1 "$@" 2>&1)
    local rc=$?
    echo "$out" | grep -v '^cuda: \(CPU\|uploaded\|KV pool\)'
    local stats
    stats=$(echo "$out" | grep '^cuda: graphs ')
    if [ $rc -ne 0 ]; then
        fails=$((fails + 1))
    elif [ "$expect" = replays ]; then
        for bk in 1 4 8 16 32; do
            if ! echo "$stats" | grep -q "^cuda: graphs on: .*[ (]$bk:[1-9]"; then
                echo "  <-- FAIL: no graph replays in bucket $bk"; fails=$((fails + 1)); break
            fi
        done
    elif [ "$(echo "$out" | grep -c 'run without graphs from now on')" -ne 1 ] ||
         ! echo "$stats" | grep -q '^cuda: graphs off: 0 captured, 0 replays'; then
        echo "  <-- FAIL: expected one fallback message and no replays"; fails=$((fails + 1))
    fi
}
LLM_CUDA_KV=f32 check_graph "stories260K f32, decode through graphs" replays --model "$S260" --graph-cycles 10 --max-diff 1e-4 --min-top1 1
check_graph "stories260K q8_0, decode through graphs (tensor-core GEMM and dequantised cuBLAS captured)" replays --model "$W/s260-q8_0.gguf" --graph-cycles 3 --max-diff 0.5 --min-top1 0.95
LLM_CUDA_TC_GEMM=64 check_graph "head_dim-128 q4_0, decode through graphs (tensor-core weight GEMM captured)" replays --model "$W/hf128-q4_0.gguf" --graph-cycles 2 --max-diff 0.6 --min-top1 0.95
# gpt-oss (tiny-gpt-oss, F32: sinks in the register decode kernel and the merge, biases, windows, the clamped
# SwiGLU) through graphs with the on-device argmax (measured 7.4e-6).
"$B/llm-engine" gen-model --preset tiny-gpt-oss --dtype f32 --out "$W/gpt-oss-f32.gguf" --seed 5 >/dev/null 2>&1 || exit 1
LLM_CUDA_KV=f32 LLM_CUDA_ATT_TC=0 check_graph "gpt-oss f32, decode through graphs" replays --model "$W/gpt-oss-f32.gguf" --vocab 512 --graph-cycles 1 --max-diff 1e-3 --min-top1 1
# The scheduler end to end on both backends (tests/gpu/sched_parity.c): mixed steps, then decode steps
# through graphs with the plain-greedy rows as on-device argmax ids and every other row sampled on the
# device; greedy requests must match exactly, seeded sampled ones in at least 7 of 8 (all 8 when written).
echo "== scheduler over the CUDA backend vs the CPU backend"
out=$(LLM_CUDA_STATS=1 LLM_CUDA_KV=f32 "$E/sched_parity" --model "$S260" --gen 24 --max-lp-diff 1e-4 --min-sampled 7 2>&1)
rc=$?
echo "$out" | grep -v '^cuda: \(CPU\|uploaded\|KV pool\)'
if [ $rc -ne 0 ] || ! echo "$out" | grep -q '^cuda: graphs on: .*[1-9][0-9]* replays.*; [1-9][0-9]* steps with on-device argmax, [1-9][0-9]* rows sampled on the device'; then
    echo "  <-- FAIL"; fails=$((fails + 1))
fi
# Out of device memory (sched_parity --oom): an oversized KV pool, a device capped below a run's peak, and
# each device allocation a run makes after init refused in turn (22 runs): every refusal must come back as
# "out of memory" to the scheduler (or be absorbed), which shrinks its steps; the same greedy tokens each time.
echo "== scheduler over the CUDA backend out of device memory"
out=$(LLM_CUDA_KV=f32 "$E/sched_parity" --model "$S260" --gen 24 --max-lp-diff 1e-4 --min-sampled 7 --oom 1 \
    --oom-sweep 4 2>&1)
rc=$?
echo "$out" | grep -v '^cuda: \(CPU\|uploaded\|KV pool of\)' | grep -v 'refused), .* identical [0-9]* of [0-9]* (.*wanted)$'
if [ $rc -ne 0 ]; then echo "  <-- FAIL"; fails=$((fails + 1)); fi
LLM_CUDA_KV=f32 CU_EMU_CAPTURE_FAIL=1 check_graph "stories260K f32, capture fails: eager fallback" fallback --model "$S260" --graph-cycles 10 --max-diff 1e-4 --min-top1 1
echo "emulated parity: $fails failed"
[ "$fails" -eq 0 ]
