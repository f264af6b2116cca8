"""Bad input is refused with exit 1 and one line naming the well, tile, key
or line at fault (issue 8: each case passed with exit 0 or a misleading
message before). Plates come from `tessera simulate`, shifts files are its
truth edited; every case also checks that no output was left behind.

- shifts file vs plate (fuse): a tile of the plate without origin (a hole
  in the mosaic), a well of the plate missing (silently not fused), a well
  or a tile the plate does not have, a tile_shape of other tiles; --wells
  needs only the wells selected to be consistent
- a plate listing a well whose group is missing on disk (estimate skipped it)
- repeated keys, deep nesting, absurd / non-finite shifts in the shifts file
- `tessera info` on a store whose arrays do not open: exit 1, the error in
  the text and in --json
- data errors are exit 1, not 2 (usage): a tile of 0 rows; a registrar
  that does not fit names the pair of tiles
- fuse refuses a tile whose weights do not fit --memory before allocating
  them (a claimed 20000^2 tile took 1.6 GB at --memory 256M), naming it
"""
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish  # noqa: E402

TMP = tempfile.mkdtemp(prefix="bad_input_", dir=os.environ.get("TESSERA_TEST_TMP"))


def asan_build():
    """The sanitizer build links libasan, which cannot start under an
    address-space cap (its shadow memory alone is terabytes)."""
    p = subprocess.run(["ldd", BIN], capture_output=True, text=True)
    return "libasan" in p.stdout


ASAN = asan_build()


def run(*args, limit_mb=None):
    """Runs tessera; limit_mb caps what it may allocate (the address space,
    or under ASan its allocator's largest allocation, which then returns
    NULL as malloc would)."""
    env = dict(os.environ)
    if limit_mb and ASAN:
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               f":allocator_may_return_null=1:max_allocation_size_mb={limit_mb}").lstrip(":")

    def cap():
        if limit_mb and not ASAN:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, preexec_fn=cap, env=env)


ASAN_NULL = re.compile(r"^==\d+==WARNING: AddressSanitizer failed to allocate ")


def lines(p):
    """tessera's stderr lines (not ASan's note that an allocation over
    max_allocation_size_mb returned NULL)."""
    return [ln for ln in p.stderr.splitlines() if ln.strip() and not ASAN_NULL.match(ln)]


def refused(p, label, *needles, code=1):
    """p failed with exit `code` and one stderr line holding every needle."""
    ok = p.returncode == code and len(lines(p)) == 1 and all(n in p.stderr for n in needles)
    check(ok, f"{label}: exit {p.returncode} (want {code}), stderr {p.stderr.strip()!r}, want {needles}")
    return ok


def edit_shifts(src, dst, fn):
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(fn(text))
    return dst


def set_shape(array_dir, axis, value):
    """Rewrites a v2 array's shape along one axis (metadata only)."""
    p = os.path.join(array_dir, ".zarray")
    with open(p) as f:
        meta = json.load(f)
    meta["shape"][axis] = value
    meta["chunks"][axis] = min(meta["chunks"][axis], max(value, 1))
    with open(p, "w") as f:
        json.dump(meta, f)


def set_tile_shapes(store, wells, sizes):
    """set_shape on the level 0 of every tile of the wells; sizes: axis -> value."""
    for w in wells:
        for pos in os.listdir(os.path.join(store, w)):
            if pos.isdigit():
                for axis, value in sizes.items():
                    set_shape(os.path.join(store, w, pos, "0"), axis, value)


def reshaped_copy(plate, name, sizes, wells=("A/1", "B/2")):
    """A copy of plate in TMP/name whose tiles claim the sizes."""
    dst = os.path.join(TMP, name)
    shutil.copytree(plate, dst)
    set_tile_shapes(dst, wells, sizes)
    return dst


def shifts_vs_plate(plate, truth):
    out = os.path.join(TMP, "o.zarr")

    def fuse(shifts, *more):
        shutil.rmtree(out, ignore_errors=True)
        p = run("fuse", plate, shifts, "-o", out, "--chunk", "16", *more)
        return p

    p = fuse(truth)
    check(p.returncode == 0, f"fuse of the truth: {p.stderr}")

    # (a) a tile of the plate without origin: it was a hole in the mosaic
    s = edit_shifts(truth, os.path.join(TMP, "missing_tile.yaml"),
                    lambda t: re.sub(r"\n  A/1/001001: \[[^\n]*", "", t))
    refused(fuse(s), "tile without origin", "tile A/1/001001 of plate", "has no origin in the shifts file",
            "missing_tile.yaml")
    check(not os.path.exists(out), "tile without origin: output left behind")
    # ... listed in `tiles` but absent everywhere
    s = edit_shifts(truth, os.path.join(TMP, "missing_tile2.yaml"),
                    lambda t: re.sub(r"\n  A/1/001001: \[[^\n]*", "", t).replace(", '001001'", ""))
    refused(fuse(s), "tile not listed", "tile A/1/001001 of plate", "has no origin")
    # three tiles missing: the first named, the count given
    s = edit_shifts(truth, os.path.join(TMP, "missing_3.yaml"),
                    lambda t: re.sub(r"\n  B/2/00[012]001: \[[^\n]*", "", t))
    refused(fuse(s), "three tiles without origin", "tile B/2/000001", "and 2 more of its 6 tiles")
    # --wells: only the wells selected need to be consistent
    p = fuse(s, "--wells", "A/1")
    check(p.returncode == 0, f"--wells A/1 with B/2 incomplete: {p.stderr}")

    # (b) a well of the plate absent from the shifts file: it was not fused
    s = edit_shifts(truth, os.path.join(TMP, "no_well.yaml"), lambda t: re.sub(r"\n  B/2[^\n]*", "", t))
    refused(fuse(s), "well absent", "well B/2 of plate", "is not in the shifts file", "no_well.yaml")
    p = fuse(s, "--wells", "A/1")
    check(p.returncode == 0, f"--wells A/1 with B/2 absent: {p.stderr}")
    refused(fuse(s, "--wells", "B/2"), "--wells B/2 absent", "well B/2 of plate", "is not in the shifts file")

    # (c) a well or a tile of the shifts file that the plate does not have
    s = edit_shifts(truth, os.path.join(TMP, "extra_well.yaml"),
                    lambda t: t.replace("total_translation:\n", "total_translation:\n  C/7/000000: [0, 0]\n"))
    refused(fuse(s), "unknown well", "places well C/7, which plate", "does not list")
    p = fuse(s, "--wells", "A/1,B/2")
    check(p.returncode == 0, f"--wells with an extra shifts well: {p.stderr}")
    s = edit_shifts(truth, os.path.join(TMP, "extra_tile.yaml"),
                    lambda t: t.replace("total_translation:\n", "total_translation:\n  A/1/009009: [5, 5]\n"))
    refused(fuse(s), "unknown tile", "tile A/1/009009 is not a position of plate")
    # listed in `tiles` only (no origin): still a tile of another plate
    s = edit_shifts(truth, os.path.join(TMP, "extra_listed.yaml"),
                    lambda t: t.replace("  A/1: ['000000'", "  A/1: ['009009', '000000'"))
    refused(fuse(s), "unknown listed tile", "tile A/1/009009 is not a position of plate")

    # tile_shape of other tiles (a shifts file of another plate): an error
    s = edit_shifts(truth, os.path.join(TMP, "shape.yaml"),
                    lambda t: t.replace("tile_shape: [40, 48]", "tile_shape: [48, 40]"))
    refused(fuse(s), "tile_shape", "is 40x48 px after orientation", "has tile_shape 48x40")
    check(not os.path.exists(out), "tile_shape: output left behind")

    # (d) repeated keys: the later one won
    s = edit_shifts(truth, os.path.join(TMP, "dup.yaml"),
                    lambda t: t + "total_translation:\n  A/1/000000: [900, 900]\n")
    refused(fuse(s), "second total_translation", "key 'total_translation' is repeated (first at line")
    s = edit_shifts(truth, os.path.join(TMP, "dup_tile.yaml"),
                    lambda t: t.replace("total_translation:\n", "total_translation:\n  A/1/001000: [900, 900]\n"))
    refused(fuse(s), "repeated tile", "key 'A/1/001000' is repeated (first at line 4)")
    p = run("solve", s, "-o", os.path.join(TMP, "solved.yaml"))
    refused(p, "solve: repeated tile", "key 'A/1/001000' is repeated")


def shifts_values(plate, truth):
    # deep nesting: refused at once with the line (it was quadratic)
    deep = os.path.join(TMP, "deep.yaml")
    with open(deep, "w") as f:
        f.write("total_translation: {}\nx: " + "[" * 200000 + "]" * 200000 + "\n")
    p = run("solve", deep, "-o", os.path.join(TMP, "d.yaml"))
    refused(p, "deep nesting", "deep.yaml:2:", "nested more than 32 levels")
    p = run("estimate", plate, "-o", os.path.join(TMP, "e.yaml"), "--overlap", "10", "--guess", deep)
    refused(p, "deep guess", "deep.yaml:2:", "nested more than 32 levels")
    # absurd and non-finite pair shifts, named by pair and line (estimate
    # writes the pairs; the truth has none)
    est = os.path.join(TMP, "est.yaml")
    # (these tiny tiles leave most pairs unmatched: --accept-poor)
    p = run("estimate", plate, "-o", est, "--overlap", "10", "--accept-poor")
    check(p.returncode == 0, f"estimate: {p.stderr}")
    for value, needle in (("1e300", "dy 1e+300 px is absurd"), (".nan", "NaN"), ("-.inf", "infinite")):
        s = edit_shifts(est, os.path.join(TMP, "absurd.yaml"),
                        lambda t: re.sub(r"(pairs:\n  A/1:\n  - \[A/1/\d+, A/1/\d+, )[^,]+", r"\g<1>" + value, t))
        p = run("solve", s, "-o", os.path.join(TMP, "s.yaml"))
        refused(p, f"pair dy {value}", "pairs A/1 [0] (", needle)
        check(re.search(r"absurd\.yaml:\d+:\d+:", p.stderr) is not None, f"pair dy {value}: no line: {p.stderr}")
        check("singular" not in p.stderr, f"pair dy {value}: {p.stderr}")


def missing_well(plate):
    bad = os.path.join(TMP, "holey.zarr")
    shutil.copytree(plate, bad)
    shutil.rmtree(os.path.join(bad, "B", "2"))
    e = os.path.join(TMP, "holey.yaml")
    refused(run("estimate", bad, "-o", e, "--overlap", "10"), "estimate, well missing on disk",
            "well B/2 is listed in plate.wells but has no well group on disk")
    check(not os.path.exists(e), "estimate wrote a shifts file for a plate with a missing well")
    p = run("estimate", bad, "-o", e, "--overlap", "10", "--wells", "A/1", "--accept-poor")
    check(p.returncode == 0, f"estimate --wells A/1 on a plate missing B/2: {p.stderr}")
    refused(run("fuse", bad, e, "-o", os.path.join(TMP, "h.zarr")), "fuse, well missing on disk",
            "well B/2 is listed in plate.wells but has no well group on disk")
    refused(run("info", bad), "info, well missing on disk", "well B/2 is listed in plate.wells")


def info_errors(plate):
    bad = os.path.join(TMP, "noarray.zarr")
    shutil.copytree(plate, bad)
    os.remove(os.path.join(bad, "A", "1", "000000", "0", ".zarray"))
    img = os.path.join(bad, "A", "1", "000000")
    for store, label in ((img, "image"), (bad, "plate")):
        p = run("info", store)
        refused(p, f"info {label} with a missing array", "level 0", "no zarr array", "A/1/000000/0")
        check("level 0: ERROR" in p.stdout, f"info {label}: the description lacks the error: {p.stdout}")
        p = run("info", store, "--json")
        refused(p, f"info --json {label}", "no zarr array")
        try:
            d = json.loads(p.stdout)
            errs = d.get("errors", [])
            check(len(errs) >= 1 and "no zarr array" in errs[0] and "A/1/000000/0" in errs[0],
                  f"info --json {label}: errors {errs}")
        except ValueError as e:
            check(False, f"info --json {label}: not JSON ({e}): {p.stdout!r}")
    p = run("info", plate, "--json")
    check(p.returncode == 0 and json.loads(p.stdout).get("errors") == [], f"info of a good plate: {p.stderr} {p.stdout[:200]}")


def data_errors_exit_1(plate):
    bad = reshaped_copy(plate, "rows0.zarr", {3: 0})
    refused(run("estimate", bad, "-o", os.path.join(TMP, "r.yaml"), "--overlap", "10"), "estimate, 0-row tiles",
            "A/1/000000/0: empty tile (0x48 px)")
    refused(run("stitch", bad, "-o", os.path.join(TMP, "r.zarr"), "--overlap", "10"), "stitch, 0-row tiles",
            "empty tile")
    # tiles claiming 31610880 rows: the registrar of their strips does not
    # fit 4 GiB of address space; the message names the pair and the plate
    # (it was "out of memory for a 31610880x20 registrar")
    tall = reshaped_copy(plate, "tall.zarr", {3: 31610880})
    # (a --cache that holds a pair of them, so that the registrar is what
    # does not fit; at the default --cache the pair is refused first)
    p = run("estimate", tall, "-o", os.path.join(TMP, "t.yaml"), "--overlap", "20", "--threads", "1",
            "--cache", "16G", limit_mb=4096)
    refused(p, "estimate, 31610880-row tiles", "registering tiles A/1/000000 and A/1/001000 (31610880x48 px) of plate",
            "tall.zarr", "registrar")
    p = run("estimate", tall, "-o", os.path.join(TMP, "t.yaml"), "--overlap", "20", "--threads", "1", limit_mb=4096)
    refused(p, "estimate, 31610880-row tiles at the default --cache", "tile A/1/000000 of plate", "31610880x48",
            "beyond --cache 1.0 GiB")


    # a tile side beyond what estimate holds as int: refused naming it (it
    # wrapped: "tile width (-1539607552 px)")
    wide = reshaped_copy(plate, "wide.zarr", {4: 50000000000})
    p = run("estimate", wide, "-o", os.path.join(TMP, "w.yaml"), "--overlap", "10", limit_mb=2048)
    refused(p, "estimate, 5e10-px-wide tiles", "A/1/000000/0", "40x50000000000", "at most 1073741824 px")


def weights_memory(plate, truth):
    # every tile of A/1 claims 20000 x 20000 (metadata only: fuse sizes the
    # weights before reading a pixel)
    big = reshaped_copy(plate, "bigtile.zarr", {3: 20000, 4: 20000}, wells=("A/1",))
    s = edit_shifts(truth, os.path.join(TMP, "big.yaml"),
                    lambda t: t.replace("tile_shape: [40, 48]\n", ""))
    out = os.path.join(TMP, "big_out.zarr")
    # 1 GiB of address space: the weights of one tile (1.6 GB) cannot be
    # allocated; the refusal must come before any attempt
    p = run("fuse", big, s, "-o", out, "--memory", "256M", "--wells", "A/1", limit_mb=1024)
    refused(p, "20000^2 tile at --memory 256M", "tile A/1/000000", "20000x20000", "--memory", "bigtile.zarr")
    check(not os.path.exists(out), "20000^2 tile: output left behind")
    # a bigger budget holds it (the check is not a size limit)
    set_tile_shapes(big, ("A/1",), {3: 60000, 4: 60000})
    p = run("fuse", big, s, "-o", out, "--memory", "2G", "--wells", "A/1", limit_mb=4096)
    refused(p, "60000^2 tile at --memory 2G", "tile A/1/000000", "60000x60000", "--memory")
    # estimate too: a pair of such tiles is held as decoded in its cache,
    # which --cache bounds (it decoded them whatever --cache said)
    e = os.path.join(TMP, "big_est.yaml")
    p = run("estimate", big, "-o", e, "--overlap", "10", "--wells", "A/1", "--cache", "1G", limit_mb=2048)
    refused(p, "60000^2 tiles, estimate --cache 1G", "tile", "A/1/000000", "60000x60000", "--cache 1.0 GiB")
    check(not os.path.exists(e), "estimate on 60000^2 tiles wrote a shifts file")


def main():
    plate = os.path.join(TMP, "p.zarr")
    truth = os.path.join(TMP, "truth.yaml")
    p = run("simulate", "-o", plate, "--grid", "3x2", "--tile", "40x48", "--overlap", "10", "--seed", "2",
            "--format", "0.4", "--wells", "A/1,B/2", "--truth", truth)
    if p.returncode != 0:
        sys.exit(f"FAIL: simulate: {p.stderr}")
    shifts_vs_plate(plate, truth)
    shifts_values(plate, truth)
    missing_well(plate)
    info_errors(plate)
    data_errors_exit_1(plate)
    weights_memory(plate, truth)
    finish()


if __name__ == "__main__":
    main()
