#!/bin/bash
# Builds everything the GPU scripts need into one directory (default build-gpu) on a machine with the
# project's build dependencies, so it can travel to a GPU machine that lacks them (libcjson-dev,
# libpcre2-dev): llm-engine, libllm.a, libllm_cuda.so (when nvcc is here), the parity programs and the
# decode bench. pcre2 is linked statically; libcjson.so.1 is copied into DIR/lib (set LD_LIBRARY_PATH
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
make -s -j"$(nproc)" -f Makefile -f kernels/cuda.mk BUILD="$B" cuda
tests/gpu/build_progs.sh "$B" "$LIBS_STATIC"
mkdir -p "$B/lib"
cj=$(ldconfig -p | awk '/libcjson\.so\.1 .*x86-64/ {print $NF; exit}')
if [ -n "$cj" ]; then cp -L "$cj" "$B/lib/"; fi
# ../shared does not travel to the GPU machine: take the small files the GPU scripts read.
mkdir -p "$B/shared/models/stories260K" "$B/shared/peers"
cp ../shared/models/stories260K/stories260K.bin ../shared/models/stories260K/tok512.bin "$B/shared/models/stories260K/"
cp ../shared/peers/torch_cudagraph_decode.py "$B/shared/peers/"
du -sh "$B"
ls -la "$B/llm-engine" "$B"/libllm_cuda.so "$B/tests/gpu" "$B/bench" "$B/lib" 2>&1 | sed 's/^/  /'
