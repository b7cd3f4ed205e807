#!/bin/bash
# Builds the CUDA backend against the CPU emulation (kernels/cuda_emu.*) as DIR/libllm_cuda_emu.so.
set -eu -o pipefail
cd "$(dirname "$0")/../.."
D=${1:-build-emu}
mkdir -p "$D"
g++ -std=c++17 -DCU_EMULATE -O1 -g -fPIC -shared -Wall -Wextra -Werror -Wno-unknown-pragmas ${EMU_FLAGS:-} \
    -Iengine -Ikernels -x c++ kernels/cuda_kernels.cu kernels/cuda_attention.cu kernels/cuda_load.cu \
    kernels/cuda_backend.cu kernels/cuda_graph.cu kernels/cuda_sample.cu kernels/cuda_tcgemm.cu kernels/cuda_tune.cu kernels/cuda_moe.cu kernels/cuda_encoder.cu kernels/cuda_tp.cu -x none kernels/cuda_emu.cc -o "$D/libllm_cuda_emu.so"
