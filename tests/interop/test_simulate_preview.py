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
    for max_size in (100, sides[1], 1000):
        png = os.path.join(TMP, f"p{max_size}.png")
        run("preview", out, "-o", png, "--max-size", str(max_size))
        im = np.asarray(Image.open(png).convert("RGB")).astype(float)
        # the level: smallest whose longest side reaches max_size, else 0
        cands = [k for k, s in enumerate(sides) if s >= max_size]
        k = min(cands, key=lambda j: sides[j]) if cands else 0
        f = -(-sides[k] // max_size)
        ref = lv[k][0, 0, 0].astype(float)
        H, W = ref.shape
        oh, ow = -(-H // f), -(-W // f)
        check(im.shape[:2] == (oh, ow), f"max {max_size}: PNG {im.shape[:2]} != expected {(oh, ow)} (level {k}, f {f})")
        check(max(im.shape[:2]) <= max_size, f"max {max_size}: PNG larger than asked")
        if im.shape[:2] != (oh, ow):
            continue
        pad = np.zeros((oh * f, ow * f))
        cnt = np.zeros_like(pad)
        pad[:H, :W] = ref
        cnt[:H, :W] = 1
        ds = pad.reshape(oh, f, ow, f).sum(axis=(1, 3)) / cnt.reshape(oh, f, ow, f).sum(axis=(1, 3))
        grey = im[..., 0]
        check(np.array_equal(im[..., 0], im[..., 1]) and np.array_equal(im[..., 1], im[..., 2]),
              "one channel should give a grey picture")
        r = np.corrcoef(grey.ravel(), ds.ravel())[0, 1]
        check(r > 0.95, f"max {max_size}: picture does not follow the downsampled mosaic (r = {r:.3f})")
        check(grey.max() == 255 and grey.min() == 0, "no contrast stretch to the full range")
        print(f"max-size {max_size}: level {k}, factor {f}, {ow}x{oh}, r = {r:.4f}")

    png = os.path.join(TMP, "outlines.png")
    run("preview", out, "-o", png, "--shifts", truth, "--max-size", "300")
    im = np.asarray(Image.open(png).convert("RGB")).astype(int)
    coloured = (np.abs(im[..., 0] - im[..., 1]) > 60) | (np.abs(im[..., 1] - im[..., 2]) > 60)
    check(coloured.sum() > 100, f"--shifts drew {coloured.sum()} coloured pixels")

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
    f = -(-max(H, W) // 64)
    oh, ow = -(-H // f), -(-W // f)
    pa, pc = np.zeros((oh * f, ow * f)), np.zeros((oh * f, ow * f))
    pa[:H, :W], pc[:H, :W] = acc, cnt
    ds = pa.reshape(oh, f, ow, f).sum(axis=(1, 3)) / np.maximum(pc.reshape(oh, f, ow, f).sum(axis=(1, 3)), 1)
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
