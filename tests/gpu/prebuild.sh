#!/bin/bash
# Builds everything the GPU scripts need into one directory (default build-gpu) on a machine with the
# project's build dependencies, so it can travel to a GPU machine that lacks them (libcjson-dev,
# libpcre2-dev, nginx): llm-engine, libllm.a, libllm_cuda.so (when nvcc is here), the parity programs, the
# decode bench, and for serve_gpu.sh the NGINX module, nginx itself and the load generator. pcre2 is linked statically; libcjson.so.1 is copied into DIR/lib (set LD_LIBRARY_PATH
# there, as run_parity.sh and bench/gpu_decode.sh do), and the shared files they read go to DIR/shared.
# Carry DIR (it is git-ignored): run(carry=["build-gpu"], ...).
#   tests/gpu/prebuild.sh [DIR]
set -eu -o pipefail
cd "$(dirname "$0")/../.."
B=${1:-build-gpu}
# The Makefile's LIBS with the libraries that ship static archives linked statically (pcre2, hiredis).
LIBS_MK=$(sed -n 's/^LIBS *= *//p' Makefile)
LIBS_STATIC=""
for l in $LIBS_MK; do
    case $l in
        -lpcre2-8|-lhiredis) LIBS_STATIC="$LIBS_STATIC -Wl,-Bstatic $l -Wl,-Bdynamic" ;;
        *) LIBS_STATIC="$LIBS_STATIC $l" ;;
    esac
done
make -s -j"$(nproc)" BUILD="$B" LIBS="$LIBS_STATIC" "$B/llm-engine" "$B/libllm.a"
# sm_90 machine code only (the H200 needs no PTX fallback), compressed fatbins (the driver unpacks them at
# load; 4x smaller): build-gpu has to fit in what a device call carries.
make -s -j"$(nproc)" -f Makefile -f kernels/cuda.mk BUILD="$B" \
    CUDA_GENCODE="-gencode arch=compute_90,code=sm_90 -Xfatbin -compress-all" cuda
tests/gpu/build_progs.sh "$B" "$LIBS_STATIC"
# The device sampler's check against engine/sampler.c (tests/gpu/sample_check.cc), real kernels.
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$NVCC" ]; then
    NVF="-std=c++17 -O3 -gencode arch=compute_90,code=sm_90 -Xfatbin -compress-all -Werror all-warnings \
         -Xcompiler -Wall,-Wextra,-Werror"
    cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Iengine -c engine/sampler.c -o "$B/obj/sampler_check.o"
    "$NVCC" $NVF -Iengine -Ishm -Ikernels -x cu -c tests/gpu/sample_check.cc -o "$B/obj/sample_check.o"
    "$NVCC" -gencode arch=compute_90,code=sm_90 -o "$B/tests/gpu/sample_check" "$B/obj/sample_check.o" \
        "$B/obj/kernels/cuda_sample.o" "$B/obj/sampler_check.o"
    CUDA_HOME=$(dirname "$(dirname "$NVCC")")
    # The products of 2-130 tokens (tensor-core weight GEMM, cuBLAS path) against a host reference.
    "$NVCC" $NVF -Iengine -Ishm -Ikernels -x cu -c tests/gpu/tcgemm_check.cc -o "$B/obj/tcgemm_check.o"
    "$NVCC" -gencode arch=compute_90,code=sm_90 -o "$B/tests/gpu/tcgemm_check" "$B/obj/tcgemm_check.o" \
        "$B/obj/kernels/cuda_kernels.o" "$B/obj/kernels/cuda_tcgemm.o" \
        -L"$CUDA_HOME/lib64" -Xlinker -rpath,"$CUDA_HOME/lib64" -lcublas -lcublasLt
    # Kernel-level timings (bench/gpu_kernels_bench.cu) linked with the backend's kernel objects.
    "$NVCC" $NVF -Iengine -Ishm -Ikernels -c bench/gpu_kernels_bench.cu -o "$B/obj/gpu_kernels_bench.o"
    "$NVCC" -gencode arch=compute_90,code=sm_90 -o "$B/bench/gpu_kernels_bench" "$B/obj/gpu_kernels_bench.o" \
        "$B/obj/kernels/cuda_kernels.o" "$B/obj/kernels/cuda_tcgemm.o" "$B/obj/kernels/cuda_attention.o" \
        "$B/obj/kernels/cuda_sample.o" \
        -L"$CUDA_HOME/lib64" -Xlinker -rpath,"$CUDA_HOME/lib64" -lcublas -lcublasLt
fi
mkdir -p "$B/lib"
cj=$(ldconfig -p | awk '/libcjson\.so\.1 .*x86-64/ && !f {print $NF; f = 1}') # no early exit: SIGPIPE + pipefail
if [ -n "$cj" ]; then cp -L "$cj" "$B/lib/"; fi
# ../shared does not travel to the GPU machine: take the small files the GPU scripts read.
mkdir -p "$B/shared/models/stories260K" "$B/shared/peers"
cp ../shared/models/stories260K/stories260K.bin ../shared/models/stories260K/tok512.bin \
    ../shared/models/stories260K/stories260K.gguf "$B/shared/models/stories260K/"
cp ../shared/peers/torch_cudagraph_decode.py "$B/shared/peers/"
# GGUF Q4_K / Q5_K / Q6_K test files for run_parity.sh's q4k / q5k cases, by llama.cpp's quantiser (bench/llamacpp; none on
# the GPU machine): as tests/gpu/emu_quick.sh part 12 makes them (their f32 copies are made there: gen-model)
LLAMA_LIBDIR=bench/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ -d "$LLAMA_LIBDIR" ]; then
    Q=$B/shared/models/q4k
    mkdir -p "$Q"
    make -s BUILD="$B" LIBS="$LIBS_STATIC" "$B/parity/pad_model" "$B/parity/ggml_ref"
    python3 tests/gpu/emu_hf_model.py "$Q/k256" 32 k256 >/dev/null
    "$B/llm-engine" gen-model --from "$Q/k256" --dtype f32 --out "$Q/k256-f32.gguf" >/dev/null 2>&1
    "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$Q/k256-f32.gguf" "$Q/k256-q4k.gguf" q4_K_M-layers >/dev/null 2>&1
    "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$Q/k256-f32.gguf" "$Q/k256-q6k.gguf" q6_K-layers >/dev/null 2>&1
    "$B/parity/pad_model" ../shared/models/stories260K/stories260K.bin "$Q/wide.gguf" >/dev/null 2>&1
    "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$Q/wide.gguf" "$Q/wide-q4k.gguf" q4_K_M-layers >/dev/null 2>&1
    "$B/parity/ggml_ref" quantize "$LLAMA_LIBDIR" "$Q/wide.gguf" "$Q/wide-q5k.gguf" q5_K_M-layers >/dev/null 2>&1
    rm -rf "$Q/k256" "$Q/k256-f32.gguf" "$Q/wide.gguf"
fi
# the Llama 3 tokenizer: gen-model --preset llama-3.2-3b writes it into the GGUF (gpu_env.sh sets LLM_SHARED_DIR)
mkdir -p "$B/shared/tokenizers/llama3"
# (tokenizer.json gzipped: 9 MB -> 2.3 MB of the carry's 64 MiB; gpu_env.sh unpacks it on the GPU machine)
cp ../shared/tokenizers/llama3/tokenizer_config.json "$B/shared/tokenizers/llama3/"
gzip -9 -c ../shared/tokenizers/llama3/tokenizer.json >"$B/shared/tokenizers/llama3/tokenizer.json.gz"
# For serve_gpu.sh: the module, the load generator and Debian's nginx (the build the module is compiled
# against) with every library it and the module load, and the dynamic loader to start it with, so that
# it runs whatever C library the GPU machine has.
ngx_module/build.sh "$B" >/dev/null
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -o "$B/serve_load" bench/serve_load/serve_load.c
mkdir -p "$B/nginx/lib"
cp -L "$(command -v nginx)" "$B/nginx/nginx"
for f in $( { ldd "$B/nginx/nginx"; ldd "$B/ngx_http_llm_module.so"; } | awk '/=>/ {print $3} /ld-linux/ {print $1}' |
           sort -u); do
    case $f in
        */ld-linux*) cp -L "$f" "$B/nginx/ld-linux-x86-64.so.2" ;;
        /*) cp -L "$f" "$B/nginx/lib/" ;;
    esac
done
# What only the build needed stays behind: a carry holds 64 MiB in all (objects and nginx's source tree are
# ~16 MB; gpu_env.sh rebuilds only missing final targets, never from objects).
rm -rf "$B/obj" "$B/nginx-src" "$B"/serve-* "$B/t"
# Host debug info is half the programs' size (-g): the device session reads logs, not core dumps.
strip --strip-debug "$B/llm-engine" "$B/libllm.a" "$B/libllm_cuda.so" "$B/ngx_http_llm_module.so" "$B/serve_load" \
    "$B"/tests/gpu/* "$B"/bench/* 2>/dev/null || true
du -sh "$B"
kb=$(du -sk "$B" | cut -f1)
[ "$kb" -le $((62 * 1024)) ] || echo "warning: $B is $((kb / 1024)) MiB: over what a device call can carry (64 MiB)"
ls -la "$B/llm-engine" "$B"/libllm_cuda.so "$B/tests/gpu" "$B/bench" "$B/lib" "$B/nginx" "$B/nginx/lib" 2>&1 |
    sed 's/^/  /'
