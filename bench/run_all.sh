#!/usr/bin/env bash
# Every benchmark, one after the other (`make bench`). Each prints tessera's
# figure beside a baseline measured in the same run, and peak memory. The
# full set takes tens of minutes on 2 cores (the scipy and PyYAML baselines
# dominate); run a single script for one figure.
#   bash bench/run_all.sh [BUILD_DIR]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
status=0
for b in zarr_read ome_list simulate shifts_load register_bench solve_bench fuse_bench fuse_limit old_tool_bench fuse_kernels mpi_fuse verify; do
  echo "=== bench/$b.sh"
  bash "$HERE/$b.sh" "$BUILD" || { echo "bench/$b.sh failed"; status=1; }
  echo
done
# Registration accuracy against the Cramer-Rao bound (docs/register.md,
# "Against the bound"): 30 seeds here, 60 in the docs' table.
echo "=== bench/register_crb.py"
/usr/bin/python3 "$HERE/register_crb.py" --bin "$BUILD/tessera" --seeds 101-130 --draws 500 ||
  { echo "bench/register_crb.py failed"; status=1; }
# Registration trust on simulated plates with blank tiles (docs/register.md,
# "Refused pairs"): seeds 1-20 here, 1-60 in the docs' table.
echo "=== bench/register_sweep.py"
/usr/bin/python3 "$HERE/register_sweep.py" --bin "$BUILD/tessera" --seeds 1-20 ||
  { echo "bench/register_sweep.py failed"; status=1; }
exit $status
