"""tessera preview of a fused mosaic, checked against numpy + PIL.

A simulated plate is fused (0.4, one channel, with pyramid levels); the PNG
must have the size the level choice implies, its grey levels must follow a
numpy mean-downsample of the level zarr-python reads, and --shifts must draw
coloured outlines on the grey picture. Input plates (many images per well)
need --shifts, which lays their tiles out (checked against numpy placing
the oriented tiles at the truth origins).
"""
import json
import os
import shutil

import numpy as np
import yaml
import zarr
from PIL import Image
from interop_checks import check, finish, run

TMP = os.path.join(os.environ["TESSERA_TEST_TMP"], "preview_py")


def claim_huge_plane(zarray):
    """Rewrites a v2 array's shape to a 2^40 x 2^40 plane (metadata only)."""
    with open(zarray) as f:
        zmeta = json.load(f)
    zmeta["shape"][-2:] = [2 ** 40, 2 ** 40]
    with open(zarray, "w") as f:
        json.dump(zmeta, f)


def picture(H, W, max_size):
    """tessera's picture size: the longest side max_size (never enlarged)."""
    longest = max(H, W)
    sc = max_size / longest if longest > max_size else 1.0
    return sc, min(max(1, int(np.floor(H * sc + 0.5))), max_size), min(max(1, int(np.floor(W * sc + 0.5))), max_size)


def bin_mean(a, sc, oh, ow):
    """Mean of the pixels of a falling into each picture pixel."""
    rows = np.minimum((np.arange(a.shape[0]) * sc).astype(np.int64), oh - 1)
    cols = np.minimum((np.arange(a.shape[1]) * sc).astype(np.int64), ow - 1)
    acc = np.zeros((oh, ow))
    cnt = np.zeros((oh, ow))
    np.add.at(acc, (rows[:, None], cols[None, :]), a)
    np.add.at(cnt, (rows[:, None], cols[None, :]), 1)
    return acc / np.maximum(cnt, 1)


def main():
    if os.path.exists(TMP):
        shutil.rmtree(TMP)
    os.makedirs(TMP)
    plate, truth, out = (os.path.join(TMP, n) for n in ("in.zarr", "truth.yaml", "out.zarr"))
    run("simulate", "-o", plate, "--grid", "4x3", "--tile", "160x200", "--overlap", "24",
        "--format", "0.4", "--truth", truth, "--seed", "5", "-q")
    run("fuse", plate, truth, "-o", out, "--format", "0.4", "--levels", "2", "--chunk", "128")

    g = zarr.open(out, mode="r")
    lv = [g[f"A/1/0/{k}"] for k in range(3)]

    # tessera info on the fused output: one image per well, its pyramid
    info = json.loads(run("info", out, "--json").stdout)
    check(info["npositions"] == 1 and info["wells"][0]["first"] == "0", f"fused info wells {info['wells']}")
    levels = info["image"]["levels"]
    check([l["shape"] for l in levels] == [list(a.shape) for a in lv], f"fused info levels {[l.get('shape') for l in levels]}")
    check([l["chunk_shape"] for l in levels] == [list(a.chunks) for a in lv], "fused info chunks")
    check(info["image"]["tile_shape"] == list(lv[0].shape[-2:]), "fused info tile_shape")
    sides = [max(a.shape[-2:]) for a in lv]
    for max_size in (100, 217, sides[1], 1000):
        png = os.path.join(TMP, f"p{max_size}.png")
        run("preview", out, "-o", png, "--max-size", str(max_size))
        im = np.asarray(Image.open(png).convert("RGB")).astype(float)
        # the level: smallest whose longest side reaches max_size, else 0
        cands = [k for k, s in enumerate(sides) if s >= max_size]
        k = min(cands, key=lambda j: sides[j]) if cands else 0
        ref = lv[k][0, 0, 0].astype(float)
        H, W = ref.shape
        # --max-size N gives N: the longest side is binned to N px exactly
        # (pixel p into bin floor(p * N / longest)), never enlarged
        sc, oh, ow = picture(H, W, max_size)
        check(im.shape[:2] == (oh, ow), f"max {max_size}: PNG {im.shape[:2]} != expected {(oh, ow)} (level {k})")
        check(max(im.shape[:2]) == min(max_size, max(H, W)), f"max {max_size}: longest side {max(im.shape[:2])}")
        if im.shape[:2] != (oh, ow):
            continue
        ds = bin_mean(ref, sc, oh, ow)
        grey = im[..., 0]
        check(np.array_equal(im[..., 0], im[..., 1]) and np.array_equal(im[..., 1], im[..., 2]),
              "one channel should give a grey picture")
        r = np.corrcoef(grey.ravel(), ds.ravel())[0, 1]
        check(r > 0.95, f"max {max_size}: picture does not follow the downsampled mosaic (r = {r:.3f})")
        check(grey.max() == 255 and grey.min() == 0, "no contrast stretch to the full range")
        print(f"max-size {max_size}: level {k}, scale {sc:.4f}, {ow}x{oh}, r = {r:.4f}")

    png = os.path.join(TMP, "outlines.png")
    run("preview", out, "-o", png, "--shifts", truth, "--max-size", "300")
    im = np.asarray(Image.open(png).convert("RGB")).astype(int)
    # a truth file has no pairs: tile outlines only, in a blue-grey apart
    # from the grey picture
    outline = (im[..., 2] - im[..., 0] > 20) & (np.abs(im[..., 0] - im[..., 1]) < 4)
    check(outline.sum() > 100, f"--shifts drew {outline.sum()} outline pixels")

    # Seams (issue 9): estimate's pairs drawn across each overlap, coloured
    # by residual; one pair made an outlier (magenta) and one unmatched
    # (confidence 0: blue); the legend in the corner. The seam of a pair
    # lies midway in the two tiles' overlap.
    est = os.path.join(TMP, "est.yaml")
    run("estimate", plate, "-o", est, "--overlap", "24")
    with open(est) as f:
        doc = yaml.safe_load(f)
    pairs = doc["pairs"]["A/1"]
    tt = doc["total_translation"]
    th, tw = doc["tile_shape"]
    horiz = [i for i, p in enumerate(pairs) if abs(p[3]) > abs(p[2])]
    vert = [i for i, p in enumerate(pairs) if abs(p[3]) <= abs(p[2])]
    out_i, weak_i = horiz[0], vert[-1]
    pairs[weak_i][4] = 0.0
    doc["outliers"] = {"A/1": [out_i]}
    doc.pop("residuals", None)
    doc.pop("confidence", None)
    marked = os.path.join(TMP, "marked.yaml")
    with open(marked, "w") as f:
        yaml.safe_dump(doc, f)
    png = os.path.join(TMP, "seams.png")
    run("preview", out, "-o", png, "--shifts", marked, "--max-size", "600")
    im = np.asarray(Image.open(png).convert("RGB")).astype(int)
    sc, _, _ = picture(*lv[0].shape[-2:], 600)

    def seam_colour(i):
        a, b = tt[pairs[i][0]], tt[pairs[i][1]]
        oy0, oy1 = max(a[0], b[0]), min(a[0], b[0]) + th
        ox0, ox1 = max(a[1], b[1]), min(a[1], b[1]) + tw
        y, x = ((oy0 + oy1) / 2, (ox0 + ox1) / 2)
        return im[int(round(y * sc)), int(round(x * sc))]

    magenta, blue = seam_colour(out_i), seam_colour(weak_i)
    check(magenta[0] > 200 and magenta[2] > 200 and magenta[1] < 60, f"outlier seam is not magenta: {magenta}")
    check(blue[2] > 200 and blue[0] < 100, f"unmatched seam is not blue: {blue}")
    good = [seam_colour(i) for i in horiz[1:] + vert[:-1]]
    greenish = sum(1 for c in good if c[1] > 150 and c[2] < 80)
    check(greenish >= len(good) // 2, f"seams of good pairs are not green (residual < 1 px): {good[:6]}")
    corner = im[-40:, :150]
    check(((corner == 255).all(axis=2)).sum() > 20, "no legend text in the corner")

    # an input plate laid out by a shifts file: numpy places the oriented
    # tiles at the truth origins (mean where they overlap) for comparison
    rot = os.path.join(TMP, "rot.zarr")
    rtruth = os.path.join(TMP, "rot.yaml")
    run("simulate", "-o", rot, "--grid", "3x2", "--tile", "90x150", "--overlap", "20", "--acq-rot90", "1",
        "--acq-flipud", "--format", "0.4", "--truth", rtruth, "--seed", "9", "--noise", "0", "-q")
    png = os.path.join(TMP, "rot.png")
    run("preview", rot, "-o", png, "--shifts", rtruth, "--max-size", "64")
    with open(rtruth) as f:
        t = yaml.safe_load(f)
    o = t["orientation"]
    th, tw = t["tile_shape"]
    tt = t["total_translation"]
    H = max(v[0] for v in tt.values()) + th
    W = max(v[1] for v in tt.values()) + tw
    acc, cnt = np.zeros((H, W)), np.zeros((H, W))
    gr = zarr.open(rot, mode="r")
    for name, (y, x) in tt.items():
        a = gr[name + "/0"][0, 0, 0]
        if o["flipud"]:
            a = np.flipud(a)
        if o["fliplr"]:
            a = np.fliplr(a)
        a = np.rot90(a, o["rot90"])
        acc[y:y + th, x:x + tw] += a
        cnt[y:y + th, x:x + tw] += 1
    sc, oh, ow = picture(H, W, 64)
    ds = bin_mean(acc, sc, oh, ow) / np.maximum(bin_mean(cnt, sc, oh, ow), 1e-12)
    im = np.asarray(Image.open(png).convert("RGB")).astype(float)
    check(im.shape[:2] == (oh, ow), f"input-plate preview {im.shape[:2]} != {(oh, ow)}")
    if im.shape[:2] == (oh, ow):
        # the outlines overwrite some pixels: compare the rest
        grey = (im[..., 0] == im[..., 1]) & (im[..., 1] == im[..., 2])
        r = np.corrcoef(im[..., 0][grey], ds[grey])[0, 1]
        check(r > 0.95, f"input-plate preview does not follow the numpy layout (r = {r:.3f})")
        print(f"input plate with rot90 + flipud: {ow}x{oh}, r = {r:.4f} over {grey.sum()} pixels")

    p = run("preview", plate, "-o", os.path.join(TMP, "x.png"), ok=False)
    check(p.returncode == 1 and "--shifts" in p.stderr, f"input plate without shifts: rc {p.returncode} {p.stderr.strip()}")
    check(not os.path.exists(os.path.join(TMP, "x.png")), "a refused preview left a file")
    p = run("preview", out, "-o", os.path.join(TMP, "y.png"), "--well", "H/9", ok=False)
    check(p.returncode != 0 and "H/9" in p.stderr, f"unknown well: {p.stderr.strip()}")

    # a tile whose array claims a 2^40 x 2^40 plane (untrusted metadata): one
    # clear error naming it, no picture (H * W overflowed and crashed)
    huge = os.path.join(TMP, "huge.zarr")
    shutil.copytree(rot, huge)
    claim_huge_plane(os.path.join(huge, "A", "1", "000001", "0", ".zarray"))
    png_huge = os.path.join(TMP, "huge.png")
    p = run("preview", huge, "-o", png_huge, "--shifts", rtruth, ok=False)
    check(p.returncode == 1 and "000001" in p.stderr and "runtime error" not in p.stderr,
          f"huge tile: rc {p.returncode} {p.stderr.strip()}")
    check(not os.path.exists(png_huge), "a failed preview left a file")
    # the same in a single-image (fused-like) well: the band buffer size wrapped
    one = os.path.join(TMP, "one.zarr")
    run("simulate", "-o", one, "--grid", "1x1", "--tile", "64x64", "--format", "0.4", "-q")
    claim_huge_plane(os.path.join(one, "A", "1", "000000", "0", ".zarray"))
    p = run("preview", one, "-o", png_huge, ok=False)
    check(p.returncode == 1 and "too large" in p.stderr and "runtime error" not in p.stderr,
          f"huge mosaic: rc {p.returncode} {p.stderr.strip()}")
    check(not os.path.exists(png_huge), "a failed preview left a file")

    finish()


if __name__ == "__main__":
    main()
