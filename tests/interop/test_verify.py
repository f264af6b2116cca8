"""tessera verify: clean stores verify clean with the right counts (simulate
0.4 and 0.5 plates, fuse outputs, zarr-python arrays, the stores of
shared/testdata); then copies are damaged one way each (a truncated shard, a
flipped byte in a chunk, in an inner chunk and in a shard index, index
entries past the end / over the index / overlapping / half a sentinel,
rewritten with a valid CRC32C, a deleted chunk, deleted array metadata, a
deleted listed image and well) and verify must name exactly the damaged
piece (path and key), exit 1, and give the same one-line --json whatever
the thread count. The expected counts are computed here from the files
and the zarr metadata, not copied from a run."""
import json
import math
import os
import shutil
import struct
import sys
import tempfile

import numpy as np
import zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import crc32c, check, finish  # noqa: E402
import interop_checks  # noqa: E402

TMP = tempfile.mkdtemp(prefix="verify_", dir=os.environ.get("TESSERA_TEST_TMP"))
DATA = os.environ.get("TESSERA_TESTDATA", os.path.join(os.path.dirname(__file__), "../../../shared/testdata"))
EMPTY = 2**64 - 1


def run(*args):
    return interop_checks.run(*map(str, args), ok=False)


def verify(store, *flags):
    """(exit status, parsed --json summary or None, the process)."""
    p = run("verify", store, "--json", *flags)
    try:
        return p.returncode, json.loads(p.stdout), p
    except ValueError:
        check(False, f"verify {store} --json is not one JSON document: {p.stdout!r} {p.stderr!r}")
        return p.returncode, None, p


def meta(array_dir):
    with open(os.path.join(array_dir, "zarr.json" if os.path.exists(os.path.join(array_dir, "zarr.json"))
                           else ".zarray")) as f:
        return json.load(f)


def shard_layout(m):
    """(inner chunks per shard, index bytes) of a v3 sharded array's metadata."""
    sh = m["codecs"][0]["configuration"]
    n = math.prod(s // c for s, c in zip(m["chunk_grid"]["configuration"]["chunk_shape"], sh["chunk_shape"]))
    crc = any(c["name"] == "crc32c" for c in sh["index_codecs"])
    return n, 16 * n + (4 if crc else 0)


def read_index(path, n):
    with open(path, "rb") as f:
        raw = f.read()
    ix = struct.unpack(f"<{2 * n}Q", raw[len(raw) - 16 * n - 4:len(raw) - 4])
    return raw, [(ix[2 * i], ix[2 * i + 1]) for i in range(n)]


def write_index(path, raw, entries):
    body = b"".join(struct.pack("<QQ", o, nb) for o, nb in entries)
    idx_len = 16 * len(entries) + 4
    with open(path, "wb") as f:
        f.write(raw[:len(raw) - idx_len] + body + struct.pack("<I", crc32c(body)))


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def data_files(array_dir):
    """Chunk/shard files of an array (relative keys), by walking the directory."""
    out = []
    for d, dirs, files in os.walk(array_dir):
        for f in files:
            if f not in ("zarr.json", ".zarray", ".zattrs"):
                out.append(os.path.relpath(os.path.join(d, f), array_dir))
        # arrays nested in arrays do not occur in these stores
    return sorted(out)


def expected_clean(store, arrays):
    """Counts a clean store must give: blocks (files), chunks decoded, empty
    inner chunks, absent keys, from the metadata and the files on disk."""
    blocks = chunks = empty = absent = 0
    for a in arrays:
        d = os.path.join(store, a)
        m = meta(d)
        files = data_files(d)
        if m.get("zarr_format") == 3:
            grid_chunk = m["chunk_grid"]["configuration"]["chunk_shape"]
        else:
            grid_chunk = m["chunks"]
        nkeys = math.prod(-(-s // c) for s, c in zip(m["shape"], grid_chunk))
        blocks += len(files)
        absent += nkeys - len(files)
        if m.get("zarr_format") == 3 and m["codecs"][0]["name"] == "sharding_indexed":
            n, _ = shard_layout(m)
            for f in files:
                _, ix = read_index(os.path.join(d, f), n)
                e = sum(1 for o, nb in ix if o == EMPTY and nb == EMPTY)
                empty += e
                chunks += n - e
        else:
            chunks += len(files)
    return blocks, chunks, empty, absent


def plate_arrays(store):
    """Level arrays of every listed image of a plate, from its metadata."""
    def attrs(d):
        if os.path.exists(os.path.join(d, "zarr.json")):
            with open(os.path.join(d, "zarr.json")) as f:
                return json.load(f)["attributes"]["ome"]
        with open(os.path.join(d, ".zattrs")) as f:
            return json.load(f)
    out = []
    for w in attrs(store)["plate"]["wells"]:
        for im in attrs(os.path.join(store, w["path"]))["well"]["images"]:
            ip = f"{w['path']}/{im['path']}"
            for ds in attrs(os.path.join(store, ip))["multiscales"][0]["datasets"]:
                out.append(f"{ip}/{ds['path']}")
    return out


def check_clean(name, store, arrays, images):
    rc, s, p = verify(store)
    if s is None:
        return
    blocks, chunks, empty, absent = expected_clean(store, arrays)
    got = (s["arrays"], s["images"], s["blocks"], s["chunks"], s["empty"], s["absent"])
    want = (len(arrays), images, blocks, chunks, empty, absent)
    check(rc == 0 and s["ok"] and s["errors"] == [] and not p.stderr,
          f"{name}: clean store: exit {rc}, {s['errors'][:3]}, stderr {p.stderr!r}")
    check(got == want, f"{name}: (arrays, images, blocks, chunks, empty, absent) {got}, expected {want}")
    nbytes = sum(os.path.getsize(os.path.join(store, a, f)) for a in arrays for f in data_files(os.path.join(store, a)))
    check(s["bytes_read"] <= nbytes and s["bytes_read"] > 0, f"{name}: bytes_read {s['bytes_read']} vs {nbytes} on disk")
    t = run("verify", store)
    check(t.returncode == 0 and t.stdout.strip().endswith("ok"), f"{name}: text summary {t.stdout!r}")


def damaged(name, src, damage, expect, flags=(), compare_threads=True):
    """Copies src, damages the copy, and checks that verify reports exactly
    `expect` (a list of (path, key, kind) and optionally inner) and exit 1."""
    dst = os.path.join(TMP, name)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    damage(dst)
    rc, s, p = verify(dst, *flags)
    if s is None:
        return None
    got = [tuple(e[k] for k in ("path", "key", "kind")) + ((e["inner"],) if "inner" in e else ()) for e in s["errors"]]
    check(rc == 1 and not s["ok"] and s["nerrors"] == len(expect),
          f"{name}: exit {rc}, ok {s['ok']}, nerrors {s['nerrors']} (expected {len(expect)})")
    check(sorted(got) == sorted(expect), f"{name}: reported {got}, expected {expect}")
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    check(len(lines) == 1 and "problem" in lines[0], f"{name}: stderr is not one line: {p.stderr!r}")
    if compare_threads:
        _, s1, _ = verify(dst, "--threads", "1", *flags)
        _, s3, _ = verify(dst, "--threads", "3", *flags)
        if s1 and s3:
            check(s1["errors"] == s["errors"] == s3["errors"], f"{name}: errors depend on the thread count")
    return s


def main():
    for c in ("--help",):
        p = run("verify", c)
        check(p.returncode == 0 and "usage" in p.stdout and not p.stderr, f"verify --help: {p.returncode} {p.stderr!r}")
    p = run("verify", os.path.join(TMP, "none"), "--no-such-flag")
    check(p.returncode == 2 and "--no-such-flag" in p.stderr, f"verify --no-such-flag: {p.returncode} {p.stderr!r}")
    p = run("verify", os.path.join(TMP, "none"))
    check(p.returncode == 1 and len(p.stderr.splitlines()) == 1, f"verify of no store: {p.returncode} {p.stderr!r}")

    # ---- clean stores
    plates = {}
    for fmt in ("0.4", "0.5"):
        plate = os.path.join(TMP, f"p{fmt}.zarr")
        truth = os.path.join(TMP, f"t{fmt}.yaml")
        run("simulate", "-o", plate, "--grid", "3x2", "--tile", "96x128", "--overlap", "24", "--seed", "3",
            "--format", fmt, "--truth", truth, "--channels", "2")
        mosaic = os.path.join(TMP, f"m{fmt}.zarr")
        f = run("fuse", plate, truth, "-o", mosaic, "--chunk", "32", "--shard", "3", "--levels", "2",
                "--format", fmt)
        check(f.returncode == 0, f"fuse {fmt}: {f.stderr}")
        plates[fmt] = (plate, mosaic)
        arrays = plate_arrays(plate)
        check_clean(f"simulate {fmt}", plate, arrays, 6)
        check_clean(f"fuse {fmt}", mosaic, plate_arrays(mosaic), 1)
        # an image and a single array as the store
        levels = [a.split("/", 3)[3] for a in plate_arrays(mosaic)]
        check(len(levels) == 3, f"fuse {fmt} --levels 2: levels {levels}")
        check_clean(f"fuse {fmt} image", os.path.join(mosaic, "A/1/0"), levels, 1)
        check_clean(f"simulate {fmt} array", os.path.join(plate, arrays[0]), [""], 0)

    # zarr-python (v2): a group with a blosc and a zlib array, ragged edges,
    # one chunk never written (all fill)
    zp = os.path.join(TMP, "zp.zarr")
    g = zarr.open_group(zp, mode="w")
    a = g.create_dataset("blosc", shape=(50, 70), chunks=(16, 32), dtype="<u2")
    a[:] = np.arange(50 * 70, dtype="<u2").reshape(50, 70)
    b = g.create_dataset("sub/zlib", shape=(40, 30), chunks=(20, 20), dtype="<f4",
                         compressor=zarr.Zlib(level=3), fill_value=0)
    b[:20, :20] = 1.5
    b[20:, 20:] = 2.5
    check_clean("zarr-python", zp, ["blosc", "sub/zlib"], 0)

    # ---- shared/testdata stores: every array tessera reads verifies clean;
    # the whole groups report exactly the arrays tessera refuses, as unsupported
    zi = os.path.join(DATA, "zarr_implementations/examples/zarr.zr")
    check_clean("zarr_implementations", zi, ["blosc", "gzip", "raw", "zlib"], 0)
    for v, n_unsupported in (("v2", 14), ("v3", 9)):
        root = os.path.join(DATA, f"zarrita_fixtures/fixtures/{v}/data.zarr")
        rc, s, _ = verify(root)
        if not s:
            continue
        kinds = {e["kind"] for e in s["errors"]}
        check(rc == 1 and kinds == {"unsupported"} and len(s["errors"]) == n_unsupported,
              f"zarrita {v}: {len(s['errors'])} problems of kinds {kinds}, expected {n_unsupported} unsupported")
        bad = {e["path"] for e in s["errors"]}
        for name in sorted(os.listdir(root)):
            d = os.path.join(root, name)
            if name in bad or not (os.path.exists(os.path.join(d, ".zarray")) or
                                   (os.path.exists(os.path.join(d, "zarr.json")) and
                                    meta(d).get("node_type") == "array")):
                continue
            rc, s1, _ = verify(d)
            check(rc == 0 and s1 and s1["ok"] and s1["arrays"] == 1, f"zarrita {v} {name}: {s1}")

    # ---- damage, one way per copy
    plate5, mosaic5 = plates["0.5"]
    plate4, mosaic4 = plates["0.4"]
    tile5 = plate_arrays(plate5)[0]      # A/1/000000/0 (v3 chunks c/0/0/0/0/0)
    tile4 = plate_arrays(plate4)[0]      # v2 chunks 0.0.0.0.0
    lvl0 = "A/1/0/0"
    m0 = meta(os.path.join(mosaic5, lvl0))
    n_inner, idx_bytes = shard_layout(m0)
    shards = data_files(os.path.join(mosaic5, lvl0))
    # a shard with at least two non-empty inner chunks
    full = None
    for sh in shards:
        _, ix = read_index(os.path.join(mosaic5, lvl0, sh), n_inner)
        nonempty = [i for i, (o, nb) in enumerate(ix) if o != EMPTY]
        if len(nonempty) >= 2:
            full, full_ix, full_ne = sh, ix, nonempty
            break
    check(full is not None, "no fuse shard with two inner chunks")
    tile5_key = data_files(os.path.join(plate5, tile5))[0]
    tile4_key = data_files(os.path.join(plate4, tile4))[0]

    def truncate(rel, keep):
        def do(d):
            p = os.path.join(d, rel)
            with open(p, "r+b") as f:
                f.truncate(keep(os.path.getsize(p)))
        return do

    # a shard losing its tail (the index is at the end: its CRC no longer holds)
    damaged("trunc_shard", mosaic5, truncate(f"{lvl0}/{full}", lambda n: n - 100), [(lvl0, full, "corrupt")])
    # a shard shorter than its index alone
    damaged("trunc_shard_short", mosaic5, truncate(f"{lvl0}/{full}", lambda n: idx_bytes - 1),
            [(lvl0, full, "truncated")])
    # a truncated chunk of a tile (v3 and v2) and of a zarr-python array
    damaged("trunc_chunk5", plate5, truncate(f"{tile5}/{tile5_key}", lambda n: n // 2), [(tile5, tile5_key, "corrupt")])
    damaged("trunc_chunk4", plate4, truncate(f"{tile4}/{tile4_key}", lambda n: n // 2), [(tile4, tile4_key, "corrupt")])
    damaged("trunc_zp", zp, truncate("blosc/1.1", lambda n: n - 7), [("blosc", "1.1", "corrupt")])
    damaged("trunc_zp_zlib", zp, truncate("sub/zlib/0.0", lambda n: n - 3), [("sub/zlib", "0.0", "corrupt")])
    # a flipped byte in a chunk: the zstd frame's magic (a flip inside the
    # entropy-coded data of a chunk without checksum may decode to other
    # pixels, which no reader can tell)
    damaged("flip_chunk", plate5, lambda d: flip(os.path.join(d, tile5, tile5_key), 0), [(tile5, tile5_key, "corrupt")])
    # ... in the frame header of an inner chunk of a shard: named by inner number
    victim = full_ne[1]
    damaged("flip_inner", mosaic5, lambda d: flip(os.path.join(d, lvl0, full), full_ix[victim][0] + 4),
            [(lvl0, full, "corrupt", victim)])
    # a flipped byte in the shard index: CRC32C mismatch
    damaged("flip_index", mosaic5,
            lambda d: flip(os.path.join(d, lvl0, full), os.path.getsize(os.path.join(d, lvl0, full)) - idx_bytes + 3),
            [(lvl0, full, "corrupt")])

    def rewrite(fn):
        def do(d):
            p = os.path.join(d, lvl0, full)
            raw, ix = read_index(p, n_inner)
            write_index(p, raw, fn(list(ix), len(raw)))
        return do

    a0, a1 = full_ne[0], full_ne[1]

    def past_end(ix, size):
        ix[a0] = (size + 10, ix[a0][1])
        return ix

    def over_index(ix, size):  # inside the file, one byte into the index
        ix[a0] = (size - idx_bytes - 1, 2)
        return ix

    def overlap(ix, size):
        ix[a1] = (ix[a0][0] + 1, ix[a1][1])
        return ix

    def half_sentinel(ix, size):
        ix[a0] = (EMPTY, ix[a0][1])
        return ix

    s = damaged("index_past_end", mosaic5, rewrite(past_end), [(lvl0, full, "corrupt", a0)])
    if s:
        check("past its end" in s["errors"][0]["reason"], f"index_past_end reason: {s['errors'][0]['reason']!r}")
    s = damaged("index_over_index", mosaic5, rewrite(over_index), [(lvl0, full, "corrupt", a0)])
    if s:
        check("over the index" in s["errors"][0]["reason"], f"index_over_index reason: {s['errors'][0]['reason']!r}")
    # the moved chunk now starts one byte into chunk a0: both overlap and
    # fails to decode
    damaged("index_overlap", mosaic5, rewrite(overlap), [(lvl0, full, "corrupt", a1), (lvl0, full, "corrupt", a1)])
    s = damaged("index_half_sentinel", mosaic5, rewrite(half_sentinel), [(lvl0, full, "corrupt", a0)])
    if s:
        check("sentinel" in s["errors"][0]["reason"], f"index_half_sentinel reason: {s['errors'][0]['reason']!r}")

    # a deleted chunk of a tile: legitimately the fill in zarr, so counted
    # (absent 1, exit 0); with --require-chunks it is an error naming it
    gone = os.path.join(TMP, "gone_chunk")
    shutil.copytree(plate5, gone)
    os.remove(os.path.join(gone, tile5, tile5_key))
    rc, s, _ = verify(gone)
    check(rc == 0 and s and s["absent"] == 1 and s["ok"], f"deleted chunk without --require-chunks: {rc} {s}")
    damaged("gone_chunk5", plate5, lambda d: os.remove(os.path.join(d, tile5, tile5_key)),
            [(tile5, tile5_key, "missing")], flags=("--require-chunks",))
    damaged("gone_chunk4", plate4, lambda d: os.remove(os.path.join(d, tile4, tile4_key)),
            [(tile4, tile4_key, "missing")], flags=("--require-chunks",))
    # a FIFO where a chunk file should be: reported, never opened blocking
    def fifo(d):
        os.remove(os.path.join(d, tile5, tile5_key))
        os.mkfifo(os.path.join(d, tile5, tile5_key))
    s = damaged("fifo_chunk", plate5, fifo, [(tile5, tile5_key, "io")])
    if s:
        check("FIFO" in s["errors"][0]["reason"], f"fifo_chunk reason: {s['errors'][0]['reason']!r}")
    # deleted array metadata (a tile's; a mosaic level's)
    damaged("gone_meta5", plate5, lambda d: os.remove(os.path.join(d, tile5, "zarr.json")), [(tile5, "", "metadata")])
    damaged("gone_meta4", plate4, lambda d: os.remove(os.path.join(d, tile4, ".zarray")), [(tile4, "", "metadata")])
    damaged("gone_level", mosaic5, lambda d: os.remove(os.path.join(d, "A/1/0/1/zarr.json")),
            [("A/1/0/1", "", "metadata")])
    # a deleted listed image: a tile, the mosaic of a fuse output
    img = tile5.rsplit("/", 1)[0]
    damaged("gone_image", plate5, lambda d: shutil.rmtree(os.path.join(d, img)), [(img, "", "metadata")])
    damaged("gone_mosaic4", mosaic4, lambda d: shutil.rmtree(os.path.join(d, "A/1/0")), [("A/1/0", "", "metadata")])
    # a listed well whose group metadata is gone (its images still on disk
    # are not listed by anything, so not checked); the other well still is
    two = os.path.join(TMP, "two.zarr")
    run("simulate", "-o", two, "--wells", "A/1,B/2", "--grid", "2x1", "--tile", "32x40", "--overlap", "8")
    s = damaged("gone_well", two, lambda d: os.remove(os.path.join(d, "B/2/zarr.json")), [("B/2", "", "metadata")])
    if s:
        check(s["arrays"] == 2 and s["images"] == 2, f"gone_well: the other well's tiles not checked: {s}")
    # a zarr-python array losing its metadata inside a group: its chunks
    # are no longer an array (nothing to check), the group walk finds one
    # array fewer; a damaged .zarray is reported
    damaged("bad_zarray", zp, lambda d: open(os.path.join(d, "blosc/.zarray"), "w").write("{not json"),
            [("blosc", "", "metadata")])
    # the plate's own metadata damaged: one problem at the store itself
    damaged("bad_plate", plate5, lambda d: open(os.path.join(d, "zarr.json"), "w").write("[]"), [("", "", "metadata")])

    # several problems at once are all listed, in store order, and
    # --max-problems lists the first ones while counting all
    def many(d):
        for i in range(3):
            k = data_files(os.path.join(d, plate_arrays(d)[i]))[0]
            flip(os.path.join(d, plate_arrays(d)[i], k), 0)
    s = damaged("many", plate5, many, [(plate_arrays(plate5)[i], tile5_key, "corrupt") for i in range(3)])
    if s:
        check([e["path"] for e in s["errors"]] == plate_arrays(plate5)[:3], f"many: not in store order: {s['errors']}")
        rc, s1, _ = verify(os.path.join(TMP, "many"), "--max-problems", "1")
        check(rc == 1 and s1 and s1["nerrors"] == 3 and s1["errors"] == s["errors"][:1],
              f"--max-problems 1: {s1}")

    shutil.rmtree(TMP, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
