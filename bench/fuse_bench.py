"""The NumPy reference of the same fusion algorithm, timed on the same plate:
read the tiles (zarr-python), blend (tests/interop/fuse_reference.py, the
formula tessera's tests compare against), write the mosaic (zarr-python, v2
chunks of the same size, zstd). Prints seconds per phase, output MP/s and
peak RSS.
  fuse_bench.py PLATE SHIFTS OUT CHUNK"""
import os
import resource
import sys
import time

import numpy as np
import zarr
from numcodecs import Zstd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
import fuse_reference as R  # noqa: E402

plate, shifts, out, chunk = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
origins = R.read_shifts_origins(shifts, "A/1")
names = sorted(origins)
t0 = time.perf_counter()
tiles = [zarr.open_array(os.path.join(plate, "A/1", n, "0"), mode="r")[...] for n in names]
t1 = time.perf_counter()
_, mosaic = R.fuse(tiles, [origins[n] for n in names])
t2 = time.perf_counter()
z = zarr.open_array(zarr.DirectoryStore(out, dimension_separator="/"), mode="w", shape=mosaic.shape,
                    chunks=(1, 1, 1, chunk, chunk), dtype=mosaic.dtype, compressor=Zstd(level=3))
z[...] = mosaic
t3 = time.perf_counter()
mp = mosaic.size / 1e6
print("numpy reference: read %.3f s, blend %.3f s, write %.3f s; total %.3f s = %.2f output MP/s "
      "(blend alone %.2f MP/s); peak_rss_mb=%.1f" % (t1 - t0, t2 - t1, t3 - t2, t3 - t0, mp / (t3 - t0),
                                                    mp / (t2 - t1),
                                                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024))
