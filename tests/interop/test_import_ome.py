"""tessera import, the input side (issue 11), checked with files and readers
nobody here wrote.

- OME-TIFF tiles written by tifffile's OME writer (PhysicalSizeX/Y, channel
  names, Plane PositionX/PositionY in mm and µm): the plate zarr-python
  (0.4) reads has the pixel size as the scale, the names as omero labels and
  each field's stage position, in micrometres, as a translation after the
  scale; 0.4 and 0.5 validate against the OME-NGFF schemas (strict too);
  pixels equal tifffile's. --scale overrides the OME-XML pixel size, not the
  positions; tiles that disagree on the pixel size, or positions on some
  tiles only, are refused naming the files; a plain TIFF keeps 1 µm and
  "Channel 0".
- The chain: tiles cut from a real image at jittered offsets, their nominal
  stage positions in the OME-XML: estimate --positions metadata on the
  imported plate gives the true offsets.
- --order row|column|snake-row|snake-column places {index} tiles where an
  independent mapping says (each tile holds its index as pixel value).
- --first-index mistakes: 30 tiles named from 1 imported from 0 (rows and
  columns, or {index}), and names from 0 imported from 1, exit 1 naming
  what is missing and the first index to use; nothing is written.
- --overlap N% is the px value it rounds to (simulate, estimate with
  --overlap-x/-y and --rot90 on non-square tiles, stitch): the same bytes.
- --opt=value works like --opt value (import, estimate).
"""
import json
import os
import shutil
import sys

import numpy as np
import tifffile
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import check, finish, run, tree_digest  # noqa: E402
from test_simulate import check_schemas, zarrita_read  # noqa: E402

TMP = os.path.join(os.environ["TESSERA_TEST_TMP"], "import_ome_py")
MICRO = "\u00b5m"


def fresh(path):
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def image_attrs(plate, pos, fmt):
    """The image group's OME attributes: zarr-python for 0.4, zarr.json for 0.5
    (validated by the 0.5 schemas in check_schemas)."""
    path = os.path.join(plate, "A", "1", pos)
    if fmt == "0.4":
        return zarr.open_group(path, mode="r").attrs.asdict()
    return json.load(open(os.path.join(path, "zarr.json")))["attributes"]["ome"]


def tile_pixels(plate, pos, fmt):
    arr = os.path.join(plate, "A", "1", pos, "0")
    if fmt == "0.4":
        return np.asarray(zarr.open(arr, mode="r")[:])
    out = os.path.join(TMP, "zarrita.bin")
    r = zarrita_read(arr, out)
    check(r.get("ok"), f"zarrita cannot read {arr}: {r}")
    return np.fromfile(out, dtype=np.dtype(r["dtype"]).newbyteorder("<")).reshape(r["shape"]) if r.get("ok") else None


# ------------------------------------------------------------------ OME-TIFF

def write_ome(d, rows=2, cols=3, size_x=0.5, size_y=0.25, names=("DAPI", "GFP"), skip_position=None, odd_size=None):
    """rows x cols OME-TIFFs r{row}_c{col}.ome.tif, 2 channels 30x44 uint16;
    field (r, c) at stage x = 0.3 + 0.02 c mm, y = 5 + 6.5 r µm. Returns
    {position name: (pixels CYX, (y_um, x_um))}."""
    rng = np.random.default_rng(11)
    fields = {}
    for r in range(rows):
        for c in range(cols):
            a = rng.integers(0, 65536, size=(len(names), 30, 44), dtype=np.uint16)
            x_mm, y_um = 0.3 + 0.02 * c, 5.0 + 6.5 * r
            md = {"axes": "CYX", "PhysicalSizeX": size_x, "PhysicalSizeXUnit": MICRO,
                  "PhysicalSizeY": size_y, "Channel": {"Name": list(names)}}
            if odd_size == (r, c):
                md["PhysicalSizeX"] = size_x * 2
            if skip_position != (r, c):
                n = len(names)
                md["Plane"] = {"PositionX": [x_mm] * n, "PositionXUnit": ["mm"] * n,
                               "PositionY": [y_um] * n, "PositionYUnit": [MICRO] * n}
            tifffile.imwrite(os.path.join(d, f"r{r}_c{c}.ome.tif"), a, metadata=md)
            fields[f"{c:03d}{r:03d}"] = (a, (y_um, x_mm * 1000.0))
    return fields


def check_ome():
    d = fresh(os.path.join(TMP, "ome"))
    fields = write_ome(d)
    # the writer is tifffile's: its OME-XML says what the test expects
    with tifffile.TiffFile(os.path.join(d, "r1_c2.ome.tif")) as t:
        xml = t.pages[0].description
    check(xml.startswith("<?xml") and "PhysicalSizeX=\"0.5\"" in xml and 'Name="GFP"' in xml and
          'PositionXUnit="mm"' in xml, f"tifffile's OME-XML is not what the test expects: {xml[:300]}")
    for fmt in ("0.4", "0.5"):
        out = os.path.join(TMP, f"ome_{fmt}.zarr")
        p = run("import", d, "-o", out, "--pattern", "r{row}_c{col}.ome.tif", "--format", fmt, "--json", ok=False)
        check(p.returncode == 0, f"ome {fmt}: import exit {p.returncode} {p.stderr!r}")
        if p.returncode:
            continue
        s = json.loads(p.stdout)
        check(s.get("pixel_size") == [0.25, 0.5] and s.get("pixel_size_from") == "ome-xml" and
              s.get("stage_positions") and s.get("channel_names_from_ome"), f"ome {fmt}: summary {s}")
        check_schemas(out, fmt)
        for pos, (want, (y_um, x_um)) in fields.items():
            a = image_attrs(out, pos, fmt)
            ct = a["multiscales"][0]["datasets"][0]["coordinateTransformations"]
            check([t["type"] for t in ct] == ["scale", "translation"], f"ome {fmt} {pos}: transforms {ct}")
            check(ct[0]["scale"][3:] == [0.25, 0.5], f"ome {fmt} {pos}: scale {ct[0]['scale']}")
            if len(ct) == 2:
                tr = ct[1]["translation"]
                check(tr[:3] == [0, 0, 0] and abs(tr[3] - y_um) < 1e-9 and abs(tr[4] - x_um) < 1e-9,
                      f"ome {fmt} {pos}: translation {tr}, want y {y_um} x {x_um} um")
            axes = a["multiscales"][0]["axes"]
            check([ax.get("unit") for ax in axes[3:]] == ["micrometer"] * 2, f"ome {fmt} {pos}: axes {axes}")
            labels = [ch["label"] for ch in a["omero"]["channels"]]
            check(labels == ["DAPI", "GFP"], f"ome {fmt} {pos}: channel labels {labels}")
            got = tile_pixels(out, pos, fmt)
            if got is not None:
                check(np.array_equal(got.reshape(want.shape), want), f"ome {fmt} {pos}: pixels differ from tifffile's")

    # --scale wins over the OME-XML; the stage positions stay physical
    out = os.path.join(TMP, "ome_scale.zarr")
    run("import", d, "-o", out, "--pattern", "r{row}_c{col}.ome.tif", "--format", "0.4", "--scale", "2,3")
    ct = image_attrs(out, "002001", "0.4")["multiscales"][0]["datasets"][0]["coordinateTransformations"]
    check(ct[0]["scale"][3:] == [2, 3] and len(ct) == 2 and abs(ct[1]["translation"][4] - 340.0) < 1e-9,
          f"--scale 2,3: transforms {ct}")

    # refusals: exit 1, one line naming the file, nothing written
    for what, kw, name in (("pixel sizes differ", {"odd_size": (1, 1)}, "r1_c1.ome.tif"),
                           ("a position missing", {"skip_position": (0, 2)}, "r0_c2.ome.tif")):
        bad = fresh(os.path.join(TMP, "ome_bad"))
        write_ome(bad, **kw)
        out = os.path.join(TMP, "ome_bad.zarr")
        p = run("import", bad, "-o", out, "--pattern", "r{row}_c{col}.ome.tif", ok=False)
        check(p.returncode == 1 and name in p.stderr and len(p.stderr.strip().splitlines()) == 1 and
              not os.path.exists(out), f"{what}: exit {p.returncode} {p.stderr!r}")

    # a plain TIFF (tifffile's JSON description, no OME-XML): 1 um, Channel 0
    plain = fresh(os.path.join(TMP, "plain"))
    for c in range(2):
        tifffile.imwrite(os.path.join(plain, f"r0_c{c}.tif"), np.zeros((8, 8), np.uint8))
    out = os.path.join(TMP, "plain.zarr")
    run("import", plain, "-o", out, "--format", "0.4")
    a = image_attrs(out, "001000", "0.4")
    ct = a["multiscales"][0]["datasets"][0]["coordinateTransformations"]
    check(ct == [{"type": "scale", "scale": [1, 1, 1, 1, 1]}] and
          [ch["label"] for ch in a["omero"]["channels"]] == ["Channel 0"], f"plain TIFF: {ct} {a['omero']}")


def check_positions_chain():
    """Tiles cut from a real image (skimage's camera) at jittered offsets,
    their nominal stage positions in the OME-XML (x in mm, y in µm, 0.5 µm
    pixels): import writes the translations that estimate --positions
    metadata reads, and the solved origins are the true cut offsets."""
    from skimage import data
    img = data.camera().astype(np.uint16) * 100
    d = fresh(os.path.join(TMP, "chain"))
    rng = np.random.default_rng(1)
    truth = {}
    for r in range(2):
        for c in range(2):
            ny, nx = 10 + 160 * r, 10 + 160 * c
            y0, x0 = ny + int(rng.integers(-4, 5)), nx + int(rng.integers(-4, 5))
            truth[f"A/1/{c:03d}{r:03d}"] = (y0, x0)
            md = {"axes": "YX", "PhysicalSizeX": 0.5, "PhysicalSizeY": 0.5,
                  "Plane": {"PositionX": [nx * 0.5 / 1000], "PositionXUnit": ["mm"],
                            "PositionY": [ny * 0.5], "PositionYUnit": [MICRO]}}
            tifffile.imwrite(os.path.join(d, f"r{r}_c{c}.ome.tif"), img[y0:y0 + 200, x0:x0 + 200], metadata=md)
    plate, shifts = os.path.join(TMP, "chain.zarr"), os.path.join(TMP, "chain.yaml")
    run("import", d, "-o", plate, "--pattern", "r{row}_c{col}.ome.tif")
    p = run("estimate", plate, "-o", shifts, "--overlap", "20%", "--positions", "metadata", "-q", ok=False)
    check(p.returncode == 0, f"estimate --positions metadata on the imported plate: exit {p.returncode} {p.stderr!r}")
    if p.returncode:
        return
    import yaml
    got = yaml.safe_load(open(shifts))["total_translation"]
    my, mx = min(v[0] for v in truth.values()), min(v[1] for v in truth.values())
    want = {k: [v[0] - my, v[1] - mx] for k, v in truth.items()}
    check(got == want, f"estimate --positions metadata: origins {got}, true {want}")


# -------------------------------------------------------------------- orders

def expected_cell(i, cols, rows, order):
    """Grid (column, row) of the i-th tile (from 0) in an acquisition order."""
    if order == "row":
        return i % cols, i // cols
    if order == "column":
        return i // rows, i % rows
    if order == "snake-row":
        r, c = divmod(i, cols)
        return (cols - 1 - c if r % 2 else c), r
    c, r = divmod(i, rows)
    return c, (rows - 1 - r if c % 2 else r)


def check_orders():
    cols, rows = 4, 3
    d = fresh(os.path.join(TMP, "orders"))
    for i in range(1, cols * rows + 1):
        tifffile.imwrite(os.path.join(d, f"tile_{i}.tif"), np.full((6, 10), i, np.uint8))
    for order in ("row", "column", "snake-row", "snake-column"):
        out = os.path.join(TMP, f"order_{order}.zarr")
        p = run("import", d, "-o", out, "--pattern", "tile_{index}.tif", "--grid", f"{cols}x{rows}",
                "--first-index", "1", "--order", order, "--format", "0.4", ok=False)
        check(p.returncode == 0, f"--order {order}: exit {p.returncode} {p.stderr!r}")
        if p.returncode:
            continue
        for i in range(cols * rows):
            c, r = expected_cell(i, cols, rows, order)
            v = np.asarray(zarr.open(os.path.join(out, "A/1", f"{c:03d}{r:03d}", "0"), mode="r")[:])
            check(np.all(v == i + 1), f"--order {order}: column {c} row {r} holds {np.unique(v)}, want {i + 1}")
    p = run("import", d, "-o", os.path.join(TMP, "o.zarr"), "--pattern", "tile_{index}.tif", "--grid", "4x3",
            "--order", "spiral", ok=False)
    check(p.returncode == 2 and "spiral" in p.stderr, f"--order spiral: exit {p.returncode} {p.stderr!r}")


# --------------------------------------------------------------- first index

def check_first_index():
    d = fresh(os.path.join(TMP, "from1"))
    for r in range(1, 6):
        for c in range(1, 7):
            tifffile.imwrite(os.path.join(d, f"r{r}_c{c}.tif"), np.full((6, 6), r * 10 + c, np.uint8))
    for i in range(1, 31):
        tifffile.imwrite(os.path.join(d, f"{i}.tif"), np.full((6, 6), i, np.uint8))
    out = os.path.join(TMP, "from1.zarr")
    for what, args, named in (
            ("rows/columns from 1, --first-index 0", ["--pattern", "r{row}_c{col}.tif"], "row 0"),
            ("{index} from 1, --first-index 0", ["--pattern", "{index}.tif", "--grid", "6x5"], "30.tif")):
        shutil.rmtree(out, ignore_errors=True)
        p = run("import", d, "-o", out, *args, ok=False)
        check(p.returncode == 1 and "--first-index 1" in p.stderr and "missing" in p.stderr and named in p.stderr and
              len(p.stderr.strip().splitlines()) == 1 and not os.path.exists(out),
              f"{what}: exit {p.returncode} {p.stderr!r}")
        s = json.loads(run("import", d, "-o", out, *args, "--first-index", "1", "--json").stdout)
        check(s["positions"] == 30 and s["missing"] == 0 and s["grid"] == [6, 5], f"{what}, then 1: {s}")
    z = fresh(os.path.join(TMP, "from0"))
    for i in range(12):
        tifffile.imwrite(os.path.join(z, f"{i}.tif"), np.full((6, 6), i, np.uint8))
    p = run("import", z, "-o", out, "--pattern", "{index}.tif", "--grid", "4x3", "--first-index", "1", ok=False)
    check(p.returncode == 1 and "--first-index 0" in p.stderr and "0.tif" in p.stderr,
          f"{{index}} from 0, --first-index 1: exit {p.returncode} {p.stderr!r}")
    # one tile missing at the start is a missing tile, not a wrong first index
    os.remove(os.path.join(z, "0.tif"))
    s = json.loads(run("import", z, "-o", out, "--pattern", "{index}.tif", "--grid", "4x3", "--json").stdout)
    check(s["positions"] == 11 and s["missing"] == 1, f"first tile missing: {s}")


# ------------------------------------------------------------------- overlap

def check_overlap_percent():
    sq, sq_px = os.path.join(TMP, "ov_pct.zarr"), os.path.join(TMP, "ov_px.zarr")
    common = ["--grid", "3x2", "--tile", "120x120", "--seed", "5", "--format", "0.4"]
    p = run("simulate", "-o", sq, *common, "--overlap", "15%", "--truth", os.path.join(TMP, "t_pct.yaml"), ok=False)
    check(p.returncode == 0, f"simulate --overlap 15%: exit {p.returncode} {p.stderr!r}")
    if p.returncode:
        return
    run("simulate", "-o", sq_px, *common, "--overlap", "18", "--truth", os.path.join(TMP, "t_px.yaml"))
    check(tree_digest(sq) == tree_digest(sq_px) and
          open(os.path.join(TMP, "t_pct.yaml")).read() == open(os.path.join(TMP, "t_px.yaml")).read(),
          "simulate --overlap 15% of 120 px differs from --overlap 18")
    p = run("simulate", "-o", os.path.join(TMP, "ns.zarr"), "--tile", "100x160", "--overlap", "10%", ok=False)
    check(p.returncode == 2 and "10%" in p.stderr, f"simulate 10% of 100x160: exit {p.returncode} {p.stderr!r}")

    # non-square tiles: x is a share of the width, y of the height (as oriented)
    plate = os.path.join(TMP, "ov_rect.zarr")
    run("simulate", "-o", plate, "--grid", "3x3", "--tile", "100x160", "--overlap", "16", "--seed", "3")

    def shifts(name, *args):
        out = os.path.join(TMP, name)
        p = run("estimate", plate, "-o", out, "-q", "--accept-poor", *args, ok=False)
        check(p.returncode == 0, f"estimate {args}: exit {p.returncode} {p.stderr!r}")
        return open(out).read() if p.returncode == 0 else None

    a, b = shifts("pct.yaml", "--overlap", "10%"), shifts("px.yaml", "--overlap-x", "16", "--overlap-y", "10")
    check(a is not None and a == b, "estimate --overlap 10% of 100x160 tiles differs from --overlap-x 16 --overlap-y 10")
    a = shifts("pct_r.yaml", "--overlap-x=10%", "--overlap-y", "16%", "--rot90", "1")
    b = shifts("px_r.yaml", "--overlap-x", "10", "--overlap-y", "26", "--rot90", "1")
    check(a is not None and a == b, "estimate --rot90 1 --overlap-x 10% --overlap-y 16% differs from 10 / 26 px")
    for bad in ("0%", "100%", "ten%", "0.01%"):
        p = run("estimate", plate, "-o", os.path.join(TMP, "bad.yaml"), "--overlap", bad, ok=False)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, f"--overlap {bad}: exit {p.returncode} {p.stderr!r}")
    p = run("stitch", sq, "-o", os.path.join(TMP, "st.zarr"), "--overlap", "15%", "-q", "--json", ok=False)
    check(p.returncode == 0 and json.loads(p.stdout)["estimate"]["tiles"] == 6, f"stitch --overlap 15%: {p.returncode} {p.stderr!r}")


# ----------------------------------------------------------------- --opt=value

def check_equals_syntax():
    d = os.path.join(TMP, "orders")
    a, b = os.path.join(TMP, "eq_a.zarr"), os.path.join(TMP, "eq_b.zarr")
    run("import", d, "-o", a, "--pattern", "tile_{index}.tif", "--grid", "4x3", "--first-index", "1",
        "--order", "snake-column", "--format", "0.4")
    run("import", d, f"--output={b}", "--pattern=tile_{index}.tif", "--grid=4x3", "--first-index=1",
        "--order=snake-column", "--format=0.4")
    check(tree_digest(a) == tree_digest(b), "import --opt=value wrote another plate than --opt value")
    p = run("import", d, "-o", a, "--pattern=tile_{index}.tif", "--grid=4x3", "--quiet=yes", ok=False)
    check(p.returncode == 2 and "--quiet takes no value" in p.stderr, f"--quiet=yes: exit {p.returncode} {p.stderr!r}")


def main():
    os.makedirs(TMP, exist_ok=True)
    check_ome()
    check_positions_chain()
    check_orders()
    check_first_index()
    check_overlap_percent()
    check_equals_syntax()
    shutil.rmtree(TMP, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
