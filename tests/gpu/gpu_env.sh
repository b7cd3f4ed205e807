# Sourced by tests/gpu/run_parity.sh and bench/gpu_decode.sh on the GPU machine (repo root as cwd, B set):
# library paths for the carried build, a build of whatever is missing, LLM_CUDA_LIB, and SH = the shared
# files (../shared here, $B/shared where prebuild.sh copied them).
[ -d "$B/lib" ] && export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PATH:/usr/local/cuda/bin"
if [ ! -f "$B/libllm_cuda.so" ]; then
    make -s -j16 -f Makefile -f kernels/cuda.mk BUILD="$B" cuda || { echo "FAIL: CUDA build"; exit 1; }
fi
if [ ! -x "$B/tests/gpu/parity_logits" ] || [ ! -x "$B/bench/gpu_decode_bench" ] || [ ! -x "$B/llm-engine" ]; then
    { make -s -j16 BUILD="$B" "$B/llm-engine" "$B/libllm.a" && tests/gpu/build_progs.sh "$B"; } ||
        { echo "FAIL: build (run tests/gpu/prebuild.sh where the build dependencies are, and carry $B)"; exit 1; }
fi
# cuBLAS / cudart not where the rpath says (e.g. only in PyTorch's wheels): look for them once.
if ldd "$B/libllm_cuda.so" | grep -q "not found"; then
    for lib in libcublas.so.13 libcublasLt.so.13 libcudart.so.13; do
        d=$(find / -xdev -name "$lib" -not -path '/proc/*' 2>/dev/null | head -1)
        [ -n "$d" ] && export LD_LIBRARY_PATH="$(dirname "$d"):$LD_LIBRARY_PATH"
    done
    ldd "$B/libllm_cuda.so" | grep "not found" && echo "warning: CUDA libraries still missing"
fi
export LLM_CUDA_LIB="${LLM_CUDA_LIB:-$PWD/$B/libllm_cuda.so}" # preset: a dry run under the emulation
SH=../shared
[ -d "$SH/models" ] || SH=shared
[ -d "$SH/models" ] || SH="$B/shared"
# gen-model --preset llama-3.2-* reads the Llama 3 tokenizer from here (prebuild.sh carries it gzipped)
export LLM_SHARED_DIR="$(cd "$SH" && pwd)"
tj="$SH/tokenizers/llama3/tokenizer.json"
if [ ! -f "$tj" ] && [ -f "$tj.gz" ]; then gunzip -c "$tj.gz" >"$tj"; fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv,noheader || true
