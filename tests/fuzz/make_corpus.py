#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets, tests/fuzz/corpus/<target>/.

Seeds are small files written by others (../shared/testdata: zarr-python and
zarrita stores, numcodecs codec vectors, OME-NGFF examples and real plates'
metadata, crops of real TIFF tiles) and what tessera itself writes (a tiny
simulated plate in 0.4 and 0.5, its shifts files, a fused sharded mosaic).
Each seed has the layout its target reads (see the comment at the top of
tests/fuzz/fuzz_<target>.c). Run with Debian's /usr/bin/python3 (numpy,
tifffile):

    tests/fuzz/make_corpus.py --tessera build/tessera --minimize build-fuzz

Re-running rewrites the corpus; names are stable, so git shows what changed.
--minimize BUILD_DIR (a -DTESSERA_FUZZ=ON build) keeps only the seeds that
add coverage (libFuzzer -merge=1), so the corpus stays a few hundred KB.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_SEED = 12 * 1024  # bytes per seed: the corpus stays a few hundred KB


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > MAX_SEED:
        return
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def strip_comments(text):
    """The ngff-spec examples are JSON with // comments."""
    return re.sub(r"(?m)^\s*//.*$|\s//[^\"\n]*$", "", text)


def arrays(root):
    """(array dir, metadata file name) of every array below root."""
    for dirpath, _, files in os.walk(root):
        if ".zarray" in files:
            yield dirpath, ".zarray"
        elif "zarr.json" in files:
            doc = json.loads(read(os.path.join(dirpath, "zarr.json")))
            if doc.get("node_type") == "array":
                yield dirpath, "zarr.json"


def first_chunk(adir, meta_name):
    """The first storage block's bytes (None when absent)."""
    doc = json.loads(read(os.path.join(adir, meta_name)))
    ndim = len(doc.get("shape", []))
    if meta_name == ".zarray":
        sep = doc.get("dimension_separator") or "."
        key = sep.join(["0"] * ndim) if ndim else "0"
    else:
        enc = doc.get("chunk_key_encoding", {})
        sep = enc.get("configuration", {}).get("separator", "/" if enc.get("name", "default") == "default" else ".")
        if enc.get("name", "default") == "default":
            key = sep.join(["c"] + ["0"] * ndim)
        else:
            key = sep.join(["0"] * ndim) if ndim else "0"
    p = os.path.join(adir, key)
    return read(p) if os.path.isfile(p) else None


def zarr_seeds(root, tag):
    for adir, meta_name in arrays(root):
        name = tag + "_" + os.path.relpath(adir, root).replace("/", "_")
        meta = read(os.path.join(adir, meta_name))
        put("zarr_meta", name, meta)
        chunk = first_chunk(adir, meta_name)
        if chunk is None:
            continue
        doc = json.loads(meta)
        sharded = any(c.get("name") == "sharding_indexed" for c in doc.get("codecs", []) or [])
        if sharded:
            put("shard_index", name, meta + b"\0" + chunk)
            # The same shard with an index the fuzzer can change freely: no crc32c.
            for c in doc["codecs"]:
                if c.get("name") == "sharding_indexed":
                    ic = c["configuration"].get("index_codecs", [])
                    if any(x.get("name") == "crc32c" for x in ic):
                        c["configuration"]["index_codecs"] = [x for x in ic if x.get("name") != "crc32c"]
                        at_start = c["configuration"].get("index_location") == "start"
                        n = json.dumps(doc, indent=2).encode()
                        body = chunk[4:] if at_start else chunk[:-4]
                        if at_start:  # offsets move down by the 4 bytes removed
                            continue
                        put("shard_index", name + "_nocrc", n + b"\0" + body)
        else:
            put("codec_chain", name, meta + b"\0" + chunk)
            put("shard_index", name, meta + b"\0" + chunk)


NUMPY_V2 = {"int32": "<i4", "float64": "<f8", "bool": "|b1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2"}


def numcodecs_seeds(root):
    for cfg_path in sorted(glob.glob(os.path.join(root, "fixture", "*", "codec.*", "config.json"))):
        cdir = os.path.dirname(cfg_path)
        cfg = json.loads(read(cfg_path))
        for enc in sorted(glob.glob(os.path.join(cdir, "encoded.*.dat")))[:1]:
            k = enc.split(".")[-2]
            arr = np.load(os.path.join(os.path.dirname(cdir), "array.%s.npy" % k))
            dt = NUMPY_V2.get(str(arr.dtype))
            if dt is None:
                continue
            meta = {"zarr_format": 2, "shape": list(arr.shape), "chunks": list(arr.shape), "dtype": dt,
                    "order": "C", "fill_value": 0, "filters": None, "compressor": cfg}
            name = "numcodecs_%s_%s_%s" % (os.path.basename(os.path.dirname(cdir)), os.path.basename(cdir), k)
            put("codec_chain", name, json.dumps(meta).encode() + b"\0" + read(enc))


def ome_seed(v2, plate, well=None, image=None, array=None):
    parts = [json.dumps(plate)]
    for d in (well, image, array):
        if d is None:
            break
        parts.append(json.dumps(d))
    return ("2" if v2 else "3") + "\0".join(parts)


def load(p):
    return json.loads(read(p))


def ome_store_seeds(root, tag):
    """A plate store: its plate, first well, first image and level 0 array."""
    v2 = os.path.exists(os.path.join(root, ".zattrs"))
    mfile = ".zattrs" if v2 else "zarr.json"
    plate = load(os.path.join(root, mfile))
    attrs = plate if v2 else plate.get("attributes", {}).get("ome", {})
    wells = attrs.get("plate", {}).get("wells", [])
    docs = [plate]
    if wells:
        wdir = os.path.join(root, wells[0]["path"])
        if os.path.exists(os.path.join(wdir, mfile)):
            well = load(os.path.join(wdir, mfile))
            docs.append(well)
            wa = well if v2 else well.get("attributes", {}).get("ome", {})
            imgs = wa.get("well", {}).get("images", [])
            if imgs:
                idir = os.path.join(wdir, imgs[0]["path"])
                if os.path.exists(os.path.join(idir, mfile)):
                    image = load(os.path.join(idir, mfile))
                    docs.append(image)
                    ia = image if v2 else image.get("attributes", {}).get("ome", {})
                    ds = ia.get("multiscales", [{}])[0].get("datasets", [])
                    if ds:
                        adir = os.path.join(idir, ds[0]["path"])
                        am = os.path.join(adir, ".zarray" if v2 else "zarr.json")
                        if os.path.exists(am):
                            docs.append(load(am))
    put("ome_meta", tag, ome_seed(v2, *docs))


def ngff_example_seeds(root):
    for p in sorted(glob.glob(os.path.join(root, "ngff-spec", "*", "examples", "*", "*.json"))):
        try:
            doc = json.loads(strip_comments(read(p).decode()))
        except ValueError:
            continue
        ver = "05" if "/0.5/" in p else "04"
        name = "ngff%s_%s_%s" % (ver, os.path.basename(os.path.dirname(p)), os.path.basename(p)[:-5])
        v2 = ver == "04"
        attrs = doc if v2 else doc.get("attributes", {}).get("ome", doc)
        group = doc if v2 else {"zarr_format": 3, "node_type": "group", "attributes": {"ome": attrs}}
        if "plate" in attrs:
            put("ome_meta", name, ome_seed(v2, group))
        elif "well" in attrs:
            pl = {"plate": {"version": attrs["well"].get("version", "0.4"), "rows": [{"name": "A"}],
                            "columns": [{"name": "1"}], "wells": [{"path": "A/1", "rowIndex": 0, "columnIndex": 0}]}}
            if not v2:
                pl = {"zarr_format": 3, "node_type": "group", "attributes": {"ome": dict(pl, version="0.5")}}
            put("ome_meta", name, ome_seed(v2, pl, group))


def tiff_seeds(root):
    import tifffile
    src = glob.glob(os.path.join(root, "starrynight", "**", "1.tif"), recursive=True)
    if not src:
        return
    img = tifffile.imread(src[0])
    if img.ndim > 2:
        img = img[..., 0]
    crop8 = np.ascontiguousarray(img[100:140, 200:248]).astype(np.uint8)
    crop16 = crop8.astype(np.uint16) * 257
    tmp = tempfile.mkdtemp(prefix="tessera-corpus-")
    try:
        cases = {
            "u8_strips": (crop8, {}),
            "u8_rows4": (crop8, {"rowsperstrip": 4}),
            "u8_deflate": (crop8, {"compression": "zlib"}),
            "u16_tiles": (crop16, {"tile": (16, 16)}),
            "u16_tiles_deflate": (crop16, {"tile": (16, 16), "compression": "zlib"}),
            "u16_bigendian": (crop16, {"byteorder": ">"}),
            "u8_bigtiff": (crop8, {"bigtiff": True}),
            "u8_packbits": (crop8, {"compression": "packbits"}),
        }
        for name, (a, kw) in cases.items():
            p = os.path.join(tmp, name + ".tif")
            try:
                tifffile.imwrite(p, a, photometric="minisblack", **kw)
            except Exception as e:  # a codec tifffile lacks without imagecodecs
                print("skip %s: %s" % (name, e), file=sys.stderr)
                continue
            put("tiff_read", name, read(p))
        p = os.path.join(tmp, "pages.tif")
        with tifffile.TiffWriter(p) as w:
            w.write(crop8, photometric="minisblack")
            w.write(crop8[::-1].copy(), photometric="minisblack")
            w.write(crop8[::2, ::2].copy(), photometric="minisblack", subfiletype=1)  # a pyramid level
        put("tiff_read", "u8_two_pages_pyramid", read(p))
    finally:
        shutil.rmtree(tmp)


def tessera_seeds(binary):
    tmp = tempfile.mkdtemp(prefix="tessera-corpus-")
    try:
        def run(*args):
            subprocess.run([binary] + list(args), check=True, stdout=subprocess.DEVNULL)
        for fmt in ("0.4", "0.5"):
            plate = os.path.join(tmp, "plate%s.ome.zarr" % fmt)
            truth = os.path.join(tmp, "truth%s.yaml" % fmt)
            run("simulate", "-o", plate, "--wells", "A/1,B/2", "--grid", "2x2", "--tile", "48x64", "--overlap", "12",
                "--channels", "2", "--format", fmt, "--seed", "3", "--truth", truth)
            tag = "tessera%s" % fmt.replace(".", "")
            ome_store_seeds(plate, tag + "_plate")
            zarr_seeds(plate, tag + "_plate")
            put("shifts_yaml", tag + "_truth", read(truth))
            shifts = os.path.join(tmp, "shifts%s.yaml" % fmt)
            run("estimate", plate, "-o", shifts, "--overlap", "12")
            put("shifts_yaml", tag + "_estimate", read(shifts))
            solved = os.path.join(tmp, "solved%s.yaml" % fmt)
            run("solve", shifts, "-o", solved, "--solver", "l1")
            put("shifts_yaml", tag + "_solve_l1", read(solved))
            mosaic = os.path.join(tmp, "mosaic%s.ome.zarr" % fmt)
            extra = ["--shard", "2", "--chunk", "32"] if fmt == "0.5" else ["--chunk", "32"]
            run("fuse", plate, shifts, "-o", mosaic, "--format", fmt, "--levels", "2", *extra)
            zarr_seeds(mosaic, tag + "_mosaic")
    finally:
        shutil.rmtree(tmp)
    # A file of the old tool: total_translation and confidence only.
    put("shifts_yaml", "old_tool", "total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [2, 410]\n"
        "confidence:\n  A/1:\n    '0': [[0, 0], [1, 0], 0.93]\n")


def minimize(build):
    """Keeps the seeds libFuzzer's -merge=1 keeps (it names them by SHA-1)."""
    for t in sorted(os.listdir(os.path.join(HERE, "corpus"))):
        src = os.path.join(HERE, "corpus", t)
        tmp = tempfile.mkdtemp(prefix="tessera-merge-")
        try:
            env = dict(os.environ, TMPDIR=tmp)
            out = os.path.join(tmp, "kept")
            os.mkdir(out)
            subprocess.run([os.path.join(build, "tests", "fuzz", "fuzz_" + t), "-merge=1", out, src], env=env,
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            kept = set(os.listdir(out))
            for f in os.listdir(src):
                if hashlib.sha1(read(os.path.join(src, f))).hexdigest() not in kept:
                    os.remove(os.path.join(src, f))
        finally:
            shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", default=os.path.join(HERE, "..", "..", "..", "shared", "testdata"))
    ap.add_argument("--tessera", help="a built tessera binary, for seeds of what tessera writes")
    ap.add_argument("--minimize", metavar="BUILD_DIR", help="a -DTESSERA_FUZZ=ON build: keep the seeds adding coverage")
    a = ap.parse_args()
    td = os.path.abspath(a.testdata)
    for t in ("zarr_meta", "codec_chain", "shard_index", "shifts_yaml", "ome_meta", "tiff_read"):
        shutil.rmtree(os.path.join(HERE, "corpus", t), ignore_errors=True)
    zarr_seeds(os.path.join(td, "zarrita_fixtures", "fixtures", "v3", "data.zarr"), "zarrita3")
    zarr_seeds(os.path.join(td, "zarrita_fixtures", "fixtures", "v2", "data.zarr"), "zarrita2")
    for root in sorted(glob.glob(os.path.join(td, "zarr_implementations", "**", "*.zarr"), recursive=True)):
        zarr_seeds(root, "zimpl_" + os.path.basename(root))
    numcodecs_seeds(os.path.join(td, "numcodecs"))
    for root in ("yaozarrs/tests/data/v04/2551.zarr", "yaozarrs/tests/data/v05/76-45.ome.zarr"):
        p = os.path.join(td, root)
        if os.path.isdir(p):
            ome_store_seeds(p, "yaozarrs_" + os.path.basename(p))
    ngff_example_seeds(td)
    tiff_seeds(td)
    if a.tessera:
        tessera_seeds(os.path.abspath(a.tessera))
    if a.minimize:
        minimize(os.path.abspath(a.minimize))
    total = 0
    for t in sorted(os.listdir(os.path.join(HERE, "corpus"))):
        files = glob.glob(os.path.join(HERE, "corpus", t, "*"))
        size = sum(os.path.getsize(f) for f in files)
        total += size
        print("%-12s %3d seeds %7d bytes" % (t, len(files), size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
