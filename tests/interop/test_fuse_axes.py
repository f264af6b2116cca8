"""tessera fuse and estimate on positions that are not 5-D: OME-Zarr 0.4
plates written with zarr-python whose arrays are czyx, cyx or zyx (with
matching multiscales axes), fused against the NumPy reference
(fuse_reference.py) of the same tiles seen as (1, C, Z, Y, X); estimate must
find the written positions. An array stored x before y is refused by fuse
with a message naming the axes."""
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuse_reference as R  # noqa: E402
from interop_checks import check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="fuse_axes_", dir=os.environ.get("TESSERA_TEST_TMP"))

AXES = {"t": {"name": "t", "type": "time"}, "c": {"name": "c", "type": "channel"},
        "z": {"name": "z", "type": "space", "unit": "micrometer"},
        "y": {"name": "y", "type": "space", "unit": "micrometer"},
        "x": {"name": "x", "type": "space", "unit": "micrometer"}}
SCALE = {"t": 1.0, "c": 1.0, "z": 2.0, "y": 0.65, "x": 0.65}


def rewrite_axes(plate, info, axes):
    """Rewrites every position of a 5-D plate (T = 1) as an array of only
    `axes` (e.g. "czyx"): axes not kept must be size 1 in the 5-D tile."""
    import zarr
    from numcodecs import Zstd
    for well, (raws, _, names) in info.items():
        for raw, name in zip(raws, names):
            for i, ax in enumerate("tcz"):
                assert ax in axes or raw.shape[i] == 1, (ax, raw.shape)
            kept = [ax for ax in "tczyx" if ax in axes]
            a = raw[tuple(slice(None) if ax in axes else 0 for ax in "tczyx")]
            # stored in the order `axes` gives (e.g. "cxy": x before y)
            a = np.ascontiguousarray(np.transpose(a, [kept.index(ax) for ax in axes]))
            img_dir = os.path.join(plate, well, name)
            shutil.rmtree(os.path.join(img_dir, "0"))
            g = zarr.open_group(zarr.DirectoryStore(img_dir, dimension_separator="/"), mode="r+")
            g.create_dataset("0", data=a, chunks=(1,) * (a.ndim - 2) + a.shape[-2:],
                             compressor=Zstd(level=1), overwrite=True)
            ms = g.attrs["multiscales"]
            ms[0]["axes"] = [AXES[ax] for ax in axes]
            ms[0]["datasets"][0]["coordinateTransformations"] = [
                {"type": "scale", "scale": [SCALE[ax] for ax in axes]}]
            g.attrs["multiscales"] = ms


def plate_with_axes(name, axes, tcz, orientation=(False, False, 0)):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    plate = os.path.join(d, "p.zarr")
    info = R.write_plate(plate, ["A/1"], tile_hw=(64, 80), grid=(3, 2), overlap=(16, 20),
                         tcz=tcz, orientation=orientation, seed=5)
    rewrite_axes(plate, info, axes)
    shifts = os.path.join(d, "s.yaml")
    R.write_shifts(shifts, info, orientation=orientation)
    return d, plate, shifts, info


def fuse_matches_reference(name, axes, tcz, orientation=(False, False, 0)):
    d, plate, shifts, info = plate_with_axes(name, axes, tcz, orientation)
    out = os.path.join(d, "o.zarr")
    p = run("fuse", plate, shifts, "-o", out, "--format", "0.4", "--chunk", "32", "--levels", "1",
            "--threads", "2", ok=False)
    check(p.returncode == 0, f"fuse of {axes} tiles: exit {p.returncode}: {p.stderr.strip()}")
    if p.returncode != 0:
        return d, plate, info
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins, orientation=orientation)
    got = R.read_output(out, "A/1")
    check(got.shape == ref.shape, f"{axes}: output shape {got.shape} != reference {ref.shape}")
    if got.shape == ref.shape:
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64)).max()
        check(diff <= 1, f"{axes}: max |diff| {diff} grey levels against the NumPy reference")
        check(((got == 0) == (ref == 0)).all(), f"{axes}: uncovered pixels differ")
    return d, plate, info


def estimate_finds_positions(d, plate, info, axes, extra=()):
    shifts = os.path.join(d, "est.yaml")
    p = run("estimate", plate, "-o", shifts, "--overlap-y", "16", "--overlap-x", "20", *extra, ok=False)
    check(p.returncode == 0, f"estimate of {axes} tiles: exit {p.returncode}: {p.stderr.strip()}")
    if p.returncode != 0:
        return
    got = R.read_shifts_origins(shifts, "A/1")
    _, origins, names = info["A/1"]
    oy0, ox0 = min(o[0] for o in origins), min(o[1] for o in origins)
    for n, (y, x) in zip(names, origins):
        gy, gx = got.get(n, (None, None))
        check(gy is not None and abs(gy - (y - oy0)) <= 1 and abs(gx - (x - ox0)) <= 1,
              f"estimate {axes}: tile {n} at {(gy, gx)}, written at {(y - oy0, x - ox0)}")


d, plate, info = fuse_matches_reference("czyx", "czyx", (1, 2, 2))
estimate_finds_positions(d, plate, info, "czyx", ("--channel", "1", "--z", "1"))
d, plate, info = fuse_matches_reference("cyx_rot90", "cyx", (1, 3, 1), orientation=(False, True, 1))
d, plate, info = fuse_matches_reference("zyx", "zyx", (1, 1, 2))
estimate_finds_positions(d, plate, info, "zyx")

# x stored before y: fuse reads c planes of y rows, so it must refuse clearly
d, plate, shifts, _ = plate_with_axes("cxy", "cxy", (1, 2, 1))
p = run("fuse", plate, shifts, "-o", os.path.join(d, "o.zarr"), "--format", "0.4", ok=False)
check(p.returncode != 0 and "order" in p.stderr, f"fuse of cxy tiles: exit {p.returncode}, {p.stderr.strip()}")
check(not os.path.exists(os.path.join(d, "o.zarr", "A", "1", "0", "0", ".zarray")),
      "a refused cxy fuse left an output array")
# ... and estimate and preview refuse the same plate the same way (estimate
# used to transpose it, registering a plate fuse then refused)
p = run("estimate", plate, "-o", os.path.join(d, "e.yaml"), "--overlap", "8", ok=False)
check(p.returncode == 1 and "order" in p.stderr and not os.path.exists(os.path.join(d, "e.yaml")),
      f"estimate of cxy tiles: exit {p.returncode}, {p.stderr.strip()}")
p = run("preview", plate, "-o", os.path.join(d, "p.png"), "--shifts", shifts, ok=False)
check(p.returncode == 1 and "order" in p.stderr, f"preview of cxy tiles: exit {p.returncode}, {p.stderr.strip()}")

shutil.rmtree(TMP, ignore_errors=True)
finish()
