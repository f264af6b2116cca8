"""`tessera estimate` on synthetic plates from `tessera simulate` with known
true origins: both formats, square and non-square tiles, an acquisition
orientation undone by estimate's flags, stage jitter, noise, 10% blank
tiles and 5% missing positions.

Checks, against the truth file (float positions):
- tiles with features in an overlap (some neighbour pair whose true overlap
  shows structure in both tiles, judged here from the pixels): median error
  <= 0.3 px and none above 1 px, after removing the global offset; the rest
  (blank tiles, tiles whose overlaps are empty) stay within the stage
  jitter of their grid position;
- pairs touching a blank tile have low confidence; pairs between two tiles
  with features are mostly confident;
- blank tiles do not drag their neighbours (the bound above includes the
  neighbours of blank tiles).
Blank tiles are found from the pixels (zarr-python reads the 0.4 plate;
simulate writes the same pixels for the same seed in both formats)."""
import os
import subprocess
import sys

import numpy as np
import scipy.ndimage as ndi
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_plates as rp  # noqa: E402
from interop_checks import finish  # noqa: E402

CASES = [
    # label, format, tile HxW (stored), acquisition flags, estimate flags, extra
    ("0.5 non-square rot90+flipud", "0.5", "200x256", ["--acq-rot90", "1", "--acq-flipud"],
     ["--rot90", "1", "--flipud"], 11),
    ("0.4 square fliplr+rot90 2", "0.4", "224x224", ["--acq-fliplr", "--acq-rot90", "2"],
     ["--fliplr", "--rot90", "2"], 12),
    ("0.4 non-square names-yx rot90 3", "0.4", "192x256", ["--acq-rot90", "3", "--names-yx"],
     ["--rot90", "3", "--names-yx"], 13),
]
OVERLAP = 36


def simulate(out, fmt, tile, acq, seed, truth=None):
    cmd = [rp.BIN, "simulate", "-o", out, "--grid", "6x5", "--tile", tile, "--overlap", str(OVERLAP),
           "--jitter", "4", "--noise", "20", "--blank", "0.1", "--missing", "0.05",
           "--format", fmt, "--seed", str(seed), *acq]
    if truth:
        cmd += ["--truth", truth]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)}: {p.stderr.strip()}")


def orient(img, flags):
    if "--flipud" in flags:
        img = np.flipud(img)
    if "--fliplr" in flags:
        img = np.fliplr(img)
    return np.rot90(img, int(flags[flags.index("--rot90") + 1]) if "--rot90" in flags else 0)


def read_tiles(plate04, flags):
    """Oriented, smoothed tiles; blank ones (no specimen) and the spread scale."""
    g = zarr.open_group(plate04, mode="r")
    names = [im["path"] for im in g["A/1"].attrs["well"]["images"]]
    tiles = {n: ndi.gaussian_filter(orient(g[f"A/1/{n}/0"][0, 0, 0].astype(np.float64), flags), 2)
             for n in names}
    spread = {n: t.std() for n, t in tiles.items()}
    scale = np.median(list(spread.values()))
    return tiles, {n for n, s in spread.items() if s < 0.1 * scale}, scale


def informative_tiles(tiles, truth, scale, names_yx):
    """Tiles with at least one neighbour whose true overlap shows structure
    in both tiles (what any registration needs)."""
    def grid(n):
        x, y = int(n[:3]), int(n[3:])
        return (y, x) if names_yx else (x, y)
    where = {grid(n): n for n in tiles}
    good = set()
    for n in tiles:
        gx, gy = grid(n)
        for nb in (where.get((gx + 1, gy)), where.get((gx, gy + 1))):
            if nb is None:
                continue
            pa, pb = np.array(truth[f"A/1/{n}"]), np.array(truth[f"A/1/{nb}"])
            d = np.round(pb - pa).astype(int)
            a, b = tiles[n], tiles[nb]
            H, W = a.shape
            ya0, xa0, ya1, xa1 = max(0, d[0]), max(0, d[1]), min(H, H + d[0]), min(W, W + d[1])
            if ya1 - ya0 < 4 or xa1 - xa0 < 4:
                continue
            oa = a[ya0:ya1, xa0:xa1]
            ob = b[ya0 - d[0]:ya1 - d[0], xa0 - d[1]:xa1 - d[1]]
            if min(oa.std(), ob.std()) > 0.25 * scale:
                good.update((n, nb))
    return good


def main():
    failures = []
    tmp = os.path.join(rp.TMP, "estimate_simulated")
    os.makedirs(tmp, exist_ok=True)
    for label, fmt, tile, acq, flags, seed in CASES:
        plate = os.path.join(tmp, f"plate{seed}.zarr")
        truth_file = os.path.join(tmp, f"truth{seed}.yaml")
        simulate(plate, fmt, tile, acq, seed, truth_file)
        plate04 = plate
        if fmt != "0.4":
            plate04 = os.path.join(tmp, f"plate{seed}_04.zarr")
            simulate(plate04, "0.4", tile, acq, seed)
        tiles, blank, scale = read_tiles(plate04, flags)
        names = list(tiles)
        out = os.path.join(tmp, f"shifts{seed}.yaml")
        summary = rp.run_estimate(plate, out, "--overlap", OVERLAP, *flags)
        s = rp.read_shifts(out)
        truth = rp.read_shifts(truth_file)
        tp, ep = truth["positions"], s["positions"]
        informative = informative_tiles(tiles, tp, scale, "--names-yx" in flags)
        feat = [k for k in tp if k.split("/")[-1] in informative]
        rest = [k for k in tp if k.split("/")[-1] not in informative]
        t = np.array([tp[k] for k in feat])
        e = np.array([ep[k] for k in feat])
        offset = np.median(e - t, axis=0)
        d = e - t - offset
        err = np.hypot(d[:, 0], d[:, 1])
        for k in rest:  # placed on the grid: within the jitter (+-4 px per axis, both tiles)
            r = np.subtract(ep[k], tp[k]) - offset
            if np.abs(r).max() > 2 * 4 + 1:
                failures.append(f"{label}: tile {k} without informative overlaps is {r} px off")
        pairs = rp.pairs_by_names(s)
        blank_conf = [c for (a, b), (_, _, c) in pairs.items() if a in blank or b in blank]
        good_conf = [c for (a, b), (_, _, c) in pairs.items() if a not in blank and b not in blank]
        print(f"{label}: {len(names)} tiles ({len(blank)} blank, {len(rest)} without informative "
              f"overlaps), {summary['pairs']} pairs ({summary['unmatched_pairs']} unmatched left out); "
              f"error median {np.median(err):.3f} max {err.max():.3f} px; "
              f"confidence blank pairs max {max(blank_conf, default=0):.3f}, "
              f"feature pairs median {np.median(good_conf):.3f} min {min(good_conf):.3f}; "
              f"tile_shape {s['tile_shape']}")
        if np.median(err) > 0.3:
            failures.append(f"{label}: median position error {np.median(err):.3f} px > 0.3")
        if err.max() > 1.0:
            worst = feat[int(np.argmax(err))]
            failures.append(f"{label}: tile {worst} off by {err.max():.3f} px > 1")
        if not blank:
            failures.append(f"{label}: no blank tile found in the plate (test setup)")
        # a blank tile's pairs are no measurement: left out (the tile falls
        # back to its grid position) or kept with a low confidence
        if summary["unmatched_pairs"] == 0:
            failures.append(f"{label}: no unmatched pair although {len(blank)} tiles are blank")
        if blank_conf and max(blank_conf) >= 0.2:
            failures.append(f"{label}: a pair with a blank tile has confidence {max(blank_conf):.3f}")
        if np.median(good_conf) < 0.4:
            failures.append(f"{label}: feature pairs have median confidence {np.median(good_conf):.3f}")
        # the oriented tile shape is recorded (odd rot90 swaps the stored H, W)
        h, w = map(int, tile.split("x"))
        k = int(flags[flags.index("--rot90") + 1]) % 4
        want_shape = [w, h] if k % 2 else [h, w]
        if s["tile_shape"] != want_shape:
            failures.append(f"{label}: tile_shape {s['tile_shape']}, want {want_shape}")
        if s["orientation"]["rot90"] != k:
            failures.append(f"{label}: orientation {s['orientation']} not recorded")
    finish(failures)


if __name__ == "__main__":
    main()
