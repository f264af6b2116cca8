#!/usr/bin/env bash
# Fuse under MPI against one process, on the same simulated plate in one run:
#   - one process, --threads 2 (the baseline: all the cores of this machine),
#   - `mpirun -n 2 tessera fuse --threads 1` (the same 2 cores as 2 ranks),
#   - the same with `--mca pml ob1` (Open MPI's point-to-point layer that
#     starts without probing for UCX / libfabric devices: tessera sends a few
#     hundred bytes between ranks, docs/mpi.md),
# output megapixels/s (rank 0's --json: the whole distributed fuse, MPI
# start-up excluded), wall times, peak RSS of the process / of each rank,
# best of 3 (2 noisy shared cores); then the end-to-end ratio (one process's
# wall / mpirun's wall, the best of 3 of each) beside its 0.9x target (issue
# 12), the in-fuse ratio, and what mpirun costs to start 2 ranks that do
# nothing (`/bin/true`, `tessera info`). Both derive the same block layout
# (it depends on neither threads nor ranks), so the stores are also
# compared with diff -r.
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
now() { date +%s.%N; }
minf() { if [ -z "$1" ]; then echo "$2"; else "$PY" -c "print(min($1, $2))"; fi; }

# One process, 2 threads, and each way of running 2 ranks, in turns (the
# machine's load drifts: each round measures all three close together).
# The ranks' peak RSS through their own time(1).
ranks() { # OUT MPIRUN-FLAGS...
  local out=$1
  shift
  rm -rf "$WORK/$out.zarr" "$WORK"/rss.*
  "${MPIRUN[@]}" "$@" bash -c '/usr/bin/time -f "%M" -o "$0/rss.$OMPI_COMM_WORLD_RANK" "$1" fuse -q "$0/plate.zarr" \
    "$0/truth.yaml" -o "$0/$2.zarr" --threads 1 --json' "$WORK" "$T" "$out" >"$WORK/$out.json"
}
declare -A best wall rss
for _ in 1 2 3; do
  for k in one two ob1; do
    rm -rf "$WORK/$k.zarr" "$WORK"/rss*
    start=$(now)
    case $k in
      one) /usr/bin/time -f "%M" -o "$WORK/rss" "$T" fuse -q "$WORK/plate.zarr" "$WORK/truth.yaml" -o "$WORK/one.zarr" \
             --threads 2 --json >"$WORK/one.json" ;;
      two) ranks two ;;
      ob1) ranks ob1 --mca pml ob1 ;;
    esac
    wall[$k]=$(minf "${wall[$k]:-}" "$(now) - $start")
    mps=$(mps_of "$WORK/$k.json")
    if [ -z "${best[$k]:-}" ] || better "$mps" "${best[$k]}"; then
      best[$k]=$mps
      if [ $k = one ]; then rss[$k]=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss")
      else rss[$k]=$(for f in "$WORK"/rss.*; do awk -v r="${f##*.}" '{printf "rank %s %.1f, ", r, $1/1024}' "$f"; done)
      fi
    fi
  done
done
layout=$("$PY" -c "import json;d=json.load(open('$WORK/one.json'));print('canvas %s, chunk %d, shard %d' % (d['canvas'], d['chunk'], d['shard']))")
f2() { "$PY" -c "print('%.2f' % ($1))"; }
echo "one process --threads 2:               ${best[one]} output MP/s, wall $(f2 "${wall[one]}") s," \
  "peak_rss_mb=${rss[one]} ($layout)"
echo "mpirun -n 2 --threads 1:               ${best[two]} output MP/s, mpirun wall $(f2 "${wall[two]}") s," \
  "peak_rss_mb: ${rss[two]%, }"
echo "mpirun -n 2 --mca pml ob1 --threads 1: ${best[ob1]} output MP/s, mpirun wall $(f2 "${wall[ob1]}") s," \
  "peak_rss_mb: ${rss[ob1]%, }"
echo "  (each the best of 3, in turns)"

# What mpirun costs before and after any work: 2 ranks of /bin/true (no
# MPI), and of tessera info (MPI_Init, MPI_Finalize, nothing distributed).
start_up() { # FLAGS... -> best of 3 wall seconds
  local b="" s
  for _ in 1 2 3; do
    s=$(now)
    "${MPIRUN[@]}" "$@" >/dev/null
    b=$(minf "$b" "$(now) - $s")
  done
  f2 "$b"
}
echo "mpirun -n 2 start-up (best of 3): /bin/true $(start_up /bin/true) s, tessera info $(start_up "$T" info "$WORK/plate.zarr") s," \
  "with --mca pml ob1: tessera info $(start_up --mca pml ob1 "$T" info "$WORK/plate.zarr") s"
echo "end-to-end (one process wall / mpirun wall): $(f2 "${wall[one]} / ${wall[two]}")x," \
  "with --mca pml ob1 $(f2 "${wall[one]} / ${wall[ob1]}")x (target >= 0.9x);" \
  "in fuse (MP/s, rank 0's --json): $(f2 "${best[two]} / ${best[one]}")x, $(f2 "${best[ob1]} / ${best[one]}")x"
for k in two ob1; do
  if diff -r "$WORK/one.zarr" "$WORK/$k.zarr" >/dev/null; then echo "stores identical (diff -r, $k)"
  else echo "STORES DIFFER (diff -r, $k)"; exit 1; fi
done
