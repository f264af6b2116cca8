#!/usr/bin/env bash
# tessera simulate throughput: a 0.4 plate of GRID tiles of TILE px (uint16,
# zstd), beside zarr-python writing the same layout (plate/well/image groups,
# one (1,1,1,H,W)-chunked array per position) filled with numpy noise: the
# least a Python simulator would do, without any specimen rendering. Wall
# time, MB/s of raw pixels, and peak RSS of each.
#   bash bench/simulate.sh [BUILD_DIR] [GRID] [TILE]   (default build 6x6 2048x2048)
BUILD=${1:-build}
GRID=${2:-6x6}
TILE=${3:-2048x2048}
source "$(dirname "$0")/lib.sh"

cols=${GRID%x*}; rows=${GRID#*x}; th=${TILE%x*}; tw=${TILE#*x}
mb=$(awk -v n=$((cols * rows)) -v h="$th" -v w="$tw" 'BEGIN{printf "%.1f", n*h*w*2/1048576}')
echo "plate: $GRID tiles of $TILE uint16 = $mb MB of pixels, $(nproc) cores"

/usr/bin/time -f "%e %M" -o "$WORK/t.txt" "$BUILD/tessera" simulate -o "$WORK/ts.zarr" \
  --grid "$GRID" --tile "$TILE" --format 0.4 -q
read -r secs kb <"$WORK/t.txt"
echo "tessera simulate : wall_s=$secs MB/s=$(awk -v m="$mb" -v s="$secs" 'BEGIN{printf "%.0f", m/s}') peak_rss_mb=$((kb / 1024))"

/usr/bin/time -f "%e %M" -o "$WORK/p.txt" "$PY" - "$WORK/py.zarr" "$cols" "$rows" "$th" "$tw" <<'PYEOF'
import sys, numpy as np, zarr
from numcodecs import Zstd
out, cols, rows, h, w = sys.argv[1], *map(int, sys.argv[2:])
root = zarr.open_group(out, mode="w")
well = root.require_group("A").require_group("1")
rng = np.random.default_rng(0)
for gy in range(rows):
    for gx in range(cols):
        img = well.require_group(f"{gx:03d}{gy:03d}")
        a = img.create_dataset("0", shape=(1, 1, 1, h, w), chunks=(1, 1, 1, h, w), dtype="<u2",
                               compressor=Zstd(level=3), dimension_separator="/")
        a[...] = (100 + 20 * rng.standard_normal((1, 1, 1, h, w))).clip(0, 65535).astype("<u2")
PYEOF
read -r secs kb <"$WORK/p.txt"
echo "zarr-python noise: wall_s=$secs MB/s=$(awk -v m="$mb" -v s="$secs" 'BEGIN{printf "%.0f", m/s}') peak_rss_mb=$((kb / 1024))"
echo "bytes on disk: tessera $(du -sh "$WORK/ts.zarr" | cut -f1), zarr-python $(du -sh "$WORK/py.zarr" | cut -f1)"
