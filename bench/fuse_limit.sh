#!/usr/bin/env bash
# fuse against this machine's physical limit, and the codec table the
# default codec is chosen from (docs/fuse.md, "Codecs"), in one run:
#   - a 6x5 plate of 2048^2 uint16 tiles, input and output in each codec:
#     `tessera fuse --levels 0 --threads 1` (best of 3; the limit counts level 0) beside bench/fuse_limit.c's
#     limit on the same data (decode + blend traffic + encode + write,
#     codec libraries called directly, STREAM-triad bandwidth);
#   - encode speed and ratio of every codec on the inner chunks of the
#     fused mosaics of that plate and of a plate cut from a real image
#     (skimage's hubble_deep_field).
#   bash bench/fuse_limit.sh [BUILD_DIR]
BUILD=${1:-build}
source "$(dirname "$0")/lib.sh"
L="$BUILD/bench/fuse_limit"

echo "== 6x5 tiles of 2048x2048 uint16, overlap 205, OME-Zarr 0.4 in and out, 1 thread"
# blosc-zstd is level 5 (the codec's own default), blosc-zstd:3 fuse's default codec.
for codec in zstd blosc-lz4 blosc-zstd blosc-zstd:3; do
  rm -rf "$WORK/plate.zarr"
  "$T" simulate -o "$WORK/plate.zarr" --grid 6x5 --tile 2048x2048 --overlap 205 --format 0.4 --codec "$codec" \
    --truth "$WORK/truth.yaml" --seed 1 >/dev/null
  best=""
  for _ in 1 2 3; do
    rm -rf "$WORK/out.zarr"
    /usr/bin/time -f "%M" -o "$WORK/rss" "$T" fuse -q "$WORK/plate.zarr" "$WORK/truth.yaml" -o "$WORK/out.zarr" \
      --format 0.4 --codec "$codec" --levels 0 --threads 1 --json > "$WORK/fuse.json"
    s=$("$PY" -c "import json;print(json.load(open('$WORK/fuse.json'))['seconds'])")
    if [ -z "$best" ] || "$PY" -c "import sys; sys.exit(not $s < $best)"; then
      best=$s; rss=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss"); fi
  done
  "$L" "$WORK/plate.zarr" "$WORK/out.zarr/A/1/0/0" "$codec" "$codec" 512 > "$WORK/limit.txt"
  "$PY" - "$WORK/limit.txt" "$best" "$rss" "$codec" <<'PY'
import sys
lines = open(sys.argv[1]).read().split("\n")
kv = dict(x.split("=") for x in next(l for l in lines if l.startswith("limit ")).split()[1:])
t, rss, codec = float(sys.argv[2]), sys.argv[3], sys.argv[4]
lim = float(kv["limit_s"])
print(f"codec {codec}: tessera fuse {t:.2f} s (best of 3, peak_rss_mb={rss}); limit {lim:.2f} s = decode "
      f"{kv['decode_s']} + blend traffic {kv['blend_s']} (triad {kv['triad_gbs']} GB/s) + encode {kv['encode_s']} "
      f"+ write {kv['write_s']}; tessera takes {t / lim:.2f}x the limit (target <= 1.15x: "
      f"{'met' if t / lim <= 1.15 else 'MISSED'})")
if codec == "zstd":
    print("  encode speed and ratio on this mosaic's 512^2 chunks (1 thread):")
    for l in lines:
        if l.startswith("codec="):
            d = dict(x.split("=") for x in l.split())
            print(f"    {d['codec']:>13}: encode {float(d['encode_mbs']):8.1f} MB/s, decode {float(d['decode_mbs']):8.1f} MB/s, ratio {d['ratio']}")
PY
done

echo "== codec table on real images (fused mosaics, 1 thread)"
"$PY" - "$WORK" "$SRC" <<'PY'
import os, sys
import numpy as np
from skimage import data, io
sys.path.insert(0, os.path.join(sys.argv[2], "tests", "interop"))
from register_plates import cut_plate, write_plate
work = sys.argv[1]
img = (data.hubble_deep_field().mean(axis=2) * 256).astype(np.uint16)
tiles, truth = cut_plate(img, 3, 3, 300, 30, 3, seed=1)
write_plate(os.path.join(work, "hubble.zarr"), tiles)
with open(os.path.join(work, "hubble.yaml"), "w") as f:
    f.write("total_translation:\n")
    lo = np.min(list(truth.values()), axis=0)
    for n, (y, x) in truth.items():
        f.write(f"  A/1/{n}: [{int(y - lo[0])}, {int(x - lo[1])}]\n")
PY
"$T" fuse -q "$WORK/hubble.zarr" "$WORK/hubble.yaml" -o "$WORK/hubble_out.zarr" --format 0.4 --chunk 256 --levels 0 >/dev/null
"$L" "$WORK/hubble.zarr" "$WORK/hubble_out.zarr/A/1/0/0" zstd zstd 256 | grep '^codec=' | \
  sed 's/^/  hubble_deep_field (256^2 chunks): /'
