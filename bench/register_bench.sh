#!/usr/bin/env bash
# Pairwise registration, in one run on the same simulated plate (known truth):
#   - tessera estimate, 1 thread and THREADS threads: pairs/s end to end
#     (tile decode, registration, solve, YAML), peak RSS, pairwise error;
#   - scikit-image phase_cross_correlation on the same strips
#     (bench/register_bench.py): pairs/s of the correlation alone, error.
#   bash bench/register_bench.sh [BUILD_DIR] [THREADS]   (default build, 2)
BUILD=${1:-build}
THREADS=${2:-2}
source "$(dirname "$0")/lib.sh"

run() { # label, extra args...
  local label=$1; shift
  local best="" bestrss=""
  for _ in 1 2 3; do  # best of 3 (the machine is shared)
    /usr/bin/time -f "%M" -o "$WORK/rss" "$T" estimate "$WORK/plate.zarr" -o "$WORK/shifts.yaml" \
      --overlap "$OVERLAP" --json "$@" > "$WORK/est.json"
    pps=$("$PY" -c "import json;print(json.load(open('$WORK/est.json'))['pairs_per_second'])")
    if [ -z "$best" ] || "$PY" -c "import sys; sys.exit(not $pps > $best)"; then
      best=$pps; bestrss=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss"); fi
  done
  echo "tessera $label: $best pairs/s end to end (decode + register + solve + write), peak_rss_mb=$bestrss"
}

for cfg in "8x6 512x512 64" "5x4 1024x1024 128"; do
  set -- $cfg
  GRID=$1 TILE=$2 OVERLAP=$3
  echo "== $GRID tiles of $TILE uint16, overlap $OVERLAP px, jitter 4, noise 20, 5% blank"
  "$T" simulate -o "$WORK/plate.zarr" --grid "$GRID" --tile "$TILE" --overlap "$OVERLAP" --jitter 4 \
    --blank 0.05 --format 0.4 --truth "$WORK/truth.yaml" --seed 2 >/dev/null
  run "threads 1" --threads 1
  run "threads $THREADS" --threads "$THREADS"
  "$PY" "$SRC/bench/register_bench.py" "$WORK/plate.zarr" "$WORK/truth.yaml" "$WORK/shifts.yaml" "$WORK/est.json"
done
