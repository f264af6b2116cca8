"""The Python package end to end (run by tests/interop/test_python.sh with
the package installed by pip). Every figure is checked against something the
package did not compute itself: the simulator's truth file, the `tessera`
program's output on the same inputs, zarr-python's reading of the mosaic.

- estimate returns the shifts; positions within 0.5 px of the truth;
  the same shifts file as `tessera estimate` with the same options;
- the progress callable sees each stage count up to its total; an exception
  it raises reaches the caller;
- fuse from the returned dict writes the mosaic `tessera fuse` writes from
  the CLI's shifts file (same array values), read with zarr-python;
- read_shifts/write_shifts round-trip a file; a positions-only dict gets the
  solve's integer origins; a bad dict is refused naming the key;
- solve with other options gives `tessera solve`'s file;
- errors: a missing plate raises TesseraError with the library's message
  and status; an unknown keyword is a TypeError, a bad value a ValueError.
- the library options added after the binding, each against the CLI's
  flag: estimate positions= (a TileConfiguration, "metadata"),
  no_stage_model, solve loop_check and cost_tolerance, codec "NAME:LEVEL",
  import_tiles (pattern, order, first_index, grid, scale, codec) equal to
  `tessera import` file for file; rot90 beyond -3..3 a ValueError (it was
  cut to 32 bits: 2**32 + 1 ran as 1); a message with bytes that are not
  UTF-8 still a TesseraError; a fractional overlap a TypeError (it was cut).
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import zarr

import tessera

BIN = os.environ["TESSERA_BIN"]
TMP = tempfile.mkdtemp(prefix="pyapi_", dir=os.environ.get("TESSERA_TEST_TMP"))
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def path(name):
    return os.path.join(TMP, name)


def cli(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"tessera {' '.join(args)} failed: {p.stderr}")
    return p


def rel(positions, well):
    """Positions of a well relative to their mean (the solve's frame is
    free up to a translation)."""
    keys = sorted(k for k in positions if k.startswith(well + "/"))
    a = np.array([positions[k] for k in keys], dtype=float)
    return keys, a - a.mean(axis=0)


# --- a plate with known positions
plate = path("plate.zarr")
tessera.simulate(plate, grid_cols=4, grid_rows=3, tile_h=160, tile_w=192, overlap=32, jitter=4, seed=3,
                 truth=path("truth.yaml"), wells="A/1,B/2")
truth = tessera.read_shifts(path("truth.yaml"))

# --- estimate, with a progress callable
calls = []
shifts, summary = tessera.estimate(plate, 32, summary=True, threads=2,
                                   progress=lambda stage, done, total: calls.append((stage, done, total)))
check(summary["verdict"] == "ok" and summary["tiles"] == 24, f"estimate summary: {summary}")
check(calls and all(0 <= d <= t for _, d, t in calls), f"progress calls out of range: {calls[:5]}")
check(any(d == t for _, d, t in calls), "progress never reached its total")
for well in ("A/1", "B/2"):
    k1, est = rel(shifts["positions"], well)
    k2, tru = rel(truth["positions"] if "positions" in truth else truth["total_translation"], well)
    check(k1 == k2, f"{well}: estimate and truth list other tiles")
    err = np.abs(est - tru).max()
    print(f"{well}: max position error {err:.3f} px")
    check(err < 0.5, f"{well}: a tile is {err:.2f} px from the truth")

# The same as the program with the same options.
cli("estimate", plate, "-o", path("cli.yaml"), "--overlap", "32", "--threads", "2", "--quiet")
tessera.estimate(plate, (32, 32), output=path("py.yaml"), threads=2)
cj = json.loads(cli("estimate", plate, "-o", path("cli_j.yaml"), "--overlap", "32", "--threads", "2", "--quiet",
                    "--json").stdout)
for key in ("reregistered_pairs", "rematched_pairs", "loop_downweighted_pairs", "stage_downweighted_pairs",
            "disputed_pairs", "unmatched_pairs", "pairs", "content_reads"):
    check(summary.get(key) == cj.get(key), f"estimate summary {key}: {summary.get(key)} vs the CLI's {cj.get(key)}")
check(open(path("cli.yaml")).read() == open(path("py.yaml")).read(),
      "estimate(output=) and `tessera estimate` wrote different shifts files")
check(tessera.read_shifts(path("py.yaml")) == shifts, "estimate's returned shifts differ from its file")


def boom(stage, done, total):
    raise RuntimeError("stop here")


try:
    tessera.estimate(plate, 32, progress=boom)
    check(False, "an exception raised by the progress callable was swallowed")
except RuntimeError as e:
    check(str(e) == "stop here", f"progress exception changed: {e!r}")

# --- fuse from the dict == fuse of the CLI's file
summary = tessera.fuse(plate, shifts, path("py_mosaic.zarr"), format="0.4", levels=1, codec="blosc-lz4")
cli("fuse", plate, path("cli.yaml"), "-o", path("cli_mosaic.zarr"), "--format", "0.4", "--levels", "1",
    "--codec", "blosc-lz4")
check(summary["wells"] == 2 and summary["tiles"] == 24, f"fuse summary: {summary}")
for well in ("A/1", "B/2"):
    for level in ("0", "1"):
        a = zarr.open(path("py_mosaic.zarr"), mode="r")[f"{well}/0/{level}"][...]
        b = zarr.open(path("cli_mosaic.zarr"), mode="r")[f"{well}/0/{level}"][...]
        check(a.shape == b.shape and np.array_equal(a, b), f"{well} level {level}: fuse() differs from the CLI")
        if level == "0" and well == "B/2":
            check(tuple(summary["canvas"]) == a.shape[-2:], f"canvas {summary['canvas']} vs array {a.shape}")
# device="auto": the same store on whichever device ran (docs/gpu.md); "cpu" without a GPU
auto = tessera.fuse(plate, shifts, path("py_auto.zarr"), format="0.4", levels=1, codec="blosc-lz4", device="auto")
check(summary["device"] == "cpu" and auto["device"] in ("cpu", "gpu"), f"fuse devices: {summary}, {auto}")
for well in ("A/1", "B/2"):
    for level in ("0", "1"):
        a = zarr.open(path("py_auto.zarr"), mode="r")[f"{well}/0/{level}"][...]
        b = zarr.open(path("py_mosaic.zarr"), mode="r")[f"{well}/0/{level}"][...]
        check(np.array_equal(a, b), f"{well} level {level}: device='auto' differs from the CPU")
try:
    tessera.fuse(plate, shifts, path("x.zarr"), device="tpu")
    check(False, "device='tpu' was accepted")
except ValueError as e:
    check("device" in str(e), f"bad device message: {e}")
# blend="label": label images, as `tessera fuse --blend label` fuses them (dtype kept)
tessera.fuse(plate, shifts, path("py_labels.zarr"), format="0.4", blend="label", wells="A/1")
cli("fuse", plate, path("py.yaml"), "-o", path("cli_labels.zarr"), "--format", "0.4", "--blend", "label",
    "--wells", "A/1")
a = zarr.open(path("py_labels.zarr"), mode="r")["A/1/0/0"][...]
b = zarr.open(path("cli_labels.zarr"), mode="r")["A/1/0/0"][...]
check(a.dtype == np.uint16 and np.array_equal(a, b), "fuse(blend='label') differs from the CLI's --blend label")
info = tessera.info(path("py_mosaic.zarr"))
check(info.get("kind") and "A/1" in str(info.get("wells")), f"info of the mosaic: {info}")

# --- shifts round trip, positions-only dicts, refusals
tessera.write_shifts(path("round.yaml"), shifts)
check(tessera.read_shifts(path("round.yaml")) == shifts, "read_shifts(write_shifts(s)) != s")
only = {"positions": {"A/1/000000": [10.25, 5.5], "A/1/001000": [12.75, 170.0]}}
tessera.write_shifts(path("only.yaml"), only)
back = tessera.read_shifts(path("only.yaml"))
check(back["total_translation"] == {"A/1/000000": [0, 0], "A/1/001000": [3, 165]},
      f"integer origins of a positions-only dict: {back['total_translation']}")
for bad, key in (({"positions": {"A/1/000000": [float("nan"), 0]}}, "A/1/000000"),
                 ({"total_translation": {"A/1/000000": [0, 0]}, "colour": 1}, "colour"),
                 ({"total_translation": {"A/1/000000": [0, 0], "A/1/001000": [0, 90]},
                   "pairs": {"A/1": [["A/1/000000", "A/1/001000", 0, 90, 2.0]]}}, "confidence")):
    try:
        tessera.write_shifts(path("bad.yaml"), bad)
        check(False, f"write_shifts accepted {bad}")
    except (tessera.TesseraError, ValueError) as e:
        check(key in str(e) and "bad.yaml" in str(e), f"refusal does not name {key} and the file: {e}")
check(not os.path.exists(path("bad.yaml")), "a refused write_shifts left a file")

# --- solve with other options == tessera solve
re = tessera.solve(path("py.yaml"), solver="l2", edge_weights="none")
cli("solve", path("cli.yaml"), "-o", path("cli_l2.yaml"), "--solver", "l2", "--edge-weights", "none")
check(re == tessera.read_shifts(path("cli_l2.yaml")), "solve() differs from `tessera solve`")
names, arr = tessera.positions_array(shifts, "A/1")
check(arr.shape == (12, 2) and names == shifts["tiles"]["A/1"], f"positions_array: {arr.shape}")

# --- t_out into an existing mosaic: a layout keyword that differs from it is
# refused (it was ignored); its own values, given, are taken
tessera.fuse(plate, shifts, path("py_mosaic.zarr"), t_out=0, wells="A/1", format="0.4", levels=1, codec="blosc-lz4")
try:
    tessera.fuse(plate, shifts, path("py_mosaic.zarr"), t_out=0, wells="A/1", chunk=256)
    check(False, "t_out with another chunk than the existing mosaic's was accepted")
except tessera.TesseraError as e:
    check("--chunk 256" in str(e) and e.status == "arg", f"t_out chunk mismatch: {e.status}: {e}")
# shard=0 and levels=-1 (the defaults, automatic) choose nothing: taken, as
# the keywords left out (they were refused as differing from the mosaic's)
tessera.fuse(plate, shifts, path("py_mosaic5.zarr"), t_out=0, wells="A/1", shard=3)
for auto in ({"shard": 0}, {"levels": -1}):
    try:
        tessera.fuse(plate, shifts, path("py_mosaic5.zarr"), t_out=0, wells="A/1", **auto)
    except tessera.TesseraError as e:
        check(False, f"t_out with {auto} (automatic) was refused: {e}")

# --- errors
try:
    tessera.estimate(path("nope.zarr"), 32)
    check(False, "a missing plate did not raise")
except tessera.TesseraError as e:
    check("nope.zarr" in str(e) and e.status in ("io", "format"), f"missing plate: {e.status}: {e}")
try:
    tessera.fuse(plate, shifts, path("x.zarr"), blending="edt")
    check(False, "an unknown keyword was accepted")
except TypeError as e:
    check("blending" in str(e), f"unknown keyword message: {e}")
try:
    tessera.fuse(plate, shifts, path("x.zarr"), codec="lzma")
    check(False, "a bad codec was accepted")
except ValueError as e:
    check("codec" in str(e), f"bad codec message: {e}")
try:
    tessera.estimate(plate, 0)
    check(False, "overlap 0 was accepted")
except tessera.TesseraError as e:
    check(e.status == "arg" and "overlap" in str(e), f"overlap 0: {e.status}: {e}")
check(not os.path.exists(path("x.zarr")), "a refused fuse left an output")



def attempt(what, fn):
    """Runs fn, recording an exception as a failure of `what` (so that one
    missing option does not hide the checks after it)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        check(False, f"{what}: {type(e).__name__}: {e}")
        return None


def same_file(a, b, what):
    check(os.path.exists(a) and os.path.exists(b) and open(a, "rb").read() == open(b, "rb").read(),
          f"{what}: the binding's file {a} differs from the CLI's {b}")


def tree(root):
    """Every file under root: relative path -> bytes."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(d, f), "rb") as fh:
                out[os.path.relpath(os.path.join(d, f), root)] = fh.read()
    return out


# --- estimate positions=: a Fiji TileConfiguration of the truth's origins (by name), as --positions FILE
tc = path("TileConfiguration.txt")
with open(tc, "w") as f:
    f.write("# Define the number of dimensions we are working on\ndim = 2\n")
    tt = truth["total_translation"]
    for name in truth["tiles"]["A/1"]:
        y, x = tt["A/1/" + name]
        f.write(f"{name}.tif; ; ({x + 0.5}, {y - 0.25})\n")
attempt("estimate(positions=FILE)",
        lambda: tessera.estimate(plate, 32, wells="A/1", threads=2, positions=tc, output=path("py_tc.yaml")))
cli("estimate", plate, "-o", path("cli_tc.yaml"), "--overlap", "32", "--wells", "A/1", "--threads", "2",
    "--positions", tc, "--quiet")
same_file(path("py_tc.yaml"), path("cli_tc.yaml"), "estimate(positions=FILE)")
# the simulated plate has no NGFF translations: "metadata" is refused naming the tile
try:
    tessera.estimate(plate, 32, positions="metadata")
    check(False, "estimate(positions='metadata') on a plate without translations ran")
except tessera.TesseraError as e:
    check(e.status == "format" and "A/1/000000" in str(e) and "translation" in str(e),
          f"positions='metadata': {e.status}: {e}")
except Exception as e:  # noqa: BLE001
    check(False, f"positions='metadata': {type(e).__name__}: {e}")
# a TileConfiguration line with Latin-1 bytes: its message is still a TesseraError
bad_tc = path("bad_tc.txt")
with open(bad_tc, "wb") as f:
    f.write(b"dim = 2\n" + b"a" * 59 + "\u00e9".encode() + b" (1, 2)\n\xe9t\xe9\n")
try:
    tessera.estimate(plate, 32, positions=bad_tc)
    check(False, "a malformed TileConfiguration was accepted")
except tessera.TesseraError as e:
    check(e.status == "format" and "bad_tc.txt:2" in str(e), f"malformed TileConfiguration: {e.status}: {e}")
except Exception as e:  # noqa: BLE001
    check(False, f"malformed TileConfiguration: {type(e).__name__}: {e}")

# --- no_stage_model, loop_check, cost_tolerance: the CLI's flags
attempt("estimate(no_stage_model=True)",
        lambda: tessera.estimate(plate, 32, threads=2, no_stage_model=True, output=path("py_nsm.yaml")))
cli("estimate", plate, "-o", path("cli_nsm.yaml"), "--overlap", "32", "--threads", "2", "--no-stage-model", "--quiet")
same_file(path("py_nsm.yaml"), path("cli_nsm.yaml"), "estimate(no_stage_model=True)")
attempt("solve(loop_check=False, cost_tolerance=0)",
        lambda: tessera.solve(path("cli.yaml"), path("py_lc.yaml"), loop_check=False, cost_tolerance=0))
cli("solve", path("cli.yaml"), "-o", path("cli_lc.yaml"), "--loop-check", "off", "--cost-tolerance", "0")
same_file(path("py_lc.yaml"), path("cli_lc.yaml"), "solve(loop_check=False, cost_tolerance=0)")

# --- codec with a level, as --codec NAME:LEVEL
attempt("fuse(codec='blosc-zstd:3')",
        lambda: tessera.fuse(plate, path("cli.yaml"), path("py_lvl.zarr"), format="0.4", levels=0, wells="A/1",
                             codec="blosc-zstd:3"))
cli("fuse", plate, path("cli.yaml"), "-o", path("cli_lvl.zarr"), "--format", "0.4", "--levels", "0", "--wells", "A/1",
    "--codec", "blosc-zstd:3")
zarray = os.path.join("A", "1", "0", "0", ".zarray")
check(tree(path("py_lvl.zarr")) == tree(path("cli_lvl.zarr")) and b'"clevel": 3' in
      tree(path("cli_lvl.zarr")).get(zarray, b"").replace(b'"clevel":3', b'"clevel": 3'),
      "fuse(codec='blosc-zstd:3') wrote another store than --codec blosc-zstd:3")
try:
    tessera.fuse(plate, shifts, path("x.zarr"), codec="zstd:23")
    check(False, "codec level 23 was accepted")
except ValueError as e:
    check("23" in str(e), f"bad codec level message: {e}")

# --- rot90 is a quarter-turn count, not its low 32 bits
try:
    tessera.fuse(plate, shifts, path("x.zarr"), rot90=2**32 + 1)
    check(False, "rot90=2**32+1 was accepted")
except ValueError as e:
    check("rot90" in str(e), f"rot90 message: {e}")
except Exception as e:  # noqa: BLE001
    check(False, f"rot90=2**32+1: {type(e).__name__}: {e}")
check(not os.path.exists(path("x.zarr")), "a refused fuse left an output")

# --- import_tiles == tessera import (a serpentine {index} scan, counted from 1)
import tifffile  # noqa: E402
tiles = path("tiles")
os.makedirs(tiles)
rng = np.random.default_rng(5)
for i in range(1, 7):
    tifffile.imwrite(os.path.join(tiles, f"t{i}.tif"), rng.integers(0, 4000, (24, 32), dtype=np.uint16))
imp = attempt("import_tiles", lambda: tessera.import_tiles(
    tiles, path("py_import.zarr"), pattern="t{index}.tif", grid_cols=3, grid_rows=2, order="snake-row",
    first_index=1, scale=(0.5, 0.25), codec="zstd:5", format="0.4"))
cli("import", tiles, "-o", path("cli_import.zarr"), "--pattern", "t{index}.tif", "--grid", "3x2", "--order",
    "snake-row", "--first-index", "1", "--scale", "0.5,0.25", "--codec", "zstd:5", "--format", "0.4", "--quiet")
check(imp is not None and imp["positions"] == 6 and tuple(imp["grid"]) == (3, 2) and tuple(imp["tile"]) == (24, 32)
      and tuple(imp["pixel_size"]) == (0.5, 0.25) and imp["pixel_size_from"] == "option",
      f"import_tiles summary: {imp}")
check(tree(path("py_import.zarr")) == tree(path("cli_import.zarr")), "import_tiles wrote another store than the CLI")
# t4.tif starts the second row, run back: its pixels are the last cell's (column 2, row 1: position 002001)
a = zarr.open(path("py_import.zarr"), mode="r")
t4 = tifffile.imread(os.path.join(tiles, "t4.tif"))
check(os.path.exists(path("py_import.zarr")) and np.array_equal(a["A/1/002001/0"][...].reshape(t4.shape), t4),
      "import_tiles(order='snake-row') put t4.tif elsewhere than column 2, row 1")

# --- an overlap is whole px: 32.7 was cut to 32 without a word
try:
    tessera.estimate(plate, 32.7, output=path("frac.yaml"))
    check(False, "overlap 32.7 was accepted")
except TypeError as e:
    check("float" in str(e), f"overlap 32.7: {e}")
check(not os.path.exists(path("frac.yaml")), "a refused estimate wrote its shifts")

if failures:
    print(f"{len(failures)} failure(s):\n  " + "\n  ".join(failures))
    sys.exit(1)
print("ok")
