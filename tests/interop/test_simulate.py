"""tessera simulate + info, checked with tools nobody here wrote.

- metadata of simulated 0.4 and 0.5 plates validates against the official
  OME-NGFF JSON schemas (jsonschema, $refs resolved to the local files);
- python3-zarr reads the 0.4 plate; zarrita (node) reads the 0.5 plate and
  sees the same pixels as the 0.4 plate of the same seed;
- tiles placed at the truth origins agree where they overlap (after numpy
  undoes the acquisition orientation recorded in the truth file);
- the truth file loads with PyYAML; runs are deterministic across thread
  counts; missing and blank tiles behave; `tessera info` describes plates
  (also the real yaozarrs ones) and refuses the broken store.
"""
import glob
import json
import os
import shutil
import subprocess

import jsonschema
import numpy as np
from scipy import ndimage, optimize
import yaml
import zarr
from interop_checks import check, finish, run, tree_digest

DATA = os.environ["TESSERA_TESTDATA"]
SRC = os.environ["TESSERA_SOURCE"]
TMP = os.path.join(os.environ["TESSERA_TEST_TMP"], "simulate_py")
SPEC = os.path.join(DATA, "ngff-spec")
YAO = os.path.join(DATA, "yaozarrs", "tests", "data")



def simulate(out, *extra, truth=True):
    if os.path.exists(out):
        shutil.rmtree(out)
    args = ["simulate", "-o", out, *extra]
    if truth:
        args += ["--truth", out + ".truth.yaml"]
    run(*args)


# ------------------------------------------------------------------ schemas

def load_schemas(version):
    store = {}
    for f in glob.glob(os.path.join(SPEC, version, "schemas", "*.schema")):
        with open(f) as fh:
            s = json.load(fh)
        store[s["$id"]] = s
    return store


def validator(store, name, version):
    sid = f"https://ngff.openmicroscopy.org/{version}/schemas/{name}.schema"
    schema = store[sid]
    resolver = jsonschema.RefResolver.from_schema(schema, store=store)
    return jsonschema.Draft202012Validator(schema, resolver=resolver)


def validate(store, version, name, attrs, where):
    for strict in (name, "strict_" + name):
        v = validator(store, strict, version)
        errs = sorted(v.iter_errors(attrs), key=lambda e: list(e.path))
        check(not errs, f"{where} vs {strict}: " + "; ".join(e.message for e in errs[:3]))


def attrs_of(group_dir, version):
    if version == "0.4":
        with open(os.path.join(group_dir, ".zattrs")) as f:
            return json.load(f)
    with open(os.path.join(group_dir, "zarr.json")) as f:
        doc = json.load(f)
    check(doc.get("node_type") == "group", f"{group_dir}: node_type {doc.get('node_type')}")
    return doc["attributes"]


def check_schemas(plate, version):
    store = load_schemas(version)
    # the negative control: the validator does reject a broken document
    bad = {"plate": {"version": "0.4"}} if version == "0.4" else {"ome": {"version": "0.5", "plate": {}}}
    check(list(validator(store, "plate", version).iter_errors(bad)), f"{version}: schema accepts a plate without wells")
    pa = attrs_of(plate, version)
    validate(store, version, "plate", pa, f"{plate} plate")
    ome = pa if version == "0.4" else pa["ome"]
    nimg = 0
    for w in ome["plate"]["wells"]:
        wdir = os.path.join(plate, w["path"])
        wa = attrs_of(wdir, version)
        validate(store, version, "well", wa, f"{wdir} well")
        images = (wa if version == "0.4" else wa["ome"])["well"]["images"]
        for im in images[:3]:
            idir = os.path.join(wdir, im["path"])
            validate(store, version, "image", attrs_of(idir, version), f"{idir} image")
            nimg += 1
    check(nimg > 0, f"{plate}: no image validated")


# ------------------------------------------------------------------ pixels

def orient(raw, o):
    """What estimate/fuse do with the same flags: flipud, fliplr, rot90 k."""
    a = raw
    if o.get("flipud"):
        a = np.flipud(a)
    if o.get("fliplr"):
        a = np.fliplr(a)
    return np.rot90(a, int(o.get("rot90", 0)))


def overlap_agreement(ta, oa, tb, ob):
    """Tiles a, b (oriented planes) with integer origins: correlation of the
    shared region, its size."""
    h, w = ta.shape
    y0, x0 = max(oa[0], ob[0]), max(oa[1], ob[1])
    y1, x1 = min(oa[0] + h, ob[0] + h), min(oa[1] + w, ob[1] + w)
    if y1 - y0 < 4 or x1 - x0 < 4:
        return None, 0
    ra = ta[y0 - oa[0]:y1 - oa[0], x0 - oa[1]:x1 - oa[1]].astype(float)
    rb = tb[y0 - ob[0]:y1 - ob[0], x0 - ob[1]:x1 - ob[1]].astype(float)
    return np.corrcoef(ra.ravel(), rb.ravel())[0, 1], ra.size


def check_overlaps(plate, truth_file, label, subpixel=False):
    with open(truth_file) as f:
        truth = yaml.safe_load(f)
    o = truth["orientation"]
    g = zarr.open(plate, mode="r")
    for key in ("total_translation", "tile_shape", "tiles", "positions", "orientation"):
        check(key in truth, f"{truth_file}: no key {key}")
    tt = truth["total_translation"]
    tiles = {}
    for name, origin in tt.items():
        a = g[name + "/0"][:]
        tiles[name] = (orient(a[0, 0, 0], o), origin)
        check(list(tiles[name][0].shape) == truth["tile_shape"],
              f"{label} {name}: oriented shape {tiles[name][0].shape} != tile_shape {truth['tile_shape']}")
    for well in truth["tiles"]:
        origins = np.array([tt[f"{well}/{t}"] for t in truth["tiles"][well]])
        check(origins.min(axis=0).tolist() == [0, 0], f"{label} {well}: truth minimum {origins.min(axis=0)}")
    names = sorted(tiles)
    pairs = 0
    worst = 1.0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if a.rsplit("/", 1)[0] != b.rsplit("/", 1)[0]:
                continue
            r, n = overlap_agreement(tiles[a][0], tiles[a][1], tiles[b][0], tiles[b][1])
            if r is None or n < 200:
                continue
            pairs += 1
            worst = min(worst, r)
            # a wrong origin or orientation decorrelates the overlap (r ~ 0)
            check(r > 0.9, f"{label}: {a} and {b} disagree in their overlap (r = {r:.3f})")
    check(pairs >= 3, f"{label}: only {pairs} overlapping pairs checked")
    print(f"{label}: {pairs} overlaps agree, worst r = {worst:.3f}")
    if subpixel:
        check_subpixel(tiles, truth, label)
    # and a deliberately wrong origin does not agree: the check can fail
    a, b = names[0], names[1]
    shifted = (tiles[b][1][0] + 7, tiles[b][1][1] - 9)
    r, n = overlap_agreement(tiles[a][0], tiles[a][1], tiles[b][0], shifted)
    check(r is None or r < 0.8, f"{label}: overlap check cannot tell a 7,9 px error (r = {r})")


def subpixel_shift(ra, rb):
    """d such that rb, resampled at y + d (scipy's cubic spline), best matches
    ra in least squares: the fractional offset between two views of the same
    specimen (several starts: the texture is fine and the strips narrow)."""
    ra, rb = ra.astype(float), rb.astype(float)

    def cost(d):
        return np.mean((ndimage.shift(rb, d, order=3, mode="nearest")[3:-3, 3:-3] - ra[3:-3, 3:-3]) ** 2)

    fits = [optimize.minimize(cost, np.array(s0), method="Powell", bounds=[(-1.5, 1.5)] * 2)
            for s0 in ((0, 0), (0.5, 0.5), (-0.5, -0.5), (0.5, -0.5), (-0.5, 0.5))]
    return min(fits, key=lambda f: f.fun).x


def check_subpixel(tiles, truth, label):
    """The float truth positions, not only the rounded origins (the overlap
    correlation above passes with a 1 px error): for each pair of grid
    neighbours, a least-squares fit of the overlap cut at the integer origins
    must find the fractional remainder (p_b - o_b) - (p_a - o_a) that the
    truth claims; orientation, jitter and rounding all enter it. Integer
    origins must be the positions rounded. The specimen's fine texture is
    not band-limited, so a few narrow strips fit to ~0.3 px; the median pair
    fits to ~0.002 px."""
    pos = truth["positions"]
    errs = []
    for a in tiles:
        for b in tiles:
            wa, na = a.rsplit("/", 1)
            wb, nb = b.rsplit("/", 1)
            xa, ya, xb, yb = int(na[:3]), int(na[3:]), int(nb[:3]), int(nb[3:])
            if wa != wb or (xb - xa, yb - ya) not in ((1, 0), (0, 1)):
                continue
            (ta, oa), (tb, ob) = tiles[a], tiles[b]
            h, w = ta.shape
            y0, x0 = max(oa[0], ob[0]), max(oa[1], ob[1])
            y1, x1 = min(oa[0] + h, ob[0] + h), min(oa[1] + w, ob[1] + w)
            d = subpixel_shift(ta[y0 - oa[0]:y1 - oa[0], x0 - oa[1]:x1 - oa[1]],
                               tb[y0 - ob[0]:y1 - ob[0], x0 - ob[1]:x1 - ob[1]])
            delta = (np.array(pos[b]) - ob) - (np.array(pos[a]) - oa)
            errs.append(float(np.abs(d - delta).max()))
    for name, (_, o) in tiles.items():
        check(all(abs(o[k] - pos[name][k]) <= 0.5 + 1e-6 for k in range(2)),
              f"{label} {name}: origin {o} is not the position {pos[name]} rounded")
    check(len(errs) >= 4, f"{label}: only {len(errs)} neighbour pairs for the sub-pixel check")
    med, worst = float(np.median(errs)), max(errs)
    check(med < 0.05 and worst < 0.45,
          f"{label}: truth positions and tile content disagree by {med:.3f} px (median), {worst:.3f} px (max)")
    print(f"{label}: {len(errs)} neighbour pairs agree with the float truth: median {med:.4f} px, max {worst:.3f} px")


def zarrita_read(array_dir, out_bin):
    p = subprocess.run(["node", os.path.join(SRC, "tests/interop/js/zarr_dump.mjs"), array_dir, out_bin],
                       capture_output=True, text=True, cwd=os.path.join(SRC, "tests/interop/js"))
    line = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"ok": False, "error": p.stderr}
    return line


def main():
    os.makedirs(TMP, exist_ok=True)
    common = ["--grid", "3x2", "--tile", "96x128", "--overlap", "24", "--channels", "2",
              "--timepoints", "2", "--seed", "7"]

    # 0.4 and 0.5 plates of the same seed
    p4 = os.path.join(TMP, "sim04.zarr")
    p5 = os.path.join(TMP, "sim05.zarr")
    simulate(p4, *common, "--format", "0.4", "--wells", "A/1,B/2")
    simulate(p5, *common, "--format", "0.5", "--wells", "A/1,B/2")
    check_schemas(p4, "0.4")
    check_schemas(p5, "0.5")

    for plate, fmt in ((p4, "0.4"), (p5, "0.5")):
        info = json.loads(run("info", plate, "--json").stdout)
        check(info["format"] == fmt, f"info format {info['format']}")
        check(info["nwells"] == 2 and info["npositions"] == 12, f"info wells/positions {info['nwells']}/{info['npositions']}")
        check(info["image"]["tile_shape"] == [96, 128], f"info tile_shape {info['image']['tile_shape']}")
        check(info["image"]["dtype"] == "uint16", "info dtype")
        check(info["image"]["levels"][0]["shape"] == [2, 2, 1, 96, 128], f"info shape {info['image']['levels'][0]['shape']}")
        check(info["image"]["levels"][0]["chunk_shape"] == [1, 1, 1, 96, 128], "info chunks")
        check([c["label"] for c in info["image"]["channels"]] == ["nuclei", "cytoplasm"], "info channels")
        check(any(c["name"] == "zstd" for c in info["image"]["levels"][0]["codecs"]), "info codecs")
        text = run("info", plate).stdout
        check("A/1" in text and "96 x 128" in text, f"info text: {text[:200]}")

    # python3-zarr reads the 0.4 plate: layout, shape, dtype, real content
    g = zarr.open(p4, mode="r")
    a = g["A/1/001001/0"]
    check(a.shape == (2, 2, 1, 96, 128) and a.dtype == np.uint16, f"zarr-python shape {a.shape} {a.dtype}")
    check(a.chunks == (1, 1, 1, 96, 128), f"zarr-python chunks {a.chunks}")
    px = a[:]
    check(px.std() > 50, f"tile has no structure (std {px.std():.1f})")
    check(not np.array_equal(px[0, 0], px[0, 1]), "channels identical")
    check(not np.array_equal(px[0, 0], px[1, 0]), "timepoints identical")

    # zarrita reads the 0.5 plate; the pixels equal the 0.4 plate's
    r = zarrita_read(os.path.join(p5, "A/1/001001/0"), os.path.join(TMP, "t.bin"))
    check(r.get("ok"), f"zarrita: {r}")
    if r.get("ok"):
        v5 = np.fromfile(os.path.join(TMP, "t.bin"), dtype="<u2").reshape(r["shape"])
        check(np.array_equal(v5, px), "0.5 tile (zarrita) differs from the 0.4 tile (zarr-python) of the same seed")

    # overlaps agree at the truth origins: plain, and with an acquisition
    # orientation and non-square tiles (truth records the undoing flags)
    pq = os.path.join(TMP, "clean.zarr")
    simulate(pq, "--grid", "3x3", "--tile", "80x112", "--overlap", "30", "--noise", "0",
             "--vignetting", "0", "--jitter", "4", "--format", "0.4", "--seed", "3")
    check_overlaps(pq, pq + ".truth.yaml", "plain", subpixel=True)
    for flags in (["--acq-rot90", "1"], ["--acq-flipud", "--acq-fliplr", "--acq-rot90", "3"], ["--acq-fliplr"]):
        po = os.path.join(TMP, "oriented.zarr")
        simulate(po, "--grid", "3x3", "--tile", "80x112", "--overlap", "30", "--noise", "0",
                 "--vignetting", "0", "--format", "0.4", "--seed", "3", *flags)
        with open(po + ".truth.yaml") as f:
            t = yaml.safe_load(f)
        k = int(t["orientation"]["rot90"])
        check(t["tile_shape"] == ([112, 80] if k % 2 else [80, 112]), f"{flags}: tile_shape {t['tile_shape']}")
        check_overlaps(po, po + ".truth.yaml", " ".join(flags), subpixel="--acq-flipud" in flags)
        # the stored tile is NOT already oriented (else the flags would be no-ops)
        t_plain = zarr.open(pq, mode="r")["A/1/000000/0"][0, 0, 0]
        t_raw = zarr.open(po, mode="r")["A/1/000000/0"][0, 0, 0]
        check(t_raw.shape != t_plain.shape or not np.array_equal(t_raw, t_plain), f"{flags}: stored tile not transformed")

    # names YYYXXX
    py = os.path.join(TMP, "yx.zarr")
    simulate(py, "--grid", "3x2", "--tile", "64x64", "--names-yx", "--format", "0.4")
    names = sorted(os.path.basename(d) for d in glob.glob(os.path.join(py, "A/1/*")))
    check("001002" in names and "002001" not in names, f"--names-yx names {names}")

    # missing positions: not written, not listed; blank tiles: background + noise
    pm = os.path.join(TMP, "missing.zarr")
    simulate(pm, "--grid", "5x4", "--tile", "64x64", "--missing", "0.3", "--blank", "1",
             "--noise", "10", "--vignetting", "0", "--format", "0.4", "--seed", "11")
    with open(os.path.join(pm, "A/1/.zattrs")) as f:
        listed = [im["path"] for im in json.load(f)["well"]["images"]]
    on_disk = sorted(os.path.basename(d) for d in glob.glob(os.path.join(pm, "A/1/[0-9]*")))
    check(0 < len(listed) < 20, f"--missing 0.3 listed {len(listed)} of 20")
    check(sorted(listed) == on_disk, "listed positions differ from those on disk")
    with open(pm + ".truth.yaml") as f:
        tm = yaml.safe_load(f)
    check(len(tm["total_translation"]) == len(listed), "truth lists missing tiles")
    blank = zarr.open(pm, mode="r")[f"A/1/{listed[0]}/0"][0, 0, 0].astype(float)
    check(abs(blank.mean() - 100) < 3 and 7 < blank.std() < 13,
          f"blank tile: mean {blank.mean():.1f} std {blank.std():.1f} (want ~100, ~10)")

    # determinism: same seed, different thread counts, identical bytes
    d1, d2 = os.path.join(TMP, "det1.zarr"), os.path.join(TMP, "det2.zarr")
    simulate(d1, *common, "--threads", "1", "--format", "0.5")
    simulate(d2, *common, "--threads", "3", "--format", "0.5")
    b1, b2 = tree_digest(d1), tree_digest(d2)
    check(b1.keys() == b2.keys() and all(b1[k] == b2[k] for k in b1), "two runs with one seed differ")
    with open(d1 + ".truth.yaml", "rb") as f1, open(d2 + ".truth.yaml", "rb") as f2:
        check(f1.read() == f2.read(), "truth files differ between runs")
    d3 = os.path.join(TMP, "det3.zarr")
    simulate(d3, *[c if c != "7" else "8" for c in common], "--format", "0.5")
    check(tree_digest(d3) != b1, "a different seed gives the same plate")

    # real plates and the broken store
    # (copies of their metadata only: info describes them, and exits 1 naming
    # the arrays that are absent)
    p = run("info", os.path.join(YAO, "v04/2551.zarr"), "--json", ok=False)
    info = json.loads(p.stdout)
    check(info["nwells"] == 96 and info["format"] == "0.4", "2551.zarr info")
    check(info["image"]["channels"][0]["label"] == "GFP", f"2551.zarr channels {info['image'].get('channels')}")
    check(p.returncode == 1 and "level 0: no zarr array" in p.stderr and info["errors"][0].startswith("level 0: "),
          f"2551.zarr without arrays: rc {p.returncode}, {p.stderr.strip()}")
    p = run("info", os.path.join(YAO, "v05/76-45.ome.zarr"), "--json", ok=False)
    info = json.loads(p.stdout)
    check(info["nwells"] == 384 and info["format"] == "0.5", "76-45 info")
    # its 3 levels' arrays are absent, and so are the groups of the wells it
    # lists beyond the two copied
    levels = [e for e in info["errors"] if e.startswith("level ")]
    wells = [e for e in info["errors"] if e.startswith("well ") and "no metadata on disk" in e]
    check(p.returncode == 1 and len(levels) == 3 and len(levels) + len(wells) == len(info["errors"]) and wells,
          f"76-45 without arrays: rc {p.returncode}, {info['errors'][:5]}")
    p = run("info", os.path.join(YAO, "broken/broken_v05.ome.zarr"), ok=False)
    check(p.returncode == 1 and "A/2/zarr.json" in p.stderr and "node_type" in p.stderr,
          f"broken store: rc {p.returncode}, {p.stderr.strip()}")
    check(len(p.stderr.strip().splitlines()) == 1, "broken store: more than one error line")
    p = run("simulate", "-o", os.path.join(TMP, "x.zarr"), "--format", "0.6", ok=False)
    check(p.returncode == 2, f"bad --format exit {p.returncode}")
    p = run("simulate", "-o", os.path.join(TMP, "x.zarr"), "--tile", "64x64", "--overlap", "64", ok=False)
    check(p.returncode == 2 and "overlap" in p.stderr, f"overlap >= tile: {p.returncode} {p.stderr}")
    # a well name OME-NGFF refuses is refused before any tile is rendered
    # (it used to fail at the plate metadata, with the tiles written)
    bad = os.path.join(TMP, "badwell.zarr")
    p = run("simulate", "-o", bad, "--wells", "A_x/1", ok=False)
    check(p.returncode == 2 and "A_x/1" in p.stderr and not os.path.exists(bad),
          f"bad well name: rc {p.returncode}, {p.stderr.strip()}, left {os.path.exists(bad)}")

    finish()


if __name__ == "__main__":
    main()
