"""Interop of tessera's zarr layer with implementations nobody here wrote.

- python3-zarr (Debian, zarr 2.x) writes v2 arrays that tessera reads
  exactly, and reads tessera's v2 output exactly;
- zarrita (node, tests/interop/js) reads tessera's v3 output, sharded and
  not, exactly; tessera reads every zarrita fixture it supports exactly as
  zarrita does; zarrita writes v3 arrays that tessera reads exactly.

Tessera's side is driven by tests/tools/zarr_tool (TESSERA_ZARR_TOOL).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import zarr
import numcodecs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import crc32c  # noqa: E402

TOOL = os.environ.get("TESSERA_ZARR_TOOL")
SOURCE = os.environ.get("TESSERA_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.environ.get("TESSERA_TESTDATA", os.path.join(SOURCE, "..", "shared", "testdata"))
JS = os.path.join(SOURCE, "tests", "interop", "js")
TMP_ROOT = os.environ.get("TESSERA_TEST_TMP", tempfile.gettempdir())


def tessera_dump(path, out):
    r = subprocess.run([TOOL, "dump", path, out], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"zarr_tool dump {path} failed: {r.stderr.strip()}")
    meta = json.loads(r.stdout)
    data = np.fromfile(out, dtype=np.dtype(meta["dtype"]))
    return data.reshape(meta["shape"]), meta


def tessera_write(path, out, *args):
    r = subprocess.run([TOOL, "write-random", path, "--out", out, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"zarr_tool write-random {' '.join(args)} failed: {r.stderr.strip()}")


def zarrita_dump(pairs):
    """pairs: [(array_dir, out_bin)] -> list of result dicts (data as numpy)."""
    args = ["node", os.path.join(JS, "zarr_dump.mjs")]
    for d, o in pairs:
        args += [d, o]
    r = subprocess.run(args, capture_output=True, text=True, cwd=JS)
    if r.returncode != 0:
        raise AssertionError(f"zarrita dump failed: {r.stderr.strip()}")
    results = []
    for line, (d, o) in zip(r.stdout.strip().splitlines(), pairs):
        res = json.loads(line)
        if res["ok"]:
            try:
                np.dtype(res["dtype"])
            except TypeError:
                res.update(ok=False, error=f"non-numeric dtype {res['dtype']}")
                results.append(res)
                continue
            res["data"] = np.fromfile(o, dtype=np.dtype(res["dtype"])).reshape(res["shape"])
        results.append(res)
    return results


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


assert crc32c(b"123456789") == 0xE3069283


def assert_same(testcase, got, expect, what):
    testcase.assertEqual(got.shape, expect.shape, what)
    testcase.assertEqual(got.dtype, expect.dtype, what)
    same = np.array_equal(got, expect, equal_nan=got.dtype.kind == "f")
    if not same:
        bad = np.argwhere(~((got == expect) | (np.isnan(got) & np.isnan(expect)) if got.dtype.kind == "f" else (got == expect)))
        testcase.fail(f"{what}: {len(bad)} values differ, first at {tuple(bad[0])}: "
                      f"{got[tuple(bad[0])]} vs {expect[tuple(bad[0])]}")


@unittest.skipUnless(TOOL and os.path.exists(TOOL), "TESSERA_ZARR_TOOL not built")
class ZarrInterop(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="zarr_interop.", dir=TMP_ROOT)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def p(self, name):
        return os.path.join(self.tmp, name)

    # ---------------------------------------------------------- zarr-python v2

    def test_zarr_python_writes_tessera_reads(self):
        rng = np.random.default_rng(7)
        B = numcodecs.Blosc
        cases = [
            ("blosc_lz4", np.uint16, B(cname="lz4", clevel=5, shuffle=B.SHUFFLE), "."),
            ("blosc_zstd_bit", np.uint16, B(cname="zstd", clevel=3, shuffle=B.BITSHUFFLE), "/"),
            ("blosc_blosclz_none", np.int32, B(cname="blosclz", clevel=5, shuffle=B.NOSHUFFLE), "."),
            ("blosc_zlib", np.float32, B(cname="zlib", clevel=5, shuffle=B.SHUFFLE), "/"),
            ("zstd", np.uint16, numcodecs.Zstd(level=3), "/"),
            ("zstd_f64", np.float64, numcodecs.Zstd(level=1), "."),
            ("zlib", np.int16, numcodecs.Zlib(level=5), "/"),
            ("gzip", np.uint8, numcodecs.GZip(level=6), "."),
            ("raw", np.int64, None, "/"),
            ("raw_u32", np.uint32, None, "."),
        ]
        for name, dtype, comp, sep in cases:
            with self.subTest(name=name):
                shape, chunks = (45, 61), (16, 20)
                if np.dtype(dtype).kind == "f":
                    data = rng.normal(0, 1000, size=shape).astype(dtype)
                else:
                    info = np.iinfo(dtype)
                    data = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
                data[:16, :20] = 3  # one chunk equal to the fill value: zarr-python may skip it
                path = self.p(f"zp_{name}")
                z = zarr.open_array(path, mode="w", shape=shape, chunks=chunks, dtype=dtype,
                                    compressor=comp, fill_value=3, dimension_separator=sep)
                z[:] = data
                got, meta = tessera_dump(path, self.p(f"zp_{name}.bin"))
                self.assertEqual(meta["zarr_format"], 2)
                assert_same(self, got, data, name)

    def test_zarr_python_big_endian_and_3d(self):
        data = np.arange(5 * 7 * 9, dtype=">i4").reshape(5, 7, 9) * -3
        path = self.p("be3d")
        z = zarr.open_array(path, mode="w", shape=data.shape, chunks=(2, 3, 4), dtype=">i4",
                            compressor=numcodecs.Zstd(level=1))
        z[:] = data
        got, _ = tessera_dump(path, self.p("be3d.bin"))
        assert_same(self, got, data.astype("<i4"), "big-endian 3-D")

    def test_tessera_writes_zarr_python_reads(self):
        cases = [
            ("--codec", "zstd", "--sep", "/", "--dtype", "uint16"),
            ("--codec", "blosc-lz4", "--sep", ".", "--dtype", "uint16"),
            ("--codec", "blosc-zstd", "--sep", "/", "--dtype", "float32"),
            ("--codec", "blosc-lz4-bit", "--sep", "/", "--dtype", "int32"),
            ("--codec", "gzip", "--sep", ".", "--dtype", "uint8"),
            ("--codec", "zlib", "--sep", "/", "--dtype", "float64"),
            ("--codec", "none", "--sep", "/", "--dtype", "int16", "--fill", "7"),
        ]
        for i, args in enumerate(cases):
            with self.subTest(args=" ".join(args)):
                path, out = self.p(f"tv2_{i}"), self.p(f"tv2_{i}.bin")
                tessera_write(path, out, "--format", "2", "--shape", "37,50", "--chunk", "16,16",
                              "--seed", str(i + 1), *args)
                dtype = np.dtype(args[args.index("--dtype") + 1])
                expect = np.fromfile(out, dtype=dtype).reshape(37, 50)
                z = zarr.open_array(path, mode="r")
                self.assertEqual(z.dtype, dtype)
                self.assertEqual(z.chunks, (16, 16))
                assert_same(self, z[:], expect, " ".join(args))
                # Edge chunks are stored whole (padded), as zarr-python expects.
                sep = args[args.index("--sep") + 1]
                key = f"2{sep}3"
                if os.path.exists(os.path.join(path, key)):
                    raw = read_bytes(os.path.join(path, key))
                    raw = z.compressor.decode(raw) if z.compressor else raw
                    self.assertEqual(len(bytes(raw)), 16 * 16 * dtype.itemsize)

    # --------------------------------------------------------------- zarrita v3

    def test_zarrita_reads_tessera_v3(self):
        cases = [
            ("u16_sharded_zstd", "uint16", "37,50", "8,8", "16,16", "zstd", []),
            ("u16_sharded_blosc", "uint16", "37,50", "8,8", "16,16", "blosc-lz4", []),
            ("f32_sharded_gzip", "float32", "33,29,5", "4,8,5", "8,16,5", "gzip", []),
            # (index_location "start" is not here: zarrita 0.7.5 always reads the index from the end.)
            ("u16_sharded_none", "uint16", "70,45", "16,16", "32,32", "none", []),
            ("u16_sharded_crc", "uint16", "30,30", "8,8", "16,16", "zstd-crc32c", []),
            ("u16_tcz_yx", "uint16", "1,2,1,50,70", "1,1,1,16,16", "1,2,1,32,32", "zstd", []),
            ("u16_plain_zstd", "uint16", "37,50", "16,16", None, "zstd", []),
            ("f32_plain_blosc_bit", "float32", "37,50", "16,16", None, "blosc-zstd-bit", []),
            ("i32_plain_crc", "int32", "20,30", "16,16", None, "crc32c", []),
            ("u16_plain_zlib", "uint16", "20,30", "16,16", None, "zlib", []),
            ("u16_sharded_zlib", "uint16", "20,30", "8,8", "16,16", "zlib", []),
        ]
        pairs, expects = [], []
        for name, dtype, shape, chunk, shard, codec, extra in cases:
            path, out = self.p(name), self.p(name + ".bin")
            args = ["--format", "3", "--dtype", dtype, "--shape", shape, "--chunk", chunk, "--codec", codec,
                    "--seed", str(len(pairs) + 11), *extra]
            if shard:
                args += ["--shard", shard]
            tessera_write(path, out, *args)
            expects.append(np.fromfile(out, dtype=np.dtype(dtype)).reshape([int(x) for x in shape.split(",")]))
            pairs.append((path, self.p(name + ".zarrita.bin")))
        for (name, *_), res, expect in zip(cases, zarrita_dump(pairs), expects):
            with self.subTest(name=name):
                self.assertTrue(res["ok"], res.get("error"))
                assert_same(self, res["data"], expect, name)

    def test_empty_inner_chunks_use_sentinel(self):
        path, out = self.p("sentinel"), self.p("sentinel.bin")
        tessera_write(path, out, "--format", "3", "--shape", "64,64", "--chunk", "8,8", "--shard", "64,64",
                      "--codec", "zstd", "--seed", "5")
        shard = read_bytes(os.path.join(path, "c", "0", "0"))
        n = 64
        index = np.frombuffer(shard[-(16 * n + 4):-4], dtype="<u8").reshape(n, 2)
        empty = np.all(index == np.uint64(2**64 - 1), axis=1)
        self.assertTrue(empty.any() and not empty.all(), "expected some empty inner chunks")
        self.assertEqual(crc32c(shard[-(16 * n + 4):-4]).to_bytes(4, "little"), shard[-4:])
        expect = np.fromfile(out, dtype="<u2").reshape(64, 64)
        for k in np.nonzero(empty)[0]:
            y, x = divmod(int(k), 8)
            self.assertTrue((expect[y * 8:(y + 1) * 8, x * 8:(x + 1) * 8] == 0).all())

    def test_tessera_reads_zarrita_fixtures_like_zarrita(self):
        pairs, names = [], []
        for ver in ("v2", "v3"):
            root = os.path.join(TESTDATA, "zarrita_fixtures", "fixtures", ver, "data.zarr")
            for dirpath, dirnames, filenames in os.walk(root):
                meta = ".zarray" if ver == "v2" else "zarr.json"
                if meta not in filenames:
                    continue
                with open(os.path.join(dirpath, meta)) as f:
                    doc = json.load(f)
                if ver == "v3" and doc.get("node_type") != "array":
                    continue
                dirnames[:] = []
                name = f"{ver}/{os.path.relpath(dirpath, root)}"
                names.append(name)
                pairs.append((dirpath, self.p(name.replace("/", "_") + ".zarrita.bin")))
        compared = refused = 0
        for name, (path, _), res in zip(names, pairs, zarrita_dump(pairs)):
            with self.subTest(name=name):
                r = subprocess.run([TOOL, "dump", path, self.p("fx.bin")], capture_output=True, text=True)
                if r.returncode != 0:
                    # Refused: must be an explicit "unsupported" naming the array.
                    self.assertIn("unsupported", r.stderr, r.stderr)
                    self.assertIn(path, r.stderr)
                    refused += 1
                    continue
                self.assertTrue(res["ok"], f"tessera reads {name} but zarrita does not: {res.get('error')}")
                meta = json.loads(r.stdout)
                got = np.fromfile(self.p("fx.bin"), dtype=np.dtype(meta["dtype"])).reshape(meta["shape"])
                assert_same(self, got, res["data"], name)
                compared += 1
        print(f"zarrita fixtures: {compared} arrays equal to zarrita's reading, {refused} refused", file=sys.stderr)
        self.assertGreaterEqual(compared, 50)

    def test_zarrita_writes_tessera_reads(self):
        script = os.path.join(JS, "zarr_write.mjs")
        path = self.p("zw")
        r = subprocess.run(["node", script, path], capture_output=True, text=True, cwd=JS)
        self.assertEqual(r.returncode, 0, r.stderr)
        written = json.loads(r.stdout)
        self.assertGreater(len(written), 0)
        for item in written:
            with self.subTest(name=item["name"]):
                expect = np.array(item["values"], dtype=item["dtype"]).reshape(item["shape"])
                got, _ = tessera_dump(os.path.join(path, item["name"]), self.p(item["name"] + ".bin"))
                assert_same(self, got, expect, item["name"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
