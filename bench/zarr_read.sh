#!/usr/bin/env bash
# Reading a 2048x2048 uint16 tile through tessera's zarr layer beside the
# baseline of one decompression of the same chunk file (libzstd / c-blosc
# directly), and beside zarr-python (Debian python3-zarr) reading the same v2
# arrays; and writing the tile as one sharded zstd block beside the same
# compression through one reused ZSTD_CCtx; minimum time over REPS (the machine may be shared), peak RSS of each.
#   bash bench/zarr_read.sh [BUILD_DIR] [REPS]   (default build, 20)
BUILD=${1:-build}
REPS=${2:-20}
source "$(dirname "$0")/lib.sh"

"$BUILD/bench/zarr_read" gen "$WORK"
du -sh "$WORK"/v2_zstd "$WORK"/v2_blosc_lz4 "$WORK"/v3_zstd_sharded512 | sed 's|'"$WORK"'/||'
"$BUILD/bench/zarr_read" time "$WORK" "$REPS"
"$BUILD/bench/zarr_read" write "$WORK" "$REPS"
"$PY" - "$WORK" "$REPS" <<'PYEOF'
import resource, sys, time, zarr
work, reps = sys.argv[1], int(sys.argv[2])
for name in ("v2_zstd", "v2_blosc_lz4"):
    z = zarr.open_array(f"{work}/{name}", mode="r")
    z[:]
    whole = strip = 1e9
    for _ in range(reps):  # minimum over reps, as for tessera
        t0 = time.perf_counter()
        z[:]
        t1 = time.perf_counter()
        z[:, -256:]
        t2 = time.perf_counter()
        whole, strip = min(whole, t1 - t0), min(strip, t2 - t1)
    print(f"zarr-python {name:10s} whole tile {whole*1e3:7.2f} ms, 2048x256 strip {strip*1e3:7.2f} ms")
print(f"zarr-python peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.1f}")
PYEOF
