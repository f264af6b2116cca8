#!/usr/bin/env bash
# Fuse under MPI against one process, on the same simulated plate in one run:
#   - one process, --threads 2 (the baseline: all the cores of this machine),
#   - `mpirun -n 2 tessera fuse --threads 1` (the same 2 cores as 2 ranks),
# output megapixels/s (rank 0's --json: the whole distributed fuse, MPI
# start-up excluded; the mpirun wall time is printed beside it), peak RSS of
# the process / of each rank, best of 3 (2 noisy shared cores). Both derive
# the same block layout (it depends on neither threads nor ranks), so the
# stores are also compared with diff -r.
#   bash bench/mpi_fuse.sh [BUILD_DIR] [GRID] [TILE]   (default build, 8x6, 512x512)
BUILD=${1:-build}
GRID=${2:-8x6}
TILE=${3:-512x512}
source "$(dirname "$0")/lib.sh"

grep -q '^TESSERA_MPI:BOOL=ON' "$BUILD/CMakeCache.txt" || { echo "$BUILD was built without MPI (TESSERA_MPI=OFF)"; exit 1; }
MPIRUN=(mpirun --oversubscribe -q -n 2)
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

overlap=$(( ${TILE%x*} / 10 ))
echo "== mpi fuse: $GRID tiles of $TILE uint16, overlap $overlap px, 1 channel, OME-Zarr 0.5 in and out"
"$T" simulate -o "$WORK/plate.zarr" --grid "$GRID" --tile "$TILE" --overlap "$overlap" --format 0.5 \
  --truth "$WORK/truth.yaml" --seed 1 >/dev/null

mps_of() { "$PY" -c "import json;print(json.load(open('$1'))['megapixels_per_second'])"; }
better() { "$PY" -c "import sys; sys.exit(not $1 > $2)"; }

# One process, 2 threads.
best=""
for _ in 1 2 3; do
  rm -rf "$WORK/one.zarr"
  /usr/bin/time -f "%M %e" -o "$WORK/rss" "$T" fuse "$WORK/plate.zarr" "$WORK/truth.yaml" -o "$WORK/one.zarr" \
    --threads 2 --json >"$WORK/one.json"
  mps=$(mps_of "$WORK/one.json")
  if [ -z "$best" ] || better "$mps" "$best"; then
    best=$mps
    rss=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss")
    wall=$(awk '{print $2}' "$WORK/rss")
  fi
done
layout=$("$PY" -c "import json;d=json.load(open('$WORK/one.json'));print('canvas %s, chunk %d, shard %d' % (d['canvas'], d['chunk'], d['shard']))")
echo "one process --threads 2:      $best output MP/s (best of 3), wall ${wall} s, peak_rss_mb=$rss ($layout)"

# Two ranks, 1 thread each: each rank's peak RSS through its own time(1).
best=""
for _ in 1 2 3; do
  rm -rf "$WORK/two.zarr" "$WORK"/rss.*
  start=$(date +%s.%N)
  "${MPIRUN[@]}" bash -c '/usr/bin/time -f "%M" -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$1" fuse "$0/plate.zarr" \
    "$0/truth.yaml" -o "$0/two.zarr" --threads 1 --json' "$WORK" "$T" >"$WORK/two.json"
  end=$(date +%s.%N)
  mps=$(mps_of "$WORK/two.json")
  if [ -z "$best" ] || better "$mps" "$best"; then
    best=$mps
    rss=$(for f in "$WORK"/rss.*; do awk -v r="${f##*.}" '{printf "rank %s %.1f, ", r, $1/1024}' "$f"; done)
    wall=$("$PY" -c "print('%.2f' % ($end - $start))")
  fi
done
echo "mpirun -n 2 --threads 1:      $best output MP/s (best of 3), mpirun wall ${wall} s, peak_rss_mb: ${rss%, }"
if diff -r "$WORK/one.zarr" "$WORK/two.zarr" >/dev/null; then echo "stores identical (diff -r)"
else echo "STORES DIFFER (diff -r)"; exit 1; fi
