"""Baseline for bench/register_bench.sh: scikit-image's phase_cross_correlation
on the same strips tessera correlates (strip shapes from tessera's --json),
and the pairwise error of both against the simulated truth.
  register_bench.py PLATE TRUTH SHIFTS ESTIMATE_JSON
Only the phase_cross_correlation calls are timed (CPU time of this process,
like tessera's figure: the machine may be shared; tiles read beforehand), so
the baseline's pairs/s is an upper bound for it."""
import json
import os
import resource
import sys
import time

import numpy as np
import yaml
import zarr
from skimage.registration import phase_cross_correlation

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
import register_plates as rp  # noqa: E402

plate, truth_file, shifts_file, est_json = sys.argv[1:5]
summary = json.load(open(est_json))
truth = yaml.safe_load(open(truth_file))["positions"]
shifts = yaml.safe_load(open(shifts_file))
g = zarr.open_group(plate, mode="r")
names = [im["path"] for im in g["A/1"].attrs["well"]["images"]]
tiles = {n: g[f"A/1/{n}/0"][0, 0, 0].astype(np.float64) for n in names}


def err(a, b, dy, dx):
    t = np.subtract(truth[f"A/1/{b}"], truth[f"A/1/{a}"])
    return float(np.hypot(dy - t[0], dx - t[1]))


def stats(errors):
    e = np.array(errors)
    return (f"median error {np.median(e):.3f} px, p95 {np.percentile(e, 95):.3f} px, "
            f"within 1 px {100.0 * np.mean(e <= 1.0):.1f}%")


where = {(int(n[:3]), int(n[3:])): n for n in names}
pairs = []
for (x, y), a in where.items():
    for direction, nb in (("right", (x + 1, y)), ("below", (x, y + 1))):
        if nb in where:
            pairs.append((a, where[nb], direction))

measured = {(pa.split("/")[-1], pb.split("/")[-1]) for pa, pb, _, _, _ in shifts["pairs"]["A/1"]}
sk_err, sk_err_measured, t_sk = [], [], 0.0
for a, b, direction in pairs:
    shape = summary["strip_right" if direction == "right" else "strip_below"]
    sa, sb, off = rp.strips(tiles[a], tiles[b], direction, shape)
    t0 = time.process_time()
    s, _, _ = phase_cross_correlation(sa, sb, upsample_factor=20)
    t_sk += time.process_time() - t0
    sk_err.append(err(a, b, s[0] + off[0], s[1] + off[1]))
    if (a, b) in measured:
        sk_err_measured.append(sk_err[-1])

ts_err = [err(pa.split("/")[-1], pb.split("/")[-1], dy, dx) for pa, pb, dy, dx, _ in shifts["pairs"]["A/1"]]
print(f"tessera : {len(ts_err)} pairs measured ({summary['unmatched_pairs']} unmatched), {stats(ts_err)}")
print(f"skimage : {len(pairs)} pairs, {1e3 * t_sk / len(pairs):.2f} ms/pair = {len(pairs) / t_sk:.1f} pairs/s "
      f"(1 thread, correlation only, "
      f"upsample_factor=20); all pairs: {stats(sk_err)}; the pairs tessera measured: "
      f"{stats(sk_err_measured)}; peak_rss_mb="
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} (whole plate in memory as float64)")
