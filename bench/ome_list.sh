#!/usr/bin/env bash
# Listing a plate of ~170,000 positions (the reference's scale): tessera's
# ts_plate_open beside Python's json module loading the same plate + well
# metadata files (the least any Python reader does), with peak RSS of each.
# Run for one well of 170k positions and for 384 wells of ~443 positions,
# in OME-Zarr 0.4 and 0.5.
#   bash bench/ome_list.sh [BUILD_DIR]   (default build)
BUILD=${1:-build}
source "$(dirname "$0")/lib.sh"

py_list() { # store version
  "$PY" - "$1" "$2" <<'PYEOF'
import json, os, resource, sys, time
root, ver = sys.argv[1], sys.argv[2]
def attrs(d):
    if ver == "4":
        with open(os.path.join(d, ".zattrs")) as f:
            return json.load(f)
    with open(os.path.join(d, "zarr.json")) as f:
        return json.load(f)["attributes"]["ome"]
t0 = time.perf_counter()
plate = attrs(root)["plate"]
n = 0
for w in plate["wells"]:
    n += len([im["path"] for im in attrs(os.path.join(root, w["path"]))["well"]["images"]])
dt = time.perf_counter() - t0
print(f"list_s={dt:.3f} wells={len(plate['wells'])} positions={n} "
      f"peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.1f}")
PYEOF
}

for ver in 4 5; do
  for shape in "1 170000" "384 443"; do
    set -- $shape
    STORE="$WORK/plate_v$ver.zarr"
    "$BUILD/bench/ome_list" gen "$STORE" "$ver" "$1" "$2"
    echo "OME-Zarr 0.$ver, $1 well(s) x $2 positions ($(du -sh "$STORE" | cut -f1) of metadata)"
    echo "  tessera ts_plate_open: $("$BUILD/bench/ome_list" list "$STORE")"
    echo "  python json baseline : $(py_list "$STORE" "$ver")"
  done
done
