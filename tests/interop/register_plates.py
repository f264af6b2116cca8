"""Helpers for the registration interop tests: write small OME-Zarr 0.4 HCS
plates with zarr-python 2 (the reference implementation, not tessera), run
tessera, read shifts files with PyYAML, and numpy references (strip cutting
like tessera's geometry, exhaustive NCC search)."""
import json
import os
import subprocess
import sys

import numpy as np
import yaml
import zarr

BIN = os.environ.get("TESSERA_BIN", "tessera")
TESTDATA = os.environ.get("TESSERA_TESTDATA", "")
TMP = os.environ.get("TESSERA_TEST_TMP", "/tmp")


def write_plate(path, tiles, well="A/1"):
    """tiles: {position name: 2-D array (y, x)}. One well, OME-Zarr 0.4."""
    row, col = well.split("/")
    root = zarr.open_group(path, mode="w")
    root.attrs["plate"] = {
        "version": "0.4", "name": "test",
        "rows": [{"name": row}], "columns": [{"name": col}],
        "wells": [{"path": well, "rowIndex": 0, "columnIndex": 0}],
        "field_count": len(tiles),
    }
    wg = root.require_group(row).require_group(col)
    wg.attrs["well"] = {"version": "0.4", "images": [{"path": n, "acquisition": 0} for n in tiles]}
    for name, img in tiles.items():
        g = wg.require_group(name)
        g.attrs["multiscales"] = [{
            "version": "0.4",
            "axes": [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
                     {"name": "z", "type": "space"}, {"name": "y", "type": "space", "unit": "micrometer"},
                     {"name": "x", "type": "space", "unit": "micrometer"}],
            "datasets": [{"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": [1.0, 1.0, 1.0, 1.0, 1.0]}]}],
        }]
        g.attrs["omero"] = {"channels": [{"label": "specimen", "color": "FFFFFF", "active": True,
                                          "window": {"min": 0, "max": 255, "start": 0, "end": 255}}]}
        a = np.asarray(img)[None, None, None]
        g.create_dataset("0", data=a, chunks=(1, 1, 1, min(256, a.shape[3]), min(256, a.shape[4])),
                         dimension_separator="/", overwrite=True)


def run_estimate(plate, out, *args):
    cmd = [BIN, "estimate", plate, "-o", out, "--json", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def read_shifts(path):
    with open(path) as f:
        return yaml.safe_load(f)


def content_tiles(plate, names):
    """The tiles among names (image paths in the plate) with content:
    intensity std over 60 (tessera simulate's blank tiles show only noise
    and vignetting)."""
    return [k for k in names if np.asarray(zarr.open(os.path.join(plate, k, "0"), mode="r"))[0, 0, 0].std() > 60]


def worst_tile(positions, truth, content):
    """The tile of content farthest from the truth once the median offset
    over them is taken out, and how far (px); (None, 0.0) without any."""
    if not content:
        return None, 0.0
    d = np.array([[positions[k][0] - truth[k][0], positions[k][1] - truth[k][1]] for k in content])
    err = np.hypot(*(d - np.median(d, axis=0)).T)
    i = int(err.argmax())
    return content[i], float(err[i])


def pairs_by_names(shifts, well="A/1"):
    """{(a, b): (dy, dx, confidence)} with position names (no well prefix)."""
    out = {}
    for a, b, dy, dx, c in shifts["pairs"][well]:
        out[(a.split("/")[-1], b.split("/")[-1])] = (dy, dx, c)
    return out


def strips(a, b, direction, strip_shape):
    """The strips tessera correlates (centred crop along the long side)."""
    sh, sw = strip_shape
    H, W = a.shape
    if direction == "right":
        y0 = (H - sh) // 2
        return a[y0:y0 + sh, W - sw:], b[y0:y0 + sh, :sw], (0, W - sw)
    x0 = (W - sw) // 2
    return a[H - sh:, x0:x0 + sw], b[:sh, x0:x0 + sw], (H - sh, 0)


def overlap_ncc(a, b, dy, dx):
    """NCC of tiles a and b (same shape) where b's origin is a's + (dy, dx)."""
    H, W = a.shape
    ya0, xa0 = max(0, dy), max(0, dx)
    ya1, xa1 = min(H, H + dy), min(W, W + dx)
    if ya1 - ya0 < 8 or xa1 - xa0 < 8:
        return -1.0
    pa = a[ya0:ya1, xa0:xa1].astype(np.float64)
    pb = b[ya0 - dy:ya1 - dy, xa0 - dx:xa1 - dx].astype(np.float64)
    pa = pa - pa.mean()
    pb = pb - pb.mean()
    d = np.sqrt((pa * pa).sum() * (pb * pb).sum())
    return float((pa * pb).sum() / d) if d > 0 else 0.0


def ncc_search(a, b, dy_range, dx_range, factor=4):
    """Exhaustive NCC search of b's origin relative to a's: coarse on a
    block-mean downsampled grid, then full resolution around the best."""
    def down(img):
        H, W = (img.shape[0] // factor) * factor, (img.shape[1] // factor) * factor
        return img[:H, :W].reshape(H // factor, factor, W // factor, factor).mean(axis=(1, 3))
    da, db = down(a.astype(np.float64)), down(b.astype(np.float64))
    best = (-2.0, 0, 0)
    for dy in range(dy_range[0] // factor, dy_range[1] // factor + 1):
        for dx in range(dx_range[0] // factor, dx_range[1] // factor + 1):
            v = overlap_ncc(da, db, dy, dx)
            if v > best[0]:
                best = (v, dy, dx)
    _, cy, cx = best
    best = (-2.0, 0, 0)
    for dy in range(cy * factor - factor - 2, cy * factor + factor + 3):
        for dx in range(cx * factor - factor - 2, cx * factor + factor + 3):
            v = overlap_ncc(a, b, dy, dx)
            if v > best[0]:
                best = (v, dy, dx)
    return best


def cut_plate(img, cols, rows, tile, overlap, jitter, seed=0):
    """Tiles cut from one real image on a grid of pitch tile - overlap, each
    moved by a uniform stage jitter of +-jitter px (integer, so the truth is
    exact): {name: tile}, {name: true origin (y, x)}. The image must hold
    (n - 1) * pitch + tile + 2 * jitter px along each axis. tile and overlap
    may be (y, x) pairs (non-square tiles, other overlaps per axis)."""
    rng = np.random.default_rng(seed)
    th, tw = (tile, tile) if np.isscalar(tile) else tile
    oy, ox = (overlap, overlap) if np.isscalar(overlap) else overlap
    py, px = th - oy, tw - ox
    need_y, need_x = (rows - 1) * py + th + 2 * jitter, (cols - 1) * px + tw + 2 * jitter
    if img.shape[0] < need_y or img.shape[1] < need_x:
        raise ValueError(f"image {img.shape} too small for {cols}x{rows} tiles of {tile} px at pitch {(py, px)}")
    tiles, origins = {}, {}
    for row in range(rows):
        for col in range(cols):
            y = jitter + row * py + int(rng.integers(-jitter, jitter + 1))
            x = jitter + col * px + int(rng.integers(-jitter, jitter + 1))
            n = f"{col:03d}{row:03d}"
            tiles[n] = np.ascontiguousarray(img[y:y + th, x:x + tw])
            origins[n] = (y, x)
    return tiles, origins
