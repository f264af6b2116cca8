"""`tessera estimate/stitch --positions metadata|FILE` (issue 11): stage
positions instead of the XXXYYY grid, from each tile's OME-NGFF
coordinateTransformations (physical units: translation / scale = px) or from
a Fiji TileConfiguration, as the initial guess, with the neighbour pairs
built from the positions. Every check compares against the simulator's truth
file, Fiji's own files or the names run, never against tessera's own numbers:

- a `tessera simulate` plate (40% jitter) rewritten with zarr-python: fields
  renamed by acquisition index along a serpentine (000000..000029, which as
  XXXYYY names is one column: not the grid), translations in micrometres
  (the truth plus up to 2 px of stage error, plus a stage offset), in
  datasets[0] and, on a second plate, in the multiscale's own transforms:
  every tile within 1 px of the truth, the pairs exactly the true grid
  neighbours; the names run gets them wrong;
- TileConfiguration files in Fiji's format for the same plate, matched in
  order and by image name (shuffled): the same;
- Fiji's own files (starrynight, shared/testdata): the nominal one on a row
  of real tiles gives the names run's output; with the registered one the
  pairs are the tiles that overlap at Fiji's positions (some overlap their
  second neighbour) and the tiles stay near Fiji's positions;
- a regular grid (translations = grid x pitch in micrometres) gives exactly
  the names run's output;
- an OME-Zarr 0.5 plate of two wells with translations in zarr.json: every
  tile within 1 px; one nominal TileConfiguration (by name, reversed) for
  both wells gives the names run's file;
- errors: no translation, a tile without one, coincident positions, no
  overlapping pairs, an unmatched line, too few lines, a malformed line,
  position names that are not XXXYYY (the solve needs them: a known limit),
  --guess with --positions, an empty --positions: exit 1 (2 for usage) with
  one line naming what is at fault, and nothing written;
- stitch --positions writes the shifts of estimate --positions.
"""
import json
import os
import random
import shutil
import sys
import tempfile

import numpy as np
import yaml
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_plates as rp  # noqa: E402
from interop_checks import check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="positions_", dir=os.environ.get("TESSERA_TEST_TMP"))
COLS, ROWS, TILE, OVERLAP, JITTER = 6, 5, 256, 48, 20
PITCH = TILE - OVERLAP
UM = 0.65  # pixel size, micrometres
STAGE = (12345.6, -5432.1)  # stage offset of the first field, micrometres (y, x)
FIJI_HEADER = "# Define the number of dimensions we are working on\ndim = 2\n\n# Define the image coordinates\n"


def path(name):
    return os.path.join(TMP, name)


def load(p):
    with open(p) as f:
        return yaml.safe_load(f)


def estimate(plate, out, *more, ok=True):
    return run("estimate", plate, "-o", out, "--overlap", str(OVERLAP), "--threads", "2", *more, ok=ok)


def grid_of(name):
    """XXXYYY -> (column, row)."""
    return int(name[:3]), int(name[3:6])


def serpentine_index(gx, gy):
    """Acquisition index of grid cell (gx, gy): rows left to right, then
    right to left, alternately."""
    return gy * COLS + (gx if gy % 2 == 0 else COLS - 1 - gx)


def tile_errors(positions, truth):
    """|estimate - truth| per tile after removing the global offset (the
    median difference: a well's origins start at 0, the truth's need not)."""
    names = sorted(truth)
    d = np.array([np.subtract(positions[n], truth[n]) for n in names])
    off = np.median(d, axis=0)
    return dict(zip(names, np.hypot(*(d - off).T)))


def multiscales(name, dataset_ct, multiscale_ct=None):
    ms = {
        "version": "0.4", "name": name,
        "axes": [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
                 {"name": "z", "type": "space", "unit": "micrometer"},
                 {"name": "y", "type": "space", "unit": "micrometer"},
                 {"name": "x", "type": "space", "unit": "micrometer"}],
        "datasets": [{"path": "0", "coordinateTransformations": dataset_ct}],
    }
    if multiscale_ct is not None:
        ms["coordinateTransformations"] = multiscale_ct
    return [ms]


def rewrite(src, dst, rename, stage_um, where="dataset"):
    """A copy of plate src whose fields are renamed ({old: new}, the well's
    images listed in the new names' order) and whose images carry the stage
    positions stage_um ({new name: (y, x) micrometres}, None: no
    translation), written with zarr-python: in datasets[0]'s transforms
    (scale UM, then the translation), or in the multiscale's own (dataset
    scale UM / 2, multiscale scale 2 and the translation)."""
    shutil.copytree(src, dst)
    well = zarr.open_group(os.path.join(dst, "A", "1"), mode="r+")
    for old, new in rename.items():
        os.rename(os.path.join(dst, "A", "1", old), os.path.join(dst, "A", "1", new + ".tmp"))
    for new in rename.values():
        os.rename(os.path.join(dst, "A", "1", new + ".tmp"), os.path.join(dst, "A", "1", new))
    attrs = dict(well.attrs["well"])
    attrs["images"] = [{"path": n, "acquisition": 0} for n in sorted(rename.values())]
    well.attrs["well"] = attrs
    for new in rename.values():
        g = zarr.open_group(os.path.join(dst, "A", "1", new), mode="r+")
        pos = stage_um.get(new)
        trans = None if pos is None else {"type": "translation", "translation": [0.0, 0.0, 0.0, pos[0], pos[1]]}
        if where == "dataset":
            ct = [{"type": "scale", "scale": [1.0, 1.0, 1.0, UM, UM]}] + ([trans] if trans else [])
            g.attrs["multiscales"] = multiscales(new, ct)
        else:
            ct = [{"type": "scale", "scale": [1.0, 1.0, 1.0, UM / 2, UM / 2]}]
            mct = [{"type": "scale", "scale": [1.0, 1.0, 1.0, 2.0, 2.0]}] + ([trans] if trans else [])
            g.attrs["multiscales"] = multiscales(new, ct, mct)
    return dst


def stage_of(px):
    """Origin in px -> stage position in micrometres."""
    return (STAGE[0] + px[0] * UM, STAGE[1] + px[1] * UM)


def write_tile_config(p, lines):
    """lines: [(image name, (y, x) px)], written as Fiji does (x first)."""
    with open(p, "w") as f:
        f.write(FIJI_HEADER)
        for name, (y, x) in lines:
            f.write(f"{name}; ; ({x!r}, {y!r})\n")
    return p


def pair_set(shifts):
    return {tuple(n.split("/")[-1] for n in pr[:2]) for pr in shifts["pairs"]["A/1"]}


def check_error(args, code, must, what):
    out = args[args.index("-o") + 1]
    p = run(*args, ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == code, f"{what}: exit {p.returncode}, want {code} ({p.stderr.strip()!r})")
    check(len(lines) == 1 and all(m in p.stderr for m in must),
          f"{what}: want one line naming {must}, got {p.stderr!r}")
    check(not os.path.exists(out), f"{what}: {out} was written despite the error")


# ------------------------------------------- the simulated serpentine scan
sim, truth_file = path("sim.zarr"), path("truth.yaml")
run("simulate", "-o", sim, "--grid", f"{COLS}x{ROWS}", "--tile", f"{TILE}x{TILE}", "--overlap", str(OVERLAP),
    "--jitter", str(JITTER), "--seed", "1", "--format", "0.4", "--truth", truth_file, "-q")
sim_truth = {k.split("/")[-1]: v for k, v in load(truth_file)["positions"].items()}
rename = {old: f"{serpentine_index(*grid_of(old)):06d}" for old in sim_truth}
truth = {f"A/1/{rename[old]}": v for old, v in sim_truth.items()}
# The stage's own error: up to 2 px per axis, for the registration to correct.
rng = np.random.default_rng(7)
stage_px = {n.split("/")[-1]: (v[0] + rng.uniform(-2, 2), v[1] + rng.uniform(-2, 2)) for n, v in sorted(truth.items())}
stage_err = tile_errors({f"A/1/{n}": v for n, v in stage_px.items()}, truth)
check(max(stage_err.values()) > 1.5, f"fixture: the stage positions are within {max(stage_err.values()):.2f} px of "
      "the truth already; they do not test the registration")
# The true neighbours: grid right and lower neighbours, in the new names.
true_pairs = set()
for old in sim_truth:
    gx, gy = grid_of(old)
    for nx, ny in ((gx + 1, gy), (gx, gy + 1)):
        if nx < COLS and ny < ROWS:
            true_pairs.add((rename[old], rename[f"{nx:03d}{ny:03d}"]))

serp = rewrite(sim, path("serp.zarr"), rename, {n: stage_of(v) for n, v in stage_px.items()})

# The names (one column of 30, the acquisition order) are not the layout.
p = estimate(serp, path("serp_names.yaml"), ok=False)
if p.returncode == 0:
    err = tile_errors(load(path("serp_names.yaml"))["positions"], truth)
    check(max(err.values()) > 5, f"fixture: the names run placed the serpentine within {max(err.values()):.2f} px")
print(f"names on the serpentine: exit {p.returncode}")

for where in ("dataset", "multiscale"):
    plate = serp if where == "dataset" else rewrite(sim, path("serp_ms.zarr"), rename,
                                                    {n: stage_of(v) for n, v in stage_px.items()}, where)
    out = path(f"serp_{where}.yaml")
    summary = json.loads(estimate(plate, out, "--positions", "metadata", "--json").stdout)
    s = load(out)
    err = tile_errors(s["positions"], truth)
    worst = max(err, key=err.get)
    check(err[worst] <= 1.0, f"metadata ({where}): tile {worst} is {err[worst]:.3f} px from the truth (want <= 1)")
    got = pair_set(s)
    check(got <= true_pairs, f"metadata ({where}): pairs that are no neighbours: {sorted(got - true_pairs)[:4]}")
    check(summary["pairs"] + summary["unmatched_pairs"] == len(true_pairs),
          f"metadata ({where}): {summary['pairs']} + {summary['unmatched_pairs']} unmatched pairs, want "
          f"{len(true_pairs)} (the true neighbours)")
    check(len(got) >= len(true_pairs) - 2, f"metadata ({where}): only {len(got)} of {len(true_pairs)} pairs matched")
    print(f"metadata ({where}): worst tile {err[worst]:.3f} px, median {np.median(list(err.values())):.3f} px, "
          f"{len(got)} pairs")

# ------------------------------------------- Fiji TileConfiguration files
order = sorted(stage_px)  # acquisition order, the well's images order
in_order = write_tile_config(path("TileConfiguration.txt"), [(f"tile_{i:03d}.tif", stage_px[n])
                                                            for i, n in enumerate(order)])
shuffled = order[:]
random.Random(3).shuffle(shuffled)
by_name = write_tile_config(path("TileConfiguration.registered.txt"),
                            [(f"{n}.tif", stage_px[n]) for n in shuffled])
plain = rewrite(sim, path("serp_plain.zarr"), rename, {})  # no translations
for what, f in (("in order", in_order), ("by name", by_name)):
    out = path(f"tc_{what.replace(' ', '_')}.yaml")
    estimate(plain, out, "--positions", f)
    s = load(out)
    err = tile_errors(s["positions"], truth)
    worst = max(err, key=err.get)
    check(err[worst] <= 1.0, f"TileConfiguration ({what}): tile {worst} is {err[worst]:.3f} px off (want <= 1)")
    check(pair_set(s) <= true_pairs, f"TileConfiguration ({what}): pairs that are no neighbours")
    print(f"TileConfiguration ({what}): worst tile {err[worst]:.3f} px")
# The same positions from the metadata and from the file: the same result.
check(load(path("tc_in_order.yaml"))["positions"] == load(path("tc_by_name.yaml"))["positions"],
      "TileConfiguration in order and by name placed the tiles differently")

# ------------------------------------ a regular grid: the names' output
grid_um = {n: stage_of((grid_of(n)[1] * PITCH, grid_of(n)[0] * PITCH)) for n in sim_truth}
grid_plate = rewrite(sim, path("grid.zarr"), {n: n for n in sim_truth}, grid_um)
estimate(grid_plate, path("grid_names.yaml"), "--max-shift", "-1")
estimate(grid_plate, path("grid_meta.yaml"), "--max-shift", "-1", "--positions", "metadata")
with open(path("grid_names.yaml")) as f1, open(path("grid_meta.yaml")) as f2:
    same = f1.read() == f2.read()
check(same, "a regular grid: --positions metadata wrote another file than the names")
names_run, meta_run = load(path("grid_names.yaml")), load(path("grid_meta.yaml"))
for key in ("pairs", "total_translation", "positions"):
    check(names_run[key] == meta_run[key], f"a regular grid: --positions metadata changed '{key}'")

# ------------- OME-Zarr 0.5 (zarr v3), two wells: translations in zarr.json
# (zarr-python 2 writes no v3; the attributes are edited as JSON). One
# TileConfiguration by name serves every well: on the nominal grid it is
# the names run.
v5, v5_truth_file = path("v5.zarr"), path("v5.truth.yaml")
run("simulate", "-o", v5, "--wells", "A/1,B/2", "--grid", "4x3", "--tile", "200x240", "--overlap", "40",
    "--jitter", "12", "--seed", "5", "--truth", v5_truth_file, "-q")
v5_truth = load(v5_truth_file)["positions"]
rng5 = np.random.default_rng(9)
for key, (y, x) in sorted(v5_truth.items()):
    meta = os.path.join(v5, key, "zarr.json")
    with open(meta) as f:
        doc = json.load(f)
    ct = doc["attributes"]["ome"]["multiscales"][0]["datasets"][0]["coordinateTransformations"]
    sy, sx = stage_of((y + rng5.uniform(-2, 2), x + rng5.uniform(-2, 2)))
    ct.append({"type": "translation", "translation": [0.0, 0.0, 0.0, sy, sx]})
    with open(meta, "w") as f:
        json.dump(doc, f)
estimate(v5, path("v5.yaml"), "--overlap", "40", "--positions", "metadata")
v5_out = load(path("v5.yaml"))
for well in ("A/1", "B/2"):
    t = {k: v for k, v in v5_truth.items() if k.startswith(well + "/")}
    err = tile_errors({k: v5_out["positions"][k] for k in t}, t)
    check(max(err.values()) <= 1.0, f"0.5 plate, well {well}: a tile is {max(err.values()):.3f} px off (want <= 1)")
    print(f"0.5 plate, well {well}: worst tile {max(err.values()):.3f} px")
v5_names = {k.split("/")[-1] for k in v5_truth}
v5_grid = write_tile_config(path("v5_grid.txt"), [(f"images/{n}.tif", (grid_of(n)[1] * 160.0, grid_of(n)[0] * 200.0))
                                                 for n in sorted(v5_names, reverse=True)])
estimate(v5, path("v5_names.yaml"), "--overlap", "40", "--max-shift", "-1")
estimate(v5, path("v5_tc.yaml"), "--overlap", "40", "--max-shift", "-1", "--positions", v5_grid)
with open(path("v5_names.yaml")) as f1, open(path("v5_tc.yaml")) as f2:
    check(f1.read() == f2.read(), "two wells, a nominal TileConfiguration by name: not the names run's file")

# ------------------------------- Fiji's own files (real tiles, starrynight)
fiji_dir = os.path.join(rp.TESTDATA, "starrynight", "starrynight", "tests", "fixtures", "stitch_images")
if os.path.isdir(fiji_dir):
    import tifffile

    tiles = {i: tifffile.imread(os.path.join(fiji_dir, f"{i}.tif")) for i in range(1, 11)}
    star = path("star.zarr")
    rp.write_plate(star, {f"{i - 1:03d}000": t for i, t in tiles.items()})
    nominal = os.path.join(fiji_dir, "tile_config.txt")  # x = 0, 297, ...: a row of pitch 297
    ov = tiles[1].shape[1] - 297
    run("estimate", star, "-o", path("star_names.yaml"), "--overlap", str(ov), "--max-shift", "-1")
    run("estimate", star, "-o", path("star_tc.yaml"), "--overlap", str(ov), "--max-shift", "-1", "--positions", nominal)
    a, b = load(path("star_names.yaml")), load(path("star_tc.yaml"))
    for key in ("pairs", "total_translation", "positions"):
        check(a[key] == b[key], f"Fiji's nominal tile_config.txt: '{key}' differs from the names run")
    # Fiji's registered positions (40-60% overlaps, irregular: some tiles
    # overlap their second neighbour too) as the guess. The pairs are the
    # footprints that overlap there (computed here from Fiji's numbers);
    # with --max-shift 5 every pair stays within 5 px of Fiji's offset, so a
    # tile far from Fiji's position means the file was misread (x for y,
    # lines for the wrong tiles): on this periodic target the pairs
    # themselves are ambiguous (test_register_starrynight), Fiji no truth.
    registered = os.path.join(fiji_dir, "tile_config.registered.txt")
    fiji = {}
    for line in open(registered):
        if line.count(";") == 2:
            name, _, xy = line.split(";")
            x, y = map(float, xy.strip().strip("()").split(","))
            fiji[f"{int(name.split('.')[0]) - 1:03d}000"] = (y, x)
    H, W = tiles[1].shape
    want = set()
    for i, a in enumerate(sorted(fiji)):
        for b in sorted(fiji)[i + 1:]:
            dy, dx = np.subtract(fiji[b], fiji[a])
            if W - abs(dx) >= max(4, 0.02 * W) and H - abs(dy) >= 0.5 * H:
                want.add((a, b) if dx > 0 else (b, a))
    check(len(want) > 9, "fixture: no tile of Fiji's registered row overlaps its second neighbour")
    summary = json.loads(run("estimate", star, "-o", path("star_reg.yaml"), "--overlap", str(ov), "--max-shift", "5",
                             "--positions", registered, "--json").stdout)
    r = load(path("star_reg.yaml"))
    got = pair_set(r)
    check(got <= want and summary["pairs"] + summary["unmatched_pairs"] == len(want),
          f"Fiji's registered positions: pairs {sorted(got)} (+{summary['unmatched_pairs']} unmatched), want "
          f"{sorted(want)}")
    err = tile_errors(r["positions"], {f"A/1/{n}": v for n, v in fiji.items()})
    check(max(err.values()) <= 8, f"Fiji's registered positions: a tile is {max(err.values()):.2f} px from Fiji's")
    print(f"starrynight, Fiji's registered file: {len(want)} pairs, worst tile {max(err.values()):.2f} px from Fiji")
else:
    print(f"no {fiji_dir}: Fiji's own files not checked")

# ----------------------------------------------------------------- errors
x = path("x.yaml")
est = ["estimate", None, "-o", x, "--overlap", str(OVERLAP)]


def est_on(plate, *more):
    return [est[0], plate, *est[2:], *more]


check_error(est_on(sim, "--positions", "metadata"), 1, ["A/1/000000", "translation"],
            "metadata without translations")
one_missing = dict((n, stage_of(v)) for n, v in stage_px.items())
one_missing["000017"] = None
check_error(est_on(rewrite(sim, path("missing.zarr"), rename, one_missing), "--positions", "metadata"), 1,
            ["A/1/000017", "translation"], "a tile without a translation")
absurd = dict(one_missing)
absurd["000017"] = (1e12, 0.0)
check_error(est_on(rewrite(sim, path("absurd.zarr"), rename, absurd), "--positions", "metadata"), 1,
            ["A/1/000017", "not a stage position"], "a translation of 10^12 um")
zero = rewrite(sim, path("zero.zarr"), rename, {n: (0.0, 0.0) for n in stage_px})
check_error(est_on(zero, "--positions", "metadata"), 1, ["same stage position", "A/1/"], "all translations 0")
far = write_tile_config(path("far.txt"), [(f"{n}.tif", (3 * TILE * grid_of(n)[1], 3 * TILE * grid_of(n)[0]))
                                          for n in sorted(sim_truth)])
check_error(est_on(sim, "--positions", far), 1, ["A/1", "overlap", far], "positions with no overlapping pairs")
extra = write_tile_config(path("extra.txt"), [(f"{n}.tif", stage_px[n]) for n in order] + [("000099.tif", (0.0, 0.0))])
check_error(est_on(plain, "--positions", extra), 1, [f"{extra}:35", "000099.tif"], "a line naming no position")
short = write_tile_config(path("short.txt"), [(f"t{i}.tif", stage_px[n]) for i, n in enumerate(order[:-1])])
check_error(est_on(plain, "--positions", short), 1, [short, "A/1/" + order[-1]], "one line too few")
with open(path("bad.txt"), "w") as f:
    f.write(FIJI_HEADER + "a.tif; ; (1.0, 2.0)\nb.tif; ; (1.0; 2.0)\n")
check_error(est_on(plain, "--positions", path("bad.txt")), 1, [path("bad.txt") + ":6"], "a malformed line")
with open(path("dim3.txt"), "w") as f:
    f.write("dim = 3\na.tif; ; (1.0, 2.0, 3.0)\n")
check_error(est_on(plain, "--positions", path("dim3.txt")), 1, [path("dim3.txt") + ":1", "dim"], "dim = 3")
check_error(est_on(plain, "--positions", path("nothing.txt")), 1, [path("nothing.txt")], "a missing file")
# Names that are not XXXYYY (iohub's 0, 1, ...): the solve still needs grid
# names; refused before the registration, naming the tile (a known limit).
nongrid = rewrite(sim, path("nongrid.zarr"), {old: str(int(new)) for old, new in rename.items()},
                  {str(int(n)): stage_of(v) for n, v in stage_px.items()})
check_error(est_on(nongrid, "--positions", "metadata"), 1, ["A/1/0", "6 digits"], "names that are not XXXYYY")
check_error(est_on(serp, "--positions", "metadata", "--guess", truth_file), 2, ["--guess", "--positions"],
            "--guess with --positions")
check_error(est_on(serp, "--positions", ""), 2, ["--positions"], "an empty --positions")
p = run("estimate", plain, "-o", in_order, "--overlap", str(OVERLAP), "--positions", in_order, ok=False)
check(p.returncode == 2 and os.path.getsize(in_order) > 0, f"-o over the positions file: exit {p.returncode}, want 2")

# --------------------------------------------------------- stitch
run("stitch", plain, "-o", path("stitched.zarr"), "--overlap", str(OVERLAP), "--threads", "2", "--positions",
    by_name, "--shifts-out", path("stitched.yaml"), "-q")
check(load(path("stitched.yaml"))["total_translation"] == load(path("tc_by_name.yaml"))["total_translation"],
      "stitch --positions placed tiles unlike estimate --positions")

finish()
