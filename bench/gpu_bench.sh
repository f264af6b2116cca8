#!/usr/bin/env bash
# Fusion on the GPU against the CPU (docs/gpu.md), for a machine with a
# CUDA device: a 6x5 well of 2048x2048 uint16 tiles (~11.9k x 9.9k px
# canvas) fused with --device cpu and --device gpu (uint16 with a pyramid,
# and float32 of flipped tiles); the stores must be equal under diff -r.
# Prints each run's seconds and megapixels/s from --json, and the device's
# limits as nvidia-smi reports them.
#   bench/gpu_bench.sh BUILD_DIR [WORK_DIR]
# (GRID=2x2 TILE=256x256 make a quick smoke run of the script itself.)
set -euo pipefail
GRID=${GRID:-6x5}
TILE=${TILE:-2048x2048}
BUILD=${1:?usage: bench/gpu_bench.sh BUILD_DIR [WORK_DIR]}
WORK=${2:-$(mktemp -d /tmp/gpu_bench.XXXXXX)}
BIN=$BUILD/tessera
mkdir -p "$WORK"
py() { /usr/bin/python3 -c "$@"; }

if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,pcie.link.gen.max,pcie.link.width.max \
        --format=csv,noheader | sed 's/^/device: /'
fi

t0=$(date +%s.%N)
"$BIN" simulate -o "$WORK/plate.ome.zarr" --grid "$GRID" --tile "$TILE" --overlap 10% --jitter 4 \
    --seed 7 --truth "$WORK/shifts.yaml" >/dev/null
echo "simulate $GRID x $TILE: $(py "print(round($(date +%s.%N) - $t0, 1))") s"

status=0
run() {  # NAME fuse-options...
    local name=$1; shift
    for dev in cpu gpu; do
        rm -rf "$WORK/$name.$dev.zarr"
        "$BIN" fuse -q "$WORK/plate.ome.zarr" "$WORK/shifts.yaml" -o "$WORK/$name.$dev.zarr" --device "$dev" \
            --progress none --json "$@" >"$WORK/$name.$dev.json"
        py "import json; j = json.load(open('$WORK/$name.$dev.json')); \
print(f\"$name on {j['device']}: {j['seconds']:.2f} s, {j['megapixels_per_second']:.0f} MP/s, canvas {j['canvas']}\")"
    done
    if diff -r "$WORK/$name.cpu.zarr" "$WORK/$name.gpu.zarr" >/dev/null; then
        echo "$name: GPU store == CPU store (diff -r)"
    else
        echo "$name: GPU store DIFFERS from the CPU's"
        status=1
    fi
}
run uint16 --levels 3
run float32 --dtype float32 --fliplr --flipud --levels 1
exit $status
