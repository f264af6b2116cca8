"""Viewer-ready plates (issue 11): every well of a fused plate has the same
canvas shape at every level (vizarr's plate view is blank, "Grid data is not
same shape", when the smallest levels differ, which stage jitter causes);
the padding is at the bottom and right (each well's pixels are those of the
well fused alone) and reads as the fill value; a pyramid by default down to
1024 px on both axes (--levels overrides); --codec NAME[:LEVEL] stored as
the real level and refused out of range, naming the value; omero.window
start/end from the data (nearest-rank 0.1 / 99.9 % of the non-zero values
of the largest level whose plane fits 4 Mi values; import: of each tile), min/max the dtype's range.
0.4 read with zarr-python, 0.5 with zarrita."""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import tifffile
import yaml
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="viewer_", dir=os.environ.get("TESSERA_TEST_TMP"))
SRC = os.environ.get("TESSERA_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WELLS = ["A/1", "A/2", "B/1"]


def path(*p):
    return os.path.join(TMP, *p)


def meta_json(image, level, fmt):
    f = os.path.join(image, str(level), ".zarray" if fmt == "0.4" else "zarr.json")
    with open(f) as fh:
        return json.load(fh)


def image_attrs(image, fmt):
    if fmt == "0.4":
        with open(os.path.join(image, ".zattrs")) as fh:
            return json.load(fh)
    with open(os.path.join(image, "zarr.json")) as fh:
        return json.load(fh)["attributes"]["ome"]


def levels_of(image):
    n = 0
    while os.path.isdir(os.path.join(image, str(n))):
        n += 1
    return n


def read(image, level, fmt):
    """The level as a numpy array (T, C, Z, Y, X)."""
    arr_dir = os.path.join(image, str(level))
    if fmt == "0.4":
        return zarr.open(arr_dir, mode="r")[...]
    out = path("dump.bin")
    p = subprocess.run(["node", os.path.join(SRC, "tests/interop/js/zarr_dump.mjs"), arr_dir, out],
                       capture_output=True, text=True, cwd=os.path.join(SRC, "tests/interop/js"))
    line = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"ok": False, "error": p.stderr}
    if not line.get("ok"):
        raise SystemExit(f"zarrita cannot read {arr_dir}: {line}")
    return np.fromfile(out, dtype="<" + {"uint16": "u2", "float32": "f4"}[line["dtype"]]).reshape(line["shape"])


def robust_window(values):
    """start/end as tessera defines them: nearest ranks of the non-zero values."""
    v = np.sort(values[values != 0].ravel())
    n = v.size
    lo = v[int(math.floor(0.001 * (n - 1)))]
    hi = v[min(n - 1, int(math.ceil(0.999 * (n - 1))))]
    return float(lo), float(max(hi, lo + 1))


# A plate whose wells' canvases differ (jitter) and exceed 1024 px (5 x 224 + 32).
for fmt in ("0.4", "0.5"):
    plate = path(f"plate{fmt}.zarr")
    truth = path(f"truth{fmt}.yaml")
    run("simulate", "-o", plate, "--wells", ",".join(WELLS), "--grid", "5x5", "--tile", "256x256", "--overlap", "32",
        "--jitter", "7", "--channels", "2", "--seed", "11", "--format", fmt, "--truth", truth)
    with open(truth) as fh:
        t = yaml.safe_load(fh)
    own = {}
    for w in WELLS:
        o = [v for k, v in t["total_translation"].items() if k.startswith(w + "/")]
        own[w] = (max(y for y, _ in o) + 256, max(x for _, x in o) + 256)
    check(len(set(own.values())) > 1, f"{fmt}: the wells' own canvases are all {own} (the test needs them to differ)")
    want = (max(h for h, _ in own.values()), max(w for _, w in own.values()))
    want_levels = 0
    h, w = want
    while h > 1024 or w > 1024:
        h, w = (h + 1) // 2, (w + 1) // 2
        want_levels += 1
    check(want_levels >= 1, f"{fmt}: canvas {want} needs no pyramid")

    out = path(f"mosaic{fmt}.zarr")
    run("fuse", plate, truth, "-o", out, "--format", fmt)
    for w in WELLS:
        image = os.path.join(out, w, "0")
        n = levels_of(image)
        check(n == want_levels + 1, f"{fmt} {w}: {n} levels, want {want_levels + 1} (smallest within 1024 px)")
        ms = image_attrs(image, fmt)["multiscales"][0]
        check(len(ms["datasets"]) == n, f"{fmt} {w}: multiscales lists {len(ms['datasets'])} datasets for {n} arrays")
        for k in range(n):
            shape = meta_json(image, k, fmt)["shape"]
            ref = meta_json(os.path.join(out, WELLS[0], "0"), k, fmt)["shape"]
            check(shape == ref, f"{fmt} {w} level {k}: shape {shape} != {WELLS[0]}'s {ref}")
        shape0 = meta_json(image, 0, fmt)["shape"]
        check(tuple(shape0[3:]) == want, f"{fmt} {w}: canvas {shape0[3:]}, want the plate's largest {want}")
        small = meta_json(image, n - 1, fmt)["shape"]
        check(max(small[3:]) <= 1024, f"{fmt} {w}: smallest level {small[3:]} is over 1024 px")

    # Each well's pixels are those of the well fused alone (origins kept);
    # the padding beyond its own canvas reads as the fill value 0.
    for w in WELLS:
        alone = path(f"alone{fmt}_{w.replace('/', '')}.zarr")
        run("fuse", plate, truth, "-o", alone, "--format", fmt, "--wells", w, "--levels", "0")
        a = read(os.path.join(alone, w, "0"), 0, fmt)
        b = read(os.path.join(out, w, "0"), 0, fmt)
        h, ww = own[w]
        check(a.shape[3:] == (h, ww), f"{fmt} {w}: alone canvas {a.shape[3:]} != {own[w]}")
        check(np.array_equal(b[..., :h, :ww], a), f"{fmt} {w}: the plate's well differs from the well fused alone")
        check(not b[..., h:, :].any() and not b[..., :, ww:].any(), f"{fmt} {w}: padding is not the fill value")
        check(levels_of(os.path.join(alone, w, "0")) == 1, f"{fmt} {w}: --levels 0 wrote a pyramid")

        # omero.window from the data: the non-zero values of the largest
        # level whose plane fits the 4 Mi sample (else the smallest).
        image = os.path.join(out, w, "0")
        n = levels_of(image)
        k = next((k for k in range(n) if math.prod(meta_json(image, k, fmt)["shape"][3:]) <= 1 << 22), n - 1)
        small = read(image, k, fmt)
        chans = image_attrs(image, fmt)["omero"]["channels"]
        for c, ch in enumerate(chans):
            win = ch["window"]
            lo, hi = robust_window(small[:, c])
            check((win["start"], win["end"]) == (lo, hi) and (win["min"], win["max"]) == (0, 65535),
                  f"{fmt} {w} channel {c}: window {win}, want start {lo} end {hi} min 0 max 65535")
            check(win["end"] < 20000, f"{fmt} {w} channel {c}: window end {win['end']} (the data ends near 4000)")

    run("fuse", plate, truth, "-o", path(f"lv2_{fmt}.zarr"), "--format", fmt, "--levels", "2", "--wells", "A/1")
    check(levels_of(path(f"lv2_{fmt}.zarr", "A/1/0")) == 3, f"{fmt}: --levels 2 did not write 3 levels")

    # --codec NAME:LEVEL, stored as given; the pixels are the same.
    for spec, name, level in (("blosc-zstd:3", "blosc", 3), ("zstd:5", "zstd", 5), ("gzip:7", "gzip", 7)):
        o = path(f"codec{fmt}_{name}.zarr")
        run("fuse", plate, truth, "-o", o, "--format", fmt, "--wells", "A/2", "--codec", spec)
        m = meta_json(os.path.join(o, "A/2/0"), 0, fmt)
        if fmt == "0.4":
            comp = m["compressor"]
            got = comp.get("clevel", comp.get("level"))
            got_name = comp["id"]
        else:
            inner = m["codecs"][0]["configuration"]["codecs"][-1]
            got = inner["configuration"].get("clevel", inner["configuration"].get("level"))
            got_name = inner["name"]
        check(got_name == name and got == level, f"{fmt} --codec {spec}: stored {got_name} level {got}")
        alone = path(f"alone{fmt}_A2.zarr", "A/2/0")
        check(np.array_equal(read(os.path.join(o, "A/2/0"), 0, fmt), read(alone, 0, fmt)),
              f"{fmt} --codec {spec}: pixels differ from the default codec's")

# Bad levels: exit 2 naming the value, nothing written.
for spec, words in (("zstd:0", "level 0"), ("zstd:23", "level 23"), ("gzip:10", "level 10"),
                    ("blosc-lz4:-1", "level -1"), ("none:1", "none takes no level"), ("zstd:x", "'x'"),
                    ("lzma:3", "'lzma:3'")):
    o = path("bad.zarr")
    p = run("fuse", path("plate0.5.zarr"), path("truth0.5.yaml"), "-o", o, "--codec", spec, ok=False)
    check(p.returncode == 2 and words in p.stderr and not os.path.exists(o),
          f"--codec {spec}: exit {p.returncode} {p.stderr!r}")
p = run("simulate", "-o", path("badsim.zarr"), "--codec", "blosc-zstd:12", ok=False)
check(p.returncode == 2 and "level 12" in p.stderr, f"simulate --codec blosc-zstd:12: {p.returncode} {p.stderr!r}")

# simulate and import take the level too; import's window is each tile's.
run("simulate", "-o", path("simlv.zarr"), "--codec", "gzip:8", "--format", "0.4", "--grid", "2x1")
m = meta_json(path("simlv.zarr", "A/1/000000"), 0, "0.4")
check(m["compressor"]["id"] == "gzip" and m["compressor"]["level"] == 8, f"simulate --codec gzip:8: {m['compressor']}")
tiles = path("tiles")
os.makedirs(tiles)
rng = np.random.default_rng(5)
for r in range(2):
    for c in range(2):
        img = (rng.gamma(2.0, 300.0 * (1 + r + 2 * c), size=(2, 64, 80)) + 100).astype(np.uint16)
        img[0, :4] = 0  # zero pixels are the fill value, not data
        tifffile.imwrite(os.path.join(tiles, f"r{r}_c{c}.tif"), img)
run("import", tiles, "-o", path("imp.zarr"), "--format", "0.4", "--codec", "blosc-lz4:9")
plate = zarr.open(path("imp.zarr"), mode="r")
seen = 0
for r in range(2):
    for c in range(2):
        src = tifffile.imread(os.path.join(tiles, f"r{r}_c{c}.tif"))
        name = f"{c:03d}{r:03d}"
        attrs = image_attrs(path("imp.zarr", "A/1", name), "0.4")
        m = meta_json(path("imp.zarr", "A/1", name), 0, "0.4")
        check(m["compressor"]["cname"] == "lz4" and m["compressor"]["clevel"] == 9, f"import blosc-lz4:9: {m['compressor']}")
        for ch in range(2):
            win = attrs["omero"]["channels"][ch]["window"]
            lo, hi = robust_window(src[ch])
            check((win["start"], win["end"], win["min"], win["max"]) == (lo, hi, 0, 65535),
                  f"import {name} channel {ch}: window {win}, want start {lo} end {hi}")
            seen += 1
check(seen == 8, f"import: {seen} windows checked")

shutil.rmtree(TMP, ignore_errors=True)
finish()
