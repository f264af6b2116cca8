#!/usr/bin/env bash
# tessera verify throughput on a fused mosaic of GRID tiles of TILE px (fuse
# of a simulated plate at its true positions, default options: 0.5 sharded
# zstd, and 0.4 zstd chunks), beside the plain decode floor of the same
# files (bench/verify_floor.c: read + ZSTD_decompress of every chunk, no
# checks) at the same thread count, and zarr-python reading the 0.4 mosaic
# whole (z[:], one thread). Minimum wall and CPU time over REPS (runs
# interleaved; warm page cache), MB/s of decoded pixels, peak RSS.
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
  "$T" fuse -q "$WORK/p.zarr" "$WORK/t.yaml" -o "$WORK/m$f.zarr" --format "$f" >/dev/null
done
"$T" info "$WORK/m0.5.zarr" | grep "level 0"
"$T" info "$WORK/m0.4.zarr" | grep "level 0"

# One line per run: wall seconds (the program's own clock), CPU seconds
# (user + sys: less disturbed by other load on the machine), peak RSS KB.
timed() {
  "$PY" - "$@" >"$WORK/time.txt" <<'PYEOF'
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(p.stdout.strip().replace(" ", "_"), f"{r.ru_utime + r.ru_stime:.4f}", r.ru_maxrss)
PYEOF
  read -r o cpu kb <"$WORK/time.txt"
  case "$o" in
    "{"*) w=$(echo "$o" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"], d; print(d["seconds"])') ;;
    *) w=$(echo "$o" | sed 's/.*seconds=\([0-9.]*\).*/\1/') ;;
  esac
  echo "$w $cpu $kb"
}
for f in 0.5 0.4; do
  m="$WORK/m$f.zarr"
  arr="$m/A/1/0/0"
  mb=$("$T" verify "$m" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["bytes_decoded"] / 1e6)')
  for th in 1 "$NCPU"; do
    : >"$WORK/v.txt"
    : >"$WORK/f.txt"
    for _ in $(seq "$REPS"); do  # interleaved, so both see the same load
      timed "$T" verify "$m" --threads "$th" --json >>"$WORK/v.txt"
      timed "$FLOOR" "$th" "$arr" >>"$WORK/f.txt"
    done
    vw=$(cut -d' ' -f1 "$WORK/v.txt" | sort -g | head -1); vc=$(cut -d' ' -f2 "$WORK/v.txt" | sort -g | head -1)
    fw=$(cut -d' ' -f1 "$WORK/f.txt" | sort -g | head -1); fc=$(cut -d' ' -f2 "$WORK/f.txt" | sort -g | head -1)
    vkb=$(cut -d' ' -f3 "$WORK/v.txt" | sort -g | tail -1)
    awk -v f="$f" -v th="$th" -v vw="$vw" -v vc="$vc" -v fw="$fw" -v fc="$fc" -v mb="$mb" -v kb="$vkb" 'BEGIN{
      printf "OME %s threads %2d: verify %.3f s wall (%.0f MB/s decoded) %.3f s CPU, peak_rss_mb=%d | floor %.3f s wall (%.0f MB/s) %.3f s CPU | verify/floor wall %.2f CPU %.2f\n",
             f, th, vw, mb/vw, vc, kb/1024, fw, mb/fw, fc, vw/fw, vc/fc}'
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
