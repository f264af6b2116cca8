#!/usr/bin/env bash
# The device checks of the CUDA backend (docs/gpu.md), in one run of a few
# minutes on a machine with a CUDA device (written for an H100/H200,
# sm_90), from the repository root:
#   tests/gpu/run_device_checks.sh [BUILD_DIR]     (default build-gpu)
# 1. builds with -DTESSERA_CUDA=ON for sm_90;
# 2. test_gpu must PASS (not skip): the row kernels, whole blocks at every
#    level and the batched cuFFT surfaces against the CPU / FFTW;
# 3. test_gpu_cli: fuse --device gpu writes the CPU's stores, --json says gpu;
# 4. bench/gpu_bench.sh: a 6x5 well of 2048^2 tiles on cpu and gpu, diff -r,
#    throughput, the device's limits.
# Exit 0 only if every check passed. Output: what to paste into the issue.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
fails=0
step() { echo; echo "== $*"; }

step "build (-DTESSERA_CUDA=ON, sm_90)"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    >"$BUILD.configure.log" 2>&1 || { tail -20 "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" -j "$(nproc)" --target tessera_cli test_gpu test_fuse_kernels zarr_tool \
    >"$BUILD.build.log" 2>&1 || { tail -40 "$BUILD.build.log"; exit 1; }
echo "built"

step "device"
"$BUILD/tessera" info --devices || { echo "FAIL: no usable device"; fails=$((fails + 1)); }

step "test_gpu (GPU vs CPU, byte for byte; must not skip)"
"$BUILD/tests/test_gpu"
rc=$?
if [ $rc = 77 ]; then echo "FAIL: test_gpu skipped: no usable device"; fails=$((fails + 1));
elif [ $rc != 0 ]; then echo "FAIL: test_gpu exit $rc"; fails=$((fails + 1)); fi

step "test_fuse_kernels, test_gpu_cli (fuse --device gpu == cpu)"
(cd "$BUILD" && ctest --output-on-failure -R 'unit/test_fuse_kernels|interop/test_gpu_cli') || fails=$((fails + 1))
grep -q "on the GPU writes the CPU's bytes" "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null \
    || { echo "FAIL: test_gpu_cli did not run on the GPU"; fails=$((fails + 1)); }

step "bench/gpu_bench.sh (6x5 x 2048^2, cpu vs gpu)"
bash bench/gpu_bench.sh "$BUILD" "$(mktemp -d /tmp/gpu_bench.XXXXXX)" || fails=$((fails + 1))

echo
if [ $fails = 0 ]; then echo "DEVICE CHECKS PASSED"; else echo "DEVICE CHECKS FAILED: $fails"; fi
exit $((fails > 0))
