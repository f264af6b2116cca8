#!/usr/bin/env bash
# The fusion row kernels per instruction set (SSE2 baseline, AVX2, AVX-512;
# bench/fuse_kernels.c) beside a memory-copy limit of the same bytes.
#   bash bench/fuse_kernels.sh [BUILD_DIR]
BUILD=${1:-build}
source "$(dirname "$0")/lib.sh"
"$BUILD/bench/fuse_kernels"
