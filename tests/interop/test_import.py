"""tessera import: a folder of TIFF tiles as an OME-Zarr plate, checked with
tools nobody here wrote.

- TIFFs written by tifffile (uint16 strips, uint8 two-page tiled/deflate,
  LZW), names with zero padding, a missing tile and a file the pattern
  does not match; the plate read back by zarr-python (0.4) and zarrita
  (0.5, sharded with --chunk) equals what tifffile reads, pixel for pixel;
  the metadata validates against the OME-NGFF schemas.
- The real starrynight tiles (1.tif .. 10.tif, written by others), imported
  with --pattern '{index}.tif' --first-index 1 --grid 10x1: pixels equal
  tifffile's, and `tessera estimate` on the imported plate gives exactly the
  pairs it gives on the plate zarr-python builds from the same TIFFs (what
  test_register_starrynight checks against Fiji); where Fiji and the
  exhaustive NCC search agree, within 1 px of the NCC search and 2 px of
  Fiji's integer positions.
- Refusals: RGB, float, mismatched tile sizes, a pattern matching nothing,
  {index} without --grid, two files on one grid cell, an unwritable output,
  a truncated tile found while writing: exit 1 (2 for usage) with one line
  naming the file, and no store left behind.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import tifffile
import zarr
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_plates as rp  # noqa: E402
from interop_checks import check, finish, run  # noqa: E402
from test_simulate import check_schemas, zarrita_read  # noqa: E402
from test_register_starrynight import read_config  # noqa: E402

TMP = os.path.join(os.environ["TESSERA_TEST_TMP"], "import_py")
STARRY = os.path.join(rp.TESTDATA, "starrynight", "starrynight", "tests", "fixtures", "stitch_images")


def fresh(path):
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    return path


def import_json(folder, out, *args):
    p = run("import", folder, "-o", out, "--json", *map(str, args))
    return json.loads(p.stdout)


def zarr_tile(plate, pos, well="A/1"):
    return np.asarray(zarr.open(plate, mode="r")[f"{well}/{pos}/0"][:])


def zarrita_tile(plate, pos, well="A/1"):
    arr = os.path.join(plate, well, pos, "0")
    out = os.path.join(TMP, "zarrita.bin")
    r = zarrita_read(arr, out)
    check(r.get("ok"), f"zarrita cannot read {arr}: {r}")
    if not r.get("ok"):
        return None
    return np.fromfile(out, dtype=np.dtype(r["dtype"]).newbyteorder("<")).reshape(r["shape"])


def well_images(plate, version, well="A/1"):
    if version == "0.4":
        doc = json.load(open(os.path.join(plate, well, ".zattrs")))["well"]
    else:
        doc = json.load(open(os.path.join(plate, well, "zarr.json")))["attributes"]["ome"]["well"]
    return sorted(im["path"] for im in doc["images"])


# ------------------------------------------------------------ synthetic folders

def synthetic_uint16():
    """3 columns x 2 rows, r{row:02}_c{col:02}.tif from 0, one tile missing,
    46x58 uint16 with values over the whole range (not square, so a Y/X mix-up
    shows)."""
    d = fresh(os.path.join(TMP, "u16"))
    rng = np.random.default_rng(7)
    tiles = {}
    for r in range(2):
        for c in range(3):
            if (r, c) == (1, 2):
                continue
            a = rng.integers(0, 65536, size=(46, 58), dtype=np.uint16)
            # one big-endian file and one BigTIFF among the little-endian ones
            kw = {"byteorder": ">"} if (r, c) == (0, 1) else {"bigtiff": True} if (r, c) == (1, 0) else {}
            tifffile.imwrite(os.path.join(d, f"r{r:02d}_c{c:02d}.tif"), a, rowsperstrip=5, **kw)
            tiles[f"{c:03d}{r:03d}"] = a
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("not a tile\n")
    tifffile.imwrite(os.path.join(d, "overview.tif"), np.zeros((4, 4), np.uint8))  # no match
    return d, tiles


def check_uint16():
    d, tiles = synthetic_uint16()
    for fmt, extra in (("0.4", ()), ("0.5", ("--chunk", 16))):
        out = os.path.join(TMP, f"u16_{fmt}.zarr")
        s = import_json(d, out, "--pattern", "r{row}_c{col}.tif", "--format", fmt,
                        "--scale", "0.5,0.25", *extra)
        check(s["positions"] == 5 and s["missing"] == 1 and s["grid"] == [3, 2] and
              s["tile"] == [46, 58] and s["dtype"] == "uint16" and s["channels"] == 1,
              f"u16 {fmt}: summary {s}")
        check(well_images(out, fmt) == sorted(tiles), f"u16 {fmt}: positions {well_images(out, fmt)}")
        check_schemas(out, fmt)
        for pos, want in tiles.items():
            got = zarr_tile(out, pos) if fmt == "0.4" else zarrita_tile(out, pos)
            if got is None:
                continue
            check(got.dtype == np.uint16 and got.shape == (1, 1, 1, 46, 58),
                  f"u16 {fmt} {pos}: {got.dtype} {got.shape}")
            check(np.array_equal(got.reshape(46, 58), want), f"u16 {fmt} {pos}: pixels differ from the TIFF")
        attrs = (json.load(open(os.path.join(out, "A/1/000000/.zattrs"))) if fmt == "0.4" else
                 json.load(open(os.path.join(out, "A/1/000000/zarr.json")))["attributes"]["ome"])
        scale = attrs["multiscales"][0]["datasets"][0]["coordinateTransformations"][0]["scale"]
        check(scale[3:] == [0.5, 0.25], f"u16 {fmt}: scale {scale}")
        if fmt == "0.5":
            meta = json.load(open(os.path.join(out, "A/1/000000/0/zarr.json")))
            names = [c["name"] for c in meta["codecs"]]
            check(names == ["sharding_indexed"] and
                  meta["codecs"][0]["configuration"]["chunk_shape"] == [1, 1, 1, 16, 16],
                  f"u16 0.5 --chunk 16: codecs {meta['codecs']}")
    # the imported plate goes through estimate and fuse unchanged
    out = os.path.join(TMP, "u16_0.4.zarr")
    shifts = os.path.join(TMP, "u16.yaml")
    run("estimate", out, "-o", shifts, "--overlap", "8")
    run("fuse", out, shifts, "-o", os.path.join(TMP, "u16_fused.zarr"))


def synthetic_uint8_pages():
    """2x2 grid counted from 1, two pages (channels) per file, tiled and
    deflate-compressed, and one LZW strip file."""
    d = fresh(os.path.join(TMP, "u8"))
    rng = np.random.default_rng(8)
    tiles = {}
    for r in (1, 2):
        for c in (1, 2):
            a = rng.integers(0, 256, size=(2, 48, 40), dtype=np.uint8)
            name = os.path.join(d, f"tile_{r}-{c:03d}.tif")
            if (r, c) == (2, 2):  # Pillow's LZW (tifffile needs imagecodecs for it)
                pages = [Image.fromarray(p) for p in a]
                pages[0].save(name, compression="tiff_lzw", save_all=True, append_images=pages[1:])
            else:
                tifffile.imwrite(name, a, tile=(16, 16), compression="zlib", photometric="minisblack")
            tiles[f"{c - 1:03d}{r - 1:03d}"] = a
    return d, tiles


def check_uint8_pages():
    d, tiles = synthetic_uint8_pages()
    out = os.path.join(TMP, "u8.zarr")
    s = import_json(d, out, "--pattern", "tile_{row}-{col}.tif", "--first-index", 1, "--format", "0.4",
                    "--chunk", 32, "--codec", "blosc-lz4")
    check(s["positions"] == 4 and s["channels"] == 2 and s["dtype"] == "uint8" and s["grid"] == [2, 2],
          f"u8: summary {s}")
    check_schemas(out, "0.4")
    for pos, want in tiles.items():
        got = zarr_tile(out, pos)
        check(got.dtype == np.uint8 and got.shape == (1, 2, 1, 48, 40), f"u8 {pos}: {got.dtype} {got.shape}")
        check(np.array_equal(got[0, :, 0], want), f"u8 {pos}: pixels differ from the TIFF pages")
    # --names-yx: position YYYXXX
    out2 = os.path.join(TMP, "u8_yx.zarr")
    import_json(d, out2, "--pattern", "tile_{row}-{col}.tif", "--first-index", 1, "--names-yx",
                "--format", "0.4", "--well", "B/3")
    got = zarr_tile(out2, "001000", well="B/3")  # row 1 (second), column 0
    check(np.array_equal(got[0, :, 0], tiles["000001"]), "u8 --names-yx: position 001000 is not row 1, col 0")


# ------------------------------------------------------------ real tiles

def check_starrynight():
    files = {i: os.path.join(STARRY, f"{i}.tif") for i in range(1, 11)}
    tiles = {i: tifffile.imread(f) for i, f in files.items()}
    H, W = tiles[1].shape
    out = os.path.join(TMP, "starry.zarr")
    s = import_json(STARRY, out, "--pattern", "{index}.tif", "--first-index", 1, "--grid", "10x1",
                    "--format", "0.4")
    check(s["positions"] == 10 and s["tile"] == [H, W] and s["dtype"] == "uint8", f"starrynight: {s}")
    for i, t in tiles.items():
        got = zarr_tile(out, f"{i - 1:03d}000")
        check(got.dtype == np.uint8 and np.array_equal(got.reshape(H, W), t),
              f"starrynight {i}.tif: pixels differ from tifffile's")

    nominal = read_config(os.path.join(STARRY, "tile_config.txt"))
    fiji = read_config(os.path.join(STARRY, "tile_config.registered.txt"))
    pitch = nominal[2][1] - nominal[1][1]
    overlap = int(round(W - pitch))
    mine = os.path.join(TMP, "starry.yaml")
    rp.run_estimate(out, mine, "--overlap", overlap)
    ref_plate = os.path.join(TMP, "starry_ref.zarr")
    rp.write_plate(ref_plate, {f"{i - 1:03d}000": t for i, t in tiles.items()})
    ref = os.path.join(TMP, "starry_ref.yaml")
    summary = rp.run_estimate(ref_plate, ref, "--overlap", overlap)
    pm, pr = rp.pairs_by_names(rp.read_shifts(mine)), rp.pairs_by_names(rp.read_shifts(ref))
    check(pm.keys() == pr.keys(), f"starrynight: pairs {sorted(pm)} vs {sorted(pr)} of the zarr-python plate")
    for k in pr:
        if k in pm:
            check(np.allclose(pm[k], pr[k], rtol=0, atol=1e-9),
                  f"starrynight pair {k}: {pm[k]} on the imported plate, {pr[k]} on zarr-python's")
    agreed = 0
    for i in range(1, 10):
        dy, dx, _ = pm.get((f"{i - 1:03d}000", f"{i:03d}000"), (np.nan, np.nan, 0))
        fd = np.subtract(fiji[i + 1], fiji[i])
        _, sy, sx = rp.ncc_search(tiles[i], tiles[i + 1], (-24, 24), (int(pitch) - 140, int(pitch) + 140))
        if np.hypot(fd[0] - sy, fd[1] - sx) > 2.0:
            continue  # ambiguous pair (periodic target): test_register_starrynight covers it
        agreed += 1
        check(np.hypot(dy - sy, dx - sx) <= 1.0 and np.hypot(dy - fd[0], dx - fd[1]) <= 2.0,
              f"starrynight {i}->{i + 1}: ({dy:.2f}, {dx:.2f}) vs NCC ({sy}, {sx}), Fiji {tuple(fd)}")
    check(agreed >= 3, f"starrynight: only {agreed} unambiguous pairs")
    print(f"starrynight: {len(pm)} pairs equal to the zarr-python plate's, {agreed} unambiguous pairs "
          f"within 1 px of the NCC search; strips {summary['strip_right']}")


# ------------------------------------------------------------ refusals

def refused(label, args, code, *needles, out=None):
    p = run("import", *map(str, args), ok=False)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == code, f"{label}: exit {p.returncode}, wanted {code}: {p.stderr.strip()}")
    check(len(lines) == 1, f"{label}: {len(lines)} lines on stderr: {p.stderr!r}")
    for n in needles:
        check(n in p.stderr, f"{label}: '{n}' not in the message: {p.stderr.strip()}")
    if out:
        check(not os.path.exists(out), f"{label}: {out} left behind")


def check_refusals():
    a = np.zeros((32, 32), np.uint16)
    out = os.path.join(TMP, "refused.zarr")
    if os.path.exists(out):
        shutil.rmtree(out)

    d = fresh(os.path.join(TMP, "rgb"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a)
    tifffile.imwrite(os.path.join(d, "r0_c1.tif"), np.zeros((32, 32, 3), np.uint8), photometric="rgb")
    refused("RGB", [d, "-o", out], 1, "r0_c1.tif", "RGB", out=out)

    d = fresh(os.path.join(TMP, "float"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a.astype(np.float32))
    refused("float", [d, "-o", out], 1, "r0_c0.tif", "floating-point", out=out)

    d = fresh(os.path.join(TMP, "miniswhite"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a, photometric="miniswhite")
    refused("min-is-white", [d, "-o", out], 1, "r0_c0.tif", "min-is-white", out=out)

    d = fresh(os.path.join(TMP, "sizes"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a)
    tifffile.imwrite(os.path.join(d, "r0_c1.tif"), np.zeros((32, 30), np.uint16))
    refused("sizes", [d, "-o", out], 1, "r0_c1.tif", "32x30", out=out)

    d = fresh(os.path.join(TMP, "dtypes"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a)
    tifffile.imwrite(os.path.join(d, "r1_c0.tif"), a.astype(np.uint8))
    refused("dtypes", [d, "-o", out], 1, "r1_c0.tif", "uint8", out=out)

    d = fresh(os.path.join(TMP, "nothing"))
    tifffile.imwrite(os.path.join(d, "tile_1.tif"), a)
    refused("no match", [d, "-o", out], 1, d, "r{row}_c{col}.tif", out=out)
    refused("no folder", [os.path.join(TMP, "no_such_dir"), "-o", out], 1, "no_such_dir", out=out)
    refused("index without grid", [d, "-o", out, "--pattern", "tile_{index}.tif"], 2, "--grid", out=out)
    refused("index outside grid", [d, "-o", out, "--pattern", "tile_{index}.tif", "--grid", "1x1"], 1,
            "tile_1.tif", out=out)
    refused("bad pattern", [d, "-o", out, "--pattern", "t{row}{col}.tif"], 2, "side by side", out=out)
    refused("unknown field", [d, "-o", out, "--pattern", "t{z}.tif"], 2, "{z}", out=out)

    d = fresh(os.path.join(TMP, "twice"))
    tifffile.imwrite(os.path.join(d, "r1_c1.tif"), a)
    tifffile.imwrite(os.path.join(d, "r01_c1.tif"), a)
    refused("one cell twice", [d, "-o", out], 1, "r01_c1.tif", "r1_c1.tif", out=out)

    d = fresh(os.path.join(TMP, "good"))
    tifffile.imwrite(os.path.join(d, "r0_c0.tif"), a)
    blocker = os.path.join(TMP, "a_file")
    open(blocker, "w").close()
    refused("unwritable output", [d, "-o", os.path.join(blocker, "plate.zarr")], 1, "a_file")
    refused("output not a store", [d, "-o", blocker], 1, "a_file", "not a zarr store")
    check(os.path.isfile(blocker), "a file at the output path was touched")

    # an existing store that holds the input folder is not replaced (that
    # deleted the tiles being imported: found in review)
    store = os.path.join(TMP, "holds_input.zarr")
    if os.path.exists(store):
        shutil.rmtree(store)
    run("import", d, "-o", store)
    inner = os.path.join(store, "raw")
    shutil.copytree(d, inner)
    refused("output holds the input", [inner, "-o", store], 2, "holds the input")
    check(os.path.isfile(os.path.join(inner, "r0_c0.tif")), "the input tiles inside the output were deleted")
    check(os.path.exists(os.path.join(store, "A", "1")), "the existing store was removed")

    # a compression libtiff does not know (the tag patched to JPEG 2000, 34712)
    d = fresh(os.path.join(TMP, "codec"))
    name = os.path.join(d, "r0_c0.tif")
    tifffile.imwrite(name, a)
    with tifffile.TiffFile(name) as tf:
        tag = tf.pages[0].tags["Compression"]
        where, little = tag.valueoffset, tf.byteorder == "<"
    with open(name, "r+b") as f:
        f.seek(where)
        f.write((34712).to_bytes(2, "little" if little else "big"))
    refused("unknown compression", [d, "-o", out], 1, "r0_c0.tif", "34712", out=out)

    # a tile whose header is fine but whose pixels are cut off: found while
    # writing, after the store was created -> the store is removed
    d = fresh(os.path.join(TMP, "truncated"))
    for c in range(3):
        tifffile.imwrite(os.path.join(d, f"r0_c{c}.tif"), np.full((64, 64), 7, np.uint16), rowsperstrip=64)
    bad = os.path.join(d, "r0_c2.tif")
    data = open(bad, "rb").read()
    off = tifffile.TiffFile(bad).pages[0].dataoffsets[0]
    open(bad, "wb").write(data[:off + 100])
    refused("truncated tile", [d, "-o", out, "--threads", 1], 1, "r0_c2.tif", out=out)


def check_help():
    p = run("import", "--help")
    check(p.returncode == 0 and "--pattern" in p.stdout and "{index}" in p.stdout, "import --help")
    p = run("--help")
    check(any(line.split()[:1] == ["import"] for line in p.stdout.splitlines()),
          "tessera --help does not list import")


def main():
    fresh(TMP)
    check_help()
    check_uint16()
    check_uint8_pages()
    check_starrynight()
    check_refusals()
    finish()


if __name__ == "__main__":
    main()
