#!/usr/bin/env bash
# tessera verify throughput on a fused mosaic of GRID tiles of TILE px (fuse
# of a simulated plate at its true positions, default options: 0.5 sharded
# zstd, and 0.4 zstd chunks), beside the plain decode floor of the same
# files (bench/verify_floor.c: read + ZSTD_decompress of every chunk, no
# checks) at the same thread count, and zarr-python reading the 0.4 mosaic
# whole (z[:], one thread). Minimum wall time over REPS (warm page cache),
# MB/s of decoded pixels, peak RSS.
#   bash bench/verify.sh [BUILD_DIR] [GRID] [TILE] [REPS]   (default build 5x4 2048x2048 3)
BUILD=${1:-build}
GRID=${2:-5x4}
TILE=${3:-2048x2048}
REPS=${4:-3}
source "$(dirname "$0")/lib.sh"
FLOOR="$BUILD/bench/verify_floor"
NCPU=$(nproc)

"$T" simulate -o "$WORK/p.zarr" --grid "$GRID" --tile "$TILE" --seed 1 --truth "$WORK/t.yaml" >/dev/null
for f in 0.5 0.4; do
  "$T" fuse "$WORK/p.zarr" "$WORK/t.yaml" -o "$WORK/m$f.zarr" --format "$f" >/dev/null
done
"$T" info "$WORK/m0.5.zarr" | grep "level 0"
"$T" info "$WORK/m0.4.zarr" | grep "level 0"

best() { sort -g | head -1; }
for f in 0.5 0.4; do
  m="$WORK/m$f.zarr"
  arr="$m/A/1/0/0"
  for th in 1 "$NCPU"; do
    for _ in $(seq "$REPS"); do
      /usr/bin/time -f "%e %M" -o "$WORK/time.txt" "$T" verify "$m" --threads "$th" --json >"$WORK/v.json"
      read -r secs kb <"$WORK/time.txt"
      s=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$WORK/v.json")
      echo "$s $kb"
    done >"$WORK/v.txt"
    read -r vs vkb < <(sort -g "$WORK/v.txt" | head -1)
    mb=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"]; print(d["bytes_decoded"]/1e6)' "$WORK/v.json")
    for _ in $(seq "$REPS"); do "$FLOOR" "$th" "$arr"; done | sed 's/.*seconds=\([0-9.]*\).*/\1/' | best >"$WORK/f.txt"
    fs=$(cat "$WORK/f.txt")
    awk -v f="$f" -v th="$th" -v vs="$vs" -v fs="$fs" -v mb="$mb" -v kb="$vkb" 'BEGIN{
      printf "OME %s threads %2d: verify %.3f s (%.0f MB/s decoded, peak_rss_mb=%d)  floor %.3f s (%.0f MB/s)  verify/floor %.2f\n",
             f, th, vs, mb/vs, kb/1024, fs, mb/fs, vs/fs}'
  done
done

"$PY" - "$WORK/m0.4.zarr/A/1/0/0" "$REPS" <<'PYEOF'
import resource, sys, time, zarr
z = zarr.open_array(sys.argv[1], mode="r")
best = 1e9
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    a = z[:]
    best = min(best, time.perf_counter() - t0)
    del a
mb = z.nbytes / 1e6
print(f"zarr-python z[:] of the 0.4 level 0: {best:.3f} s ({mb / best:.0f} MB/s, 1 thread), "
      f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
PYEOF
