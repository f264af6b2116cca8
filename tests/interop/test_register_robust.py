"""estimate on hard real-image plates (docs/register.md, "Stage model"):
tiles cut from real images with known origins (register_plates.cut_plate),
stage jitter that leaves true overlaps down to 40% of the nominal one,
low-contrast phase-contrast tiles, 10% blank tiles, overlaps of 5% of the
tile, a rotated and mirrored camera. Specimens: Debian's python3-skimage
images (cell.png, ihc.png, hubble_deep_field.jpg) and the stitch2d SEM tiles
of ../shared/testdata, pasted at their reference origins into one mosaic.

Checks, against the cut positions only:
- every tile with content within 1 px of the truth (rounded origins and
  float positions); within 0.3 px (float) on every plate but cell16_blank.
  The phase-contrast plates were 0.44 and 0.87 px off before the
  noise-gated refinement (src/register/refine.c, docs/register.md);
- cell16_blank (overlaps down to 6 px of a faint texture under read
  noise) is beyond a per-plate 0.3 px for any method: on 60 seeds the
  time-delay bound (register_bound.py) leaves 12 plates over it. Its test
  plate's worst tile is 0.73 px (0.33 with the Gaussian re-fit before): a
  6 px overlap, the tile's only pair, whose fit spreads 0.72 px over 30
  draws of fresh noise (0.65 before) against the bound's 0.2. So both
  phase-contrast recipes are checked against that bound instead: over
  seeds 101-130, tessera's mean worst tile at most SWEEP_RATIO times the
  bound's on the same plates (1.26 and 1.18 now, 1.36 and 1.29 with the
  Gaussian-smoothed refinement before; docs/register.md, step 8);
- every pair touching a blank tile unmatched (left out of the file);
- a tile whose grid neighbours are all blank (ihc16_blank seed 105), and
  four tiles cut off by blank ones (seed 117), placed by their diagonal
  neighbours (register/bridge.c) and named (--json bridged_tiles,
  first_bridged_tile), and `tessera solve` on the file placing them as
  estimate did; no other plate names a bridged tile;
- a tile with content whose grid neighbours are all blank and whose
  diagonal corner matched but too ambiguously for a bridge (ihc16_blank
  seed 114) left on its stage position and named (--json stranded_tiles,
  first_stranded_tile); no other plate names one;
- the tiles with pairs form one group (no row cut off);
- a blank tile has no pair, so lands on the grid (no check of where).

`test_register_robust.py --table [ESTIMATE ARGS]` prints the per-plate
figures instead (the table in docs/register.md; TESSERA_BIN selects the
binary, e.g. `--table --no-stage-model`) and checks nothing.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_bound as rb  # noqa: E402
import register_plates as rp  # noqa: E402
from interop_checks import check, finish  # noqa: E402

BIN = os.environ.get("TESSERA_BIN", "tessera")
TMP = tempfile.mkdtemp(prefix="robust_", dir=os.environ.get("TESSERA_TEST_TMP"))
SKDATA = "/usr/lib/python3/dist-packages/skimage/data"
TESTDATA = os.environ.get("TESSERA_TESTDATA") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "testdata")


def gray(name):
    from skimage import io
    img = io.imread(os.path.join(SKDATA, name)).astype(np.float64)
    return img[..., :3].mean(axis=2) if img.ndim == 3 else img


def zoom(img, f=2):
    """Bilinear upsampling (larger plates from the small sample images)."""
    from scipy import ndimage
    return ndimage.zoom(img, f, order=1)


def sem_mosaic():
    """The 6 stitch2d SEM tiles pasted at their (rounded) reference origins."""
    from skimage import io
    ref = {"0 0": (0.0, 9.73), "0 1": (395.92, 4.92), "0 2": (791.53, 0.0),
           "1 0": (2.28, 389.54), "1 1": (398.64, 384.71), "1 2": (794.42, 379.55)}
    d = os.path.join(TESTDATA, "stitch2d")
    files = {}
    for root, _dirs, names in os.walk(d):
        for n in names:
            for k in ref:
                if f"Grid@{k}" in n and n.lower().endswith((".jpg", ".jpeg")):
                    files[k] = os.path.join(root, n)
    if len(files) != 6:
        raise SystemExit(f"stitch2d tiles not found under {d}")
    tiles = {k: io.imread(f).astype(np.float64) for k, f in files.items()}
    tiles = {k: t.mean(axis=2) if t.ndim == 3 else t for k, t in tiles.items()}
    h, w = tiles["0 0"].shape
    out = np.zeros((int(max(v[0] for v in ref.values())) + h + 1, int(max(v[1] for v in ref.values())) + w + 1))
    for k, (y, x) in ref.items():
        y, x = int(round(y)), int(round(x))
        out[y:y + h, x:x + w] = tiles[k]
    # The frame the pasting leaves uncovered (< 10 px) is cropped.
    return out[10:785 + h - 10, 10:380 + w - 10]


def camera(img, rng, gain, offset, noise):
    """A low-contrast camera: intensities scaled around an offset, Gaussian
    read noise, uint16."""
    v = offset + gain * (img - img.mean()) + rng.normal(0, noise, img.shape)
    return np.clip(np.rint(v), 0, 65535).astype(np.uint16)


def make(name, img, cols, rows, tile, overlap, jitter, seed, blank=0.0, gain=1.0, noise=2.0,
         rot90=0, fliplr=False, float_px=0.3, shift_row=None, unfitted=None, untrusted=None, bridged=None,
         stranded=None):
    """One plate: tiles cut at known origins, each through the camera; a
    fraction `blank` of them replaced by noise only; the stored tiles are
    the camera's (rot90/fliplr undone by estimate's flags). shift_row=(row,
    dy): that grid row cut dy px lower (a stage that slipped)."""
    rng = np.random.default_rng(seed + 1000)
    th, tw = (tile, tile) if np.isscalar(tile) else tile
    oy, ox = (overlap, overlap) if np.isscalar(overlap) else overlap
    # As many tiles as the image holds, at most cols x rows.
    cols = min(cols, (img.shape[1] - tw - 2 * jitter) // (tw - ox) + 1)
    rows = min(rows, (img.shape[0] - th - 2 * jitter) // (th - oy) + 1)
    tiles, origins = rp.cut_plate(img, cols, rows, tile, overlap, jitter, seed=seed)
    if shift_row:
        for n, (y, x) in list(origins.items()):
            if int(n[3:]) == shift_row[0]:
                origins[n] = (y + shift_row[1], x)
                tiles[n] = np.ascontiguousarray(img[y + shift_row[1]:y + shift_row[1] + th, x:x + tw])
    names = sorted(tiles)
    nblank = int(round(blank * len(names)))
    blanks = set(rng.choice(names, size=nblank, replace=False).tolist()) if nblank else set()
    stored = {}
    for n in names:
        t = tiles[n] if n not in blanks else np.full(tiles[n].shape, img.mean())
        t = camera(t, rng, gain, 1000.0, noise)
        # estimate applies rot90(fliplr(t), k): the camera stored the inverse.
        t = np.rot90(t, -rot90)
        if fliplr:
            t = np.fliplr(t)
        stored[n] = np.ascontiguousarray(t)
    plate = os.path.join(TMP, name + ".zarr")
    rp.write_plate(plate, stored)
    args = ["--overlap-x", ox, "--overlap-y", oy]
    if rot90:
        args += ["--rot90", rot90]
    if fliplr:
        args += ["--fliplr"]
    return {"name": name, "plate": plate, "origins": origins, "blank": blanks, "args": args, "float_px": float_px,
            "unfitted": unfitted, "untrusted": untrusted, "bridged": bridged, "stranded": stranded}


# The recipes (bench/register_crb.py runs them at other seeds too):
# name: (specimen, cols, rows, tile, overlap, jitter, make() keywords).
RECIPES = {
    # Phase contrast (a cell in saline: faint texture), 160x200 tiles,
    # overlap 24, jitter +-7: true overlaps 10-38 px (down to 42%).
    "cell24": ("cell", 6, 9, (160, 200), 24, 7, dict(noise=1.5)),
    # The same specimen, overlap 16 px (jitter +-5: down to 6 px), 10% blank.
    "cell16_blank": ("cell", 6, 9, (160, 200), 16, 5, dict(blank=0.1, noise=1.5)),
    # Tissue (IHC), overlap 16 of 128, jitter +-5, 10% blank tiles.
    "ihc16_blank": ("ihc", 8, 8, 128, 16, 5, dict(blank=0.1)),
    # Sparse galaxies, overlap 10 of 200 (5%), jitter +-3 (down to 4 px).
    "hubble5pct": ("hubble", 5, 4, 200, 10, 3, dict(noise=3.0)),
    # SEM, camera turned and mirrored (--rot90 1 --fliplr), overlap 24 of
    # 160, jitter +-7.
    "sem_rot": ("sem", 5, 7, 160, 24, 7, dict(rot90=1, fliplr=True)),
}

_SPECIMENS = {}


def specimen(name):
    """The specimen image a recipe cuts its tiles from (loaded once)."""
    if name not in _SPECIMENS:
        _SPECIMENS[name] = {"cell": lambda: zoom(gray("cell.png"), 1.5), "ihc": lambda: zoom(gray("ihc.png")),
                            "hubble": lambda: gray("hubble_deep_field.jpg"), "sem": sem_mosaic}[name]()
    return _SPECIMENS[name]


def make_recipe(recipe, seed, name=None, **more):
    """A plate of a recipe at a seed (named recipe_sSEED unless told)."""
    key, cols, rows, tile, overlap, jitter, kw = RECIPES[recipe]
    return make(name or f"{recipe}_s{seed}", specimen(key), cols, rows, tile, overlap, jitter, seed=seed,
                **kw, **more)


def plates():
    out = []
    out.append(make_recipe("cell24", 3, "cell24"))
    # The same recipe at another seed: 0.65 px off while the stage model's
    # re-fit was held within 1 px of the window's integer maximum (a flat
    # NCC's maximum a pixel off, the refinement thrown away); 0.21 now.
    out.append(make_recipe("cell24", 403))
    out.append(make_recipe("cell16_blank", 5, "cell16_blank", float_px=None))
    out.append(make_recipe("ihc16_blank", 7, "ihc16_blank"))
    # The same at another seed: a blank tile's pair (its window maximum NCC
    # 0.15 at a 5-px overlap) was accepted while the maximum was judged
    # against one draw of unrelated content (strip b mirrored), which came
    # out low (0.054); the best of three draws is not (reregister.c).
    out.append(make_recipe("ihc16_blank", 102))
    # Seed 105: every grid neighbour of tile 003007 (bottom row) is blank;
    # no grid pair places it, and it landed on its stage position, 5.3 px
    # off. Its diagonal neighbours' corners do (src/register/bridge.c), and
    # the run names it. Seed 117: four tiles cut off by blank ones were a
    # group of their own, anchored on the grid, 3.4 px off; bridged, named.
    out.append(make_recipe("ihc16_blank", 105, bridged=(1, "003007")))
    out.append(make_recipe("ihc16_blank", 117, bridged=(4, "005007")))
    # Seed 114: the corner tile 007007's grid neighbours are both blank,
    # and its diagonal corner's maximum (NCC 0.97) has a rival maximum at
    # 0.85, too close for a bridge (bridge.c, BRIDGE_RIVAL): no pair places
    # it, and it stays on its stage position, 4.6 px off. It was said
    # nowhere (one of "7 isolated tiles", the others blank). The run must
    # name it (well_qc stranded_tiles, first_stranded_tile, the summary
    # line); the tile is left out of the accuracy checks, the others not.
    out.append(make_recipe("ihc16_blank", 114, stranded="007007"))
    out.append(make_recipe("hubble5pct", 11, "hubble5pct"))
    # Seed 151: the corner tile's left pair has 4 px of overlap (40% of the
    # nominal, below the candidates' 50%), and its maximum, on a broad hump
    # of background at 9 px, fits no sub-pixel model (unfitted); the loop
    # check's stage model, fitted from pairs that favour the larger
    # overlaps, condemned the right upper pair instead: the tile 5.0 px
    # off, exit 0. Now the unfitted match weighs a tenth and the loop check
    # condemns it (solve/loops.c, WEIGHT_GAP): 0.10 px.
    out.append(make_recipe("hubble5pct", 151, unfitted=1))
    # Seed 147: both of that corner tile's pairs have 4 px overlaps, one
    # unfitted and 5 px off, the other 2.2 px off at confidence 0.05; no
    # pair places the tile, which lands 5 px off. The run must say so, and
    # name it (well_qc untrusted_tiles, first_untrusted_tile, the summary
    # line); the tile is left out of the accuracy checks, the others not.
    out.append(make_recipe("hubble5pct", 147, untrusted="004003"))
    # A row cut off: two columns of SEM tiles, overlap 24 of 160, jitter +-4,
    # row 3 slipped 10 px down: 9 and 12 px of overlap above it (both pairs
    # unmatched in the first pass: the rows below were a group of their own,
    # anchored on the grid, 4 px off), 30-38 px below (deeper than the 30-px
    # strips). Of 18 such plates (seeds 17-22; jitter 4-5, slip 10-12) 8 had
    # the row cut off before, none now.
    out.append(make("sem_row_cut", specimen("sem"), 2, 7, 160, 24, 4, seed=19, shift_row=(3, 10)))
    out.append(make_recipe("sem_rot", 13, "sem_rot"))
    return out


def evaluate(p, out_yaml, summary):
    """Per plate: tile errors (float and rounded) of the tiles with content
    after removing the frame offset (the median), and the pairs touching a
    blank tile that matched."""
    with open(out_yaml) as f:
        s = yaml.safe_load(f)
    well = "A/1"
    pos, tt = s["positions"], s["total_translation"]
    wq = summary["well_qc"][0]
    named = (wq.get("first_untrusted_tile") or "").split("/")[-1] if wq.get("untrusted_tiles") == 1 else None
    bridged = (wq.get("bridged_tiles"), (wq.get("first_bridged_tile") or "").split("/")[-1] or None)
    stranded = (wq.get("stranded_tiles"), (wq.get("first_stranded_tile") or "").split("/")[-1] or None)
    content = [n for n in sorted(p["origins"]) if n not in p["blank"] and not (p.get("untrusted") and n == named)
               and not (p.get("stranded") and n == stranded[1])]
    truth = np.array([p["origins"][n] for n in content], dtype=np.float64)
    got = np.array([pos[f"{well}/{n}"] for n in content])
    rounded = np.array([tt[f"{well}/{n}"] for n in content], dtype=np.float64)
    d = got - truth
    off = np.median(d, axis=0)
    err = np.hypot(*(d - off).T)
    offr = np.round(off)
    errr = np.abs(rounded - truth - offr).max(axis=1)
    pairs = {(a.split("/")[-1], b.split("/")[-1]): (dy, dx) for a, b, dy, dx, *_ in s["pairs"][well]}
    blank_pairs = [(a, b) for a, b, *_ in s["pairs"][well]
                   if a.split("/")[-1] in p["blank"] or b.split("/")[-1] in p["blank"]]
    paired = {t for a, b, *_ in s["pairs"][well] for t in (a, b)}
    alone = [n for n in sorted(p["origins"]) if f"{well}/{n}" not in paired]
    return {"max": float(err.max()), "median": float(np.median(err)), "over1": int((errr > 1).sum()),
            "alone": len(alone), "alone_content": sum(n not in p["blank"] for n in alone),
            "over03": int((err > 0.3).sum()), "tiles": len(content), "blank_matched": len(blank_pairs),
            "unmatched": summary.get("unmatched_pairs"), "reregistered": summary.get("reregistered_pairs", "-"),
            "unfitted": summary.get("unfitted_pairs"), "named_untrusted": named, "pairs": pairs, "bridged": bridged,
            "stranded": stranded,
            "worst": content[int(err.argmax())],
            "groups": sum(w["groups"] - w["isolated_tiles"] for w in summary["well_qc"])}


def run_plate(p, more=(), threads=2, binary=None):
    out = os.path.join(TMP, p["name"] + ".yaml")
    cmd = [binary or BIN, "estimate", p["plate"], "-o", out, "--json", "--threads", str(threads), "--accept-poor",
           *map(str, p["args"]), *more]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}"
    return evaluate(p, out, json.loads(r.stdout)), None


# The phase-contrast recipes over many seeds, against the bound.
SWEEP = ("cell24", "cell16_blank")
SWEEP_SEEDS = range(101, 131)
SWEEP_RATIO = 1.3
# The pairs whose bound is rb.SD_MATTERS px or more (those that leave the
# worst tile its uncertainty): the rms of their errors per axis, in the
# bound's deviations, at most this (an efficient estimator 1.00; measured
# 1.18 on cell16_blank, 1.16 on cell24).
SWEEP_SD = 1.35


def sweep():
    """Per recipe: tessera's mean worst tile over SWEEP_SEEDS against the
    time-delay bound's (an efficient estimator's, sampled) on the same
    plates, and the pairs' errors against their own bounds (SWEEP_SD); and
    on every plate, no tile over 1 px and no blank tile's pair matched."""
    import shutil
    cell = specimen("cell")
    gy, gx = rb.spectral_gradient(cell)
    rng = np.random.default_rng(12345)
    for name in SWEEP:
        tile, kw = RECIPES[name][3], RECIPES[name][6]
        sigma2 = kw["noise"] ** 2 + 1.0 / 12.0
        worst, bound, over, zs = [], [], 0, []
        for seed in SWEEP_SEEDS:
            p = make_recipe(name, seed)
            r, why = run_plate(p)
            shutil.rmtree(p["plate"], ignore_errors=True)
            if r is None:
                check(False, why)
                continue
            check(r["over1"] == 0, f"{name}_s{seed}: {r['over1']} tiles with content more than 1 px off (rounded)")
            check(r["blank_matched"] == 0, f"{name}_s{seed}: {r['blank_matched']} pairs with a blank tile matched")
            infos, content = rb.plate_infos(p, cell, gy, gx, tile, sigma2)
            bound.append(rb.worst_tile_draws(len(content), infos["time_delay"], rng, 500).mean())
            for _, J, e in rb.pair_errors(p, content, infos["time_delay"], r["pairs"]):
                z, sd = rb.errors_in_sd(e, J)
                if sd >= rb.SD_MATTERS:
                    zs.append(z)
            worst.append(r["max"])
            over += r["max"] > 0.3
        if not worst:
            continue
        ratio = np.mean(worst) / np.mean(bound)
        print(f"{name}, seeds {SWEEP_SEEDS.start}-{SWEEP_SEEDS.stop - 1}: mean worst tile {np.mean(worst):.3f} px "
              f"(bound {np.mean(bound):.3f}, ratio {ratio:.2f}), {over} of {len(worst)} plates over 0.3 px")
        check(ratio <= SWEEP_RATIO, f"{name}: mean worst tile {np.mean(worst):.3f} px is {ratio:.2f}x the bound's "
              f"{np.mean(bound):.3f} (want <= {SWEEP_RATIO}x)")
        rms = float(np.sqrt((np.asarray(zs) ** 2).mean())) if zs else float("inf")
        print(f"{name}: {len(zs)} pairs whose bound is {rb.SD_MATTERS} px or more: rms error {rms:.2f} of their "
              f"bounds' deviations")
        check(rms <= SWEEP_SD, f"{name}: the pairs whose bound is {rb.SD_MATTERS} px or more are {rms:.2f} of its "
              f"deviations off (rms; want <= {SWEEP_SD})")


def main():
    table = "--table" in sys.argv
    more = sys.argv[sys.argv.index("--table") + 1:] if table else []
    if table:
        print("| plate | tiles | worst tile (px) | median (px) | tiles > 0.3 px | tiles > 1 px (rounded) "
              "| blank-tile pairs matched | unmatched pairs | re-registered |")
        print("|---|---|---|---|---|---|---|---|---|")
    for p in plates():
        r, why = run_plate(p, more)
        if r is None:
            if table:
                print(f"| {p['name']} | failed: {why} |")
            else:
                check(False, why)
            continue
        if table:
            print(f"| {p['name']} | {r['tiles']} | {r['max']:.2f} | {r['median']:.3f} | {r['over03']} | "
                  f"{r['over1']} | {r['blank_matched']} | {r['unmatched']} | {r['reregistered']} |")
            continue
        print(f"{p['name']}: worst {r['max']:.3f} px ({r['worst']}), median {r['median']:.3f}, "
              f"{r['unmatched']} unmatched, {r['reregistered']} re-registered")
        check(r["over1"] == 0, f"{p['name']}: {r['over1']} tiles with content more than 1 px off (rounded)")
        check(p["float_px"] is None or r["max"] <= p["float_px"],
              f"{p['name']}: tile {r['worst']} is {r['max']:.2f} px off (float, want <= {p['float_px']})")
        check(r["groups"] == 1, f"{p['name']}: the tiles with pairs form {r['groups']} groups, want 1")
        check(r["blank_matched"] == 0, f"{p['name']}: {r['blank_matched']} pairs with a blank tile matched")
        check(p["unfitted"] is None or r["unfitted"] == p["unfitted"],
              f"{p['name']}: --json unfitted_pairs {r['unfitted']}, want {p['unfitted']}")
        check(p["untrusted"] is None or r["named_untrusted"] == p["untrusted"],
              f"{p['name']}: the tile placed by untrusted pairs only named {r['named_untrusted']}, want {p['untrusted']}")
        # Tiles placed through diagonal neighbours are said and named;
        # none elsewhere (no plate but these two has a tile the grid pairs
        # leave outside the largest group).
        want = tuple(p["bridged"]) if p["bridged"] else (0, None)
        check(r["bridged"] == want, f"{p['name']}: --json bridged_tiles, first_bridged_tile {r['bridged']}, want {want}")
        # A tile with content that no pair places is named (none elsewhere).
        want = (1, p["stranded"]) if p["stranded"] else (0, None)
        check(r["stranded"] == want,
              f"{p['name']}: --json stranded_tiles, first_stranded_tile {r['stranded']}, want {want}")
        if p["bridged"]:  # the diagonal pairs are in the file: `tessera solve` places the tiles as estimate did
            out = os.path.join(TMP, p["name"] + ".yaml")
            re_out = os.path.join(TMP, p["name"] + ".resolved.yaml")
            rs = subprocess.run([BIN, "solve", out, "-o", re_out], capture_output=True, text=True)
            with open(out) as f1, open(re_out) as f2:
                same = rs.returncode == 0 and yaml.safe_load(f1)["positions"] == yaml.safe_load(f2)["positions"]
            check(same, f"{p['name']}: tessera solve on the shifts file does not give estimate's positions")
    if not table:
        sweep()
        finish()


if __name__ == "__main__":
    main()
