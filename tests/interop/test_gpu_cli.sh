# docs/gpu.md: `tessera fuse --device`. Small simulated plates (uint16 and
# float32 output, a flipped orientation, 0.4 and 0.5, a pyramid) are fused
# on the CPU; then
#  - --device auto must write the same store (diff -r) and say in --json
#    which device ran it;
#  - --device gpu must either, on a machine with a CUDA device and a CUDA
#    build, write the same store with "device": "gpu", or, without one,
#    exit 1 with one message saying why (no device / built without CUDA)
#    and leave nothing at the output path;
#  - estimate --device gpu is refused (registration on the GPU is not wired
#    in yet), estimate --device auto writes the CPU's shifts file.
# Runs (and checks something) in every build, with or without a GPU.
set -u
BIN=${TESSERA_BIN:?TESSERA_BIN not set}
TMP=$(mktemp -d "${TESSERA_TEST_TMP:-/tmp}/gpu_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$BIN" info --devices >"$TMP/devices.txt"
have_gpu=$?
grep -q "^gpu: " "$TMP/devices.txt" || fail "info --devices: $(cat "$TMP/devices.txt")"
[ "$("$BIN" info --devices --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["gpu"])')" = \
  "$([ $have_gpu = 0 ] && echo True || echo False)" ] || fail "info --devices: --json disagrees with the exit status"

json_device() { /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["device"])'; }

"$BIN" simulate -o "$TMP/plate.ome.zarr" --wells A/1,B/2 --grid 3x3 --tile 96x128 --overlap 24 \
    --jitter 3 --channels 2 --seed 11 >/dev/null || fail "simulate"
"$BIN" estimate "$TMP/plate.ome.zarr" -o "$TMP/shifts.yaml" --overlap 24 -q >/dev/null || fail "estimate"
"$BIN" estimate "$TMP/plate.ome.zarr" -o "$TMP/shifts_auto.yaml" --overlap 24 -q --device auto >/dev/null \
    || fail "estimate --device auto"
cmp "$TMP/shifts.yaml" "$TMP/shifts_auto.yaml" || fail "estimate --device auto differs from the CPU's"
if "$BIN" estimate "$TMP/plate.ome.zarr" -o "$TMP/shifts_gpu.yaml" --overlap 24 -q --device gpu \
    >/dev/null 2>"$TMP/est.err"; then
    fail "estimate --device gpu succeeded (it is not wired in)"
fi
grep -q -- "--device gpu" "$TMP/est.err" || fail "estimate --device gpu: no message: $(cat "$TMP/est.err")"
[ ! -e "$TMP/shifts_gpu.yaml" ] || fail "estimate --device gpu wrote its output"
"$BIN" fuse "$TMP/plate.ome.zarr" "$TMP/shifts.yaml" -o "$TMP/x.zarr" --device tpu 2>/dev/null
[ $? = 2 ] || fail "--device tpu is not a usage error"

variant=0
run_variant() {  # fuse options...
    variant=$((variant + 1))
    local ref="$TMP/cpu$variant.zarr" auto="$TMP/auto$variant.zarr" gpu="$TMP/gpu$variant.zarr"
    "$BIN" fuse "$TMP/plate.ome.zarr" "$TMP/shifts.yaml" -o "$ref" "$@" --json >"$TMP/cpu.json" \
        || fail "fuse $* on the CPU"
    [ "$(json_device <"$TMP/cpu.json")" = cpu ] || fail "fuse $*: --json device is not cpu"
    "$BIN" fuse "$TMP/plate.ome.zarr" "$TMP/shifts.yaml" -o "$auto" "$@" --device auto --json >"$TMP/auto.json" \
        || fail "fuse $* --device auto"
    diff -r "$ref" "$auto" >/dev/null || fail "fuse $* --device auto: the store differs from the CPU's"
    local dev
    dev=$(json_device <"$TMP/auto.json")
    "$BIN" fuse "$TMP/plate.ome.zarr" "$TMP/shifts.yaml" -o "$gpu" "$@" --device gpu --json \
        >"$TMP/gpu.json" 2>"$TMP/gpu.err"
    local rc=$?
    if [ "$rc" = 0 ]; then
        [ $have_gpu = 0 ] || fail "fuse $* --device gpu ran, but info --devices says: $(cat "$TMP/devices.txt")"
        [ "$dev" = gpu ] || fail "fuse $*: --device gpu ran but auto chose $dev"
        [ "$(json_device <"$TMP/gpu.json")" = gpu ] || fail "fuse $* --device gpu: --json device is not gpu"
        diff -r "$ref" "$gpu" >/dev/null || fail "fuse $* --device gpu: the store differs from the CPU's"
        echo "ok: fuse $* on the GPU writes the CPU's bytes"
    else
        [ "$rc" = 1 ] || fail "fuse $* --device gpu: exit $rc, not 1"
        [ $have_gpu = 1 ] || fail "fuse $* --device gpu failed, but info --devices says: $(cat "$TMP/devices.txt")"
        [ "$dev" = cpu ] || fail "fuse $*: --device auto says $dev without a usable GPU"
        [ "$(wc -l <"$TMP/gpu.err")" = 1 ] || fail "fuse --device gpu: not one message: $(cat "$TMP/gpu.err")"
        grep -Eq -- "--device gpu: (no usable CUDA device|this tessera was built without the CUDA backend)" \
            "$TMP/gpu.err" || fail "fuse --device gpu: unexpected message: $(cat "$TMP/gpu.err")"
        [ ! -e "$gpu" ] || fail "fuse --device gpu without a device wrote $gpu"
        echo "ok: fuse $* --device gpu without a device: $(cat "$TMP/gpu.err")"
    fi
}
run_variant --levels 2 --chunk 64 --shard 2
run_variant --dtype float32 --fliplr --format 0.4 --chunk 64 --exponent 2
run_variant --blend average --flipud --rot90 2 --levels 1
echo "all ok"
