#!/bin/bash
# Compiles the GPU test and bench programs against BUILD/libllm.a: build_progs.sh BUILD [LIBS]
set -eu -o pipefail
cd "$(dirname "$0")/../.."
B=$1
LIBS=${2:-$(sed -n 's/^LIBS *= *//p' Makefile)}
CFLAGS="-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 -Iengine -Ishm"
mkdir -p "$B/tests/gpu" "$B/bench"
for p in tests/gpu/parity_logits tests/gpu/sched_parity tests/gpu/logits_dump bench/gpu_decode_bench; do
    cc $CFLAGS -o "$B/$p" "$p.c" "$B/libllm.a" $LIBS
done
