#!/bin/bash
# A whole GPU session in one device call, for when the device time is short (15 minutes, start included):
#   run(command="tests/gpu/session.sh", carry=["build-gpu"], timeout_s=570)
# Runs, in order of what the figures need, each part under its own time limit within BUDGET_S seconds
# (after a check of the kernel tuning, which turns it off for the session if it fails):
#  1. parity on stories260K (run_parity.sh --skip-hf, no sanitizers): F32/F16 logits vs the CPU backend,
#     graphs + on-device argmax, the scheduler over both backends, the CLI's greedy text;
#  2. bench/gpu_decode.sh: the llama-3.2-3b preset in bf16, q8_0, q4_0 beside the bandwidth floor, graphs off,
#     and the PyTorch + CUDA Graph peer;
#  3. tests/gpu/serve_gpu.sh on the bf16 model the benchmark generated: nginx + module + serve --backend cuda
#     under the load generator;
#  4. the random-3B Hugging Face parity (transformers).
# PARTS picks others and their order: parity bench profile serve parity_hf sanitize (with compute-sanitizer)
# kernels (bench/gpu_kernels_bench: every kernel alone, GB/s or TFLOP/s per matrix shape and dtype) moe (the
# Qwen3-30B-A3B shape's first MOE_LAYERS=16 layers in bf16 and q8_0 through bench/gpu_decode.sh, no peer) q4k
# (the 3B preset written in GGUF Q4_K and Q5_K by gen-model: its matrices on the device as CU_Q4_M / CU_Q5_M, 5 /
# 6 bits a weight; the main rows and the dp4a rows only; KQ_DTYPES="q3_K q2_K" takes those instead, CU_Q3 / CU_Q2_M)
# spec (draft-model speculation: the 3B preset in bf16 with its q4_0 copy as draft, beside plain decoding and
# n-gram drafts, bench/spec_draft.sh) tp (a machine with several GPUs: bench/gpu_tp.sh, stories260K split over TP=2
# GPUs against the CPU backend, then the 3B preset in bf16 on one GPU and split over TP, side by side) tp_moe
# (the same with Qwen3-30B-A3B's first 12 layers in q8_0: on one GPU, experts split by columns, experts whole).
# Every part's output is in $OUT/<part>.log; $OUT/session.txt has one line per part (status, seconds).
set -u -o pipefail
cd "$(dirname "$0")/../.."
RES=${OUT:-/tmp/llm_gpu_session}
BUDGET_S=${BUDGET_S:-550}
mkdir -p "$RES"
T0=$(date +%s)
part() { # name cap_s command...
    local name=$1 cap=$2; shift 2
    local left=$((BUDGET_S - ($(date +%s) - T0)))
    [ "$cap" -gt "$left" ] && cap=$left
    if [ "$cap" -lt 20 ]; then
        echo "$name: skipped (no time left)" | tee -a "$RES/session.txt"
        return
    fi
    local t=$(date +%s)
    echo "== $name (at most $cap s)"
    timeout -k 5 "$cap" "$@" > "$RES/$name.log" 2>&1
    local rc=$?
    local st=ok
    { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && st="timed out after $cap s"
    [ $rc -ne 0 ] && [ "$st" = ok ] && st="failed (exit $rc)"
    echo "$name: $st, $(($(date +%s) - t)) s" | tee -a "$RES/session.txt"
    tail -n 40 "$RES/$name.log"
    return $rc
}
export WORK=/tmp/llm_gpu_bench
# The backend's kernel tuning runs every product path at start. It is new on the device: should a path fault
# here, every later part would fail at init, so it is tried first on stories260K (every batch size) and
# turned off for the rest of the session if that fails.
part tune_smoke 60 env SANITIZE=0 OUT="$RES/tune_smoke" tests/gpu/run_parity.sh --only-tune ||
    { export LLM_CUDA_TUNE=0; echo "tune_smoke failed: kernel tuning off for this session" | tee -a "$RES/session.txt"; }
for p in ${PARTS:-parity bench serve parity_hf}; do
    case $p in
    parity)    part parity 120 env SANITIZE=0 OUT="$RES/parity" tests/gpu/run_parity.sh --skip-hf ;;
    bench)     part bench 320 env OUT="$RES/bench" DTYPES="bf16 q8_0 q4_0" bench/gpu_decode.sh ;;
    q4k)       part q4k 240 env OUT="$RES/q4k" DTYPES="${KQ_DTYPES:-q4_K q5_K}" PEER=0 PEER_HF=0 TC=0 PDL=0 FUSE=0 SHAPES= GRAPHS_OFF=0 \
                   LOGITS=0 SAMPLE=0 bench/gpu_decode.sh ;;
    profile)   part profile 240 env OUT="$RES/profile" tests/gpu/profile.sh ;;
    serve)     part serve 150 env MODEL=/tmp/llm_gpu_bench/llama-3.2-3b-bf16.gguf WORK=/tmp/llm_serve_gpu \
                   tests/gpu/serve_gpu.sh ;;
    parity_hf) part parity_hf 200 env OUT="$RES/parity_hf" SANITIZE=0 tests/gpu/run_parity.sh ;;
    sanitize)  part sanitize 200 env OUT="$RES/sanitize" tests/gpu/run_parity.sh --skip-hf ;;
    kernels)   part kernels 120 env LD_LIBRARY_PATH="${BUILD:-build-gpu}/lib:${LD_LIBRARY_PATH:-}" \
                   "${BUILD:-build-gpu}/bench/gpu_kernels_bench" ;;
    spec)      part spec 200 env BACKEND=cuda BUILD="${BUILD:-build-gpu}" PEER=0 PRESET=llama-3.2-3b TDTYPE=bf16 DDTYPE=q4_0 \
                   MODELS=/tmp/llm_gpu_bench THREADS=4 REPS=2 bash bench/spec_draft.sh ;;
    moe)       part moe 240 env OUT="$RES/moe" PRESET=qwen3-30b-a3b LAYERS=${MOE_LAYERS:-16} DTYPES="bf16 q8_0" \
                   BATCHES=1,8,32,128 PEER=0 PEER_HF=0 TC=0 PDL=0 FUSE=0 DP4A=0 SHAPES= GRAPHS_OFF=0 LOGITS=0 SAMPLE=0 \
                   bench/gpu_decode.sh ;;
    tp)        part tp 240 env OUT="$RES/tp" bench/gpu_tp.sh ;;
    tp_moe)    part tp_moe 300 env OUT="$RES/tp_moe" PRESET=qwen3-30b-a3b DTYPE=q8_0 LAYERS=12 EP=1 BATCHES=1,32,128 \
                   bench/gpu_tp.sh ;;
    *)         echo "unknown part $p" ;;
    esac
done
echo "session: $(($(date +%s) - T0)) s"
