#!/bin/bash
# Tensor parallelism on a machine with several GPUs (from the repo root): first parity (stories260K split over
# TP GPUs against the CPU backend: prefill, mixed batches, graph decode with the on-device argmax; and the
# scheduler's greedy and sampled requests), then the llama-3.2-3b preset in bf16 on one GPU and split over TP,
# one after the other in the same run (bench/gpu_decode_bench: load, prefill 1x2048, decode at each batch size
# beside the bandwidth floor of what one GPU holds). Figures only; the parity lines say PASS or FAIL.
#   bench/gpu_tp.sh      env: TP=2 DTYPE=bf16 BATCHES=1,32,128 PRESET=llama-3.2-3b BUILD=build-gpu
# A mixture of experts (PRESET=qwen3-30b-a3b DTYPE=q8_0 LAYERS=12: the preset's first 12 layers): its experts
# split by columns, then (EP=1, the same run) dealt out whole to the GPUs (--expert-parallel), after the run on
# one GPU.
# A dry run under the CPU emulation of CUDA: LLM_CUDA_LIB=...emu.so CU_EMU_DEVICES=2 PRESET=tiny-qwen2
# BATCHES=1,8 PREFILL=1x16 PROMPT=8 STEPS=2 bench/gpu_tp.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build-gpu}
WORK=${WORK:-/tmp/llm_gpu_bench}
RES=${OUT:-$WORK}
TP=${TP:-2}
DTYPE=${DTYPE:-bf16}
PRESET=${PRESET:-llama-3.2-3b}
BATCHES=${BATCHES:-1,32,128}
PREFILL=${PREFILL:-1x2048}
PROMPT=${PROMPT:-128}
EP=${EP:-0}
LAYERS=${LAYERS:-}
STEPS=${STEPS:-32}
mkdir -p "$WORK" "$RES"
. tests/gpu/gpu_env.sh
if [ -z "${CU_EMU_DEVICES:-}" ] && command -v nvidia-smi >/dev/null; then
    n=$(nvidia-smi -L | grep -c '^GPU')
    [ "$n" -ge "$TP" ] || { echo "bench/gpu_tp.sh: $n GPU(s) here, TP=$TP wants $TP"; exit 2; }
fi
S260="$SH/models/stories260K/stories260K.bin"
rc=0
echo "== parity: stories260K f32 over $TP GPUs vs the CPU backend"
LLM_CUDA_KV=f32 "$B/tests/gpu/parity_logits" --model "$S260" --positions 64 --gen 16 --chunk 16 --max-diff 1e-3 \
    --min-top1 1 --graph-cycles 1 --tp "$TP" 2>&1 | grep -v '^cuda: \(NVIDIA\|CPU\|uploaded\|KV pool\)' |
    tee "$RES/tp_parity.txt" || rc=1
LLM_CUDA_KV=f32 "$B/tests/gpu/sched_parity" --model "$S260" --gen 12 --max-lp-diff 1e-3 --min-sampled 7 --tp "$TP" \
    2>&1 | tail -3 | tee -a "$RES/tp_parity.txt" || rc=1
model="$WORK/$PRESET-$DTYPE${LAYERS:+-$LAYERS}.gguf"
if [ ! -f "$model" ]; then
    "$B/llm-engine" gen-model --preset "$PRESET" --dtype "$DTYPE" ${LAYERS:+--layers "$LAYERS"} --out "$model" ||
        { echo "error: gen-model"; exit 1; }
fi
: >"$RES/tp_decode.txt"
runs=("1 0" "$TP 0")
[ "$EP" = 1 ] && runs+=("$TP 1")
for r in "${runs[@]}"; do
    set -- $r
    echo "== $PRESET $DTYPE on $1 GPU(s)$([ "$2" = 1 ] && echo ', experts whole')" | tee -a "$RES/tp_decode.txt"
    "$B/bench/gpu_decode_bench" --model "$model" --batches "$BATCHES" --argmax 1 --prompt "$PROMPT" --steps "$STEPS" \
        --prefill "$PREFILL" --tp "$1" --ep "$2" 2>&1 | grep -v '^cuda: \(NVIDIA\|CPU\|uploaded\|KV pool\|tune\)' |
        tee -a "$RES/tp_decode.txt"
done
exit $rc
