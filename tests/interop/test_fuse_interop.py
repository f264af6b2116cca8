"""tessera fuse against an independent NumPy/SciPy reference of the same
formula (fuse_reference.py), on small plates written with zarr-python; the
outputs are read back with zarr-python (0.4) and zarrita (0.5), and their
metadata validated against the OME-NGFF schemas."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fuse_reference as R  # noqa: E402
from interop_checks import tree_digest  # noqa: E402

BIN = os.environ.get("TESSERA_BIN", "tessera")
TMP = tempfile.mkdtemp(prefix="fuse_interop_", dir=os.environ.get("TESSERA_TEST_TMP"))
FAILS = []


def run(*args, expect=0):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    if p.returncode != expect:
        raise AssertionError("tessera %s: exit %d (want %d)\n%s%s" % (
            " ".join(map(str, args)), p.returncode, expect, p.stdout, p.stderr))
    return p


def case(fn):
    try:
        fn()
        print("ok   ", fn.__name__)
    except Exception as e:  # report every case, fail at the end
        import traceback
        traceback.print_exc()
        print("FAIL ", fn.__name__, e)
        FAILS.append(fn.__name__)
    return fn


def compare_u16(got, ref, what):
    assert got.shape == ref.shape, "%s: shape %s != reference %s" % (what, got.shape, ref.shape)
    d = np.abs(got.astype(np.int64) - ref.astype(np.int64))
    assert d.max() <= 1, "%s: max |diff| %d grey levels at %s" % (what, d.max(), np.unravel_index(d.argmax(), d.shape))
    assert ((got == 0) == (ref == 0)).all(), "%s: uncovered pixels differ" % what


def compare_f32(got, ref, what):
    assert got.shape == ref.shape, "%s: shape %s != reference %s" % (what, got.shape, ref.shape)
    err = np.abs(got.astype(np.float64) - ref)
    tol = 1e-5 * np.abs(ref)
    assert (err <= tol).all(), "%s: max relative error %.3g" % (what, (err / np.maximum(np.abs(ref), 1e-30)).max())


def fresh(name):
    d = os.path.join(TMP, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


@case
def edt_formula_matches_scipy():
    for h, w in [(1, 1), (2, 5), (7, 7), (48, 64), (33, 20)]:
        y, x = np.mgrid[0:h, 0:w]
        d = np.minimum(np.minimum(y, x), np.minimum(h - 1 - y, w - 1 - x))
        assert np.array_equal(R.edt_distance(h, w), d), (h, w)


@case
def square_tiles_04_zarr_python():
    d = fresh("square")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(40, 40), grid=(3, 3))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    out = os.path.join(d, "o.zarr")
    p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--format", "0.4",
            "--chunk", "16", "--shard", "2", "--codec", "blosc-lz4", "--threads", "2", "--levels", "1", "--json")
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins)
    got = R.read_output(out, "A/1")
    compare_u16(got, ref, "square 0.4")
    assert np.array_equal(R.read_output(out, "A/1", 1), R.downsample(got)), "0.4 level 1"
    R.validate_ngff(out, ["A/1"], "0.4")
    # each tile is read once per band it overlaps, no more
    import json as _json
    summary = _json.loads(p.stdout)
    block = summary["chunk"] * summary["shard"]
    oy0 = min(o[0] for o in origins)
    want = sum(((oy - oy0) + 40 - 1) // block - (oy - oy0) // block + 1 for oy, _ in origins)
    assert summary["strips_read"] == want, (summary["strips_read"], want)


@case
def nonsquare_rot90_multichannel_05_zarrita_pyramid():
    d = fresh("rot")
    orient = (False, True, 1)
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(36, 52), grid=(3, 2),
                         tcz=(2, 2, 2), orientation=orient, overlap=(9, 11))
    # orientation recorded in the shifts file; no flags on the command line
    R.write_shifts(os.path.join(d, "s.yaml"), info, orientation=orient)
    out = os.path.join(d, "o.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out,
        "--chunk", "8", "--shard", "4", "--levels", "2", "--threads", "2")
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins, orientation=orient)
    got = R.read_output(out, "A/1", 0)
    compare_u16(got, ref, "rot90 level 0")
    prev_got, prev_ref = got, ref
    for k in (1, 2):
        lk = R.read_output(out, "A/1", k)
        assert np.array_equal(lk, R.downsample(prev_got)), "level %d is not the 2x mean of level %d" % (k, k - 1)
        prev_ref = R.downsample(prev_ref)
        compare_u16(lk, prev_ref, "level %d" % k)
        prev_got = lk
    R.validate_ngff(out, ["A/1"], "0.5")
    # channel names and scale carried over from the first position
    attrs = R._attrs(os.path.join(out, "A/1/0"))["ome"]
    labels = [c["label"] for c in attrs["omero"]["channels"]]
    assert labels == ["ch0-A1", "ch1-A1"], labels
    scale = attrs["multiscales"][0]["datasets"][1]["coordinateTransformations"][0]["scale"]
    assert np.allclose(scale, [1, 1, 2, 1.3, 1.3]), scale


@case
def flips_given_as_flags():
    d = fresh("flip")
    orient = (True, True, 3)
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(30, 44), grid=(2, 3),
                         orientation=orient)
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    out = os.path.join(d, "o.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--format", "0.4",
        "--flipud", "--fliplr", "--rot90", "3", "--chunk", "16")
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins, orientation=orient)
    compare_u16(R.read_output(out, "A/1"), ref, "flipud+fliplr+rot90=3")


@case
def float32_edt_exponent_and_average():
    d = fresh("f32")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 40), grid=(3, 2), tcz=(1, 2, 1))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    raws, origins, _ = info["A/1"]
    for fmt in ("0.4", "0.5"):
        for blend, e in (("edt", 2.0), ("edt", 0.5), ("average", 1.0)):
            out = os.path.join(d, "o_%s_%s_%g.zarr" % (fmt, blend, e))
            run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--format", fmt,
                "--dtype", "float32", "--blend", blend, "--exponent", e, "--chunk", "16", "--codec", "gzip")
            f, _ = R.fuse(raws, origins, blend=blend, exponent=e, dtype="float32")
            compare_f32(R.read_output(out, "A/1"), f, "float32 %s %s^%g" % (fmt, blend, e))


@case
def exponents_beyond_float32_are_refused():
    """Weights are float32: (d + 1e-6)^E must keep the outer ring a normal
    float (its pixels count where no other tile covers) and the centre far
    from overflow. E = 6 still matches the float64 reference; E = 6.5 made
    the ring weight denormal and its pixels ~10x too dark, E = 12 made
    centre sums infinite; both are now refused with a message."""
    d = fresh("exponent")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 40), grid=(2, 2))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    raws, origins, _ = info["A/1"]
    out = os.path.join(d, "o6.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--format", "0.4",
        "--dtype", "float32", "--exponent", 6, "--chunk", "16")
    f, _ = R.fuse(raws, origins, exponent=6.0, dtype="float32")
    compare_f32(R.read_output(out, "A/1"), f, "float32 edt^6")
    for e in (6.5, 12):
        p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", os.path.join(d, "o.zarr"),
                "--exponent", e, "--chunk", "16", expect=2)
        assert "exponent" in p.stderr and "float32" in p.stderr, p.stderr


@case
def several_wells_and_filter():
    d = fresh("wells")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1", "B/2"], tile_hw=(32, 32), grid=(2, 2))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    out = os.path.join(d, "all.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--chunk", "16")
    refs = {w: R.fuse(info[w][0], info[w][1])[1] for w in ("A/1", "B/2")}
    # Every well has the plate's largest canvas (docs/fuse.md, "Viewer-ready
    # plates"): the reference in the top left, the rest the fill value.
    plate_hw = tuple(max(r.shape[k] for r in refs.values()) for k in (3, 4))
    assert len({r.shape for r in refs.values()}) > 1, "the wells' canvases do not differ: padding is untested"
    for w, ref in refs.items():
        got = R.read_output(out, w)
        h, ww = ref.shape[3:]
        assert got.shape[3:] == plate_hw, "well %s: canvas %s, not the plate's %s" % (w, got.shape[3:], plate_hw)
        compare_u16(got[..., :h, :ww], ref, "well " + w)
        assert not got[..., h:, :].any() and not got[..., :, ww:].any(), "well %s: padding is not 0" % w
    R.validate_ngff(out, ["A/1", "B/2"], "0.5")
    out2 = os.path.join(d, "b2.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out2, "--wells", "B/2",
        "--chunk", "16")
    assert not os.path.exists(os.path.join(out2, "A/1")), "--wells B/2 wrote A/1"
    h, ww = refs["B/2"].shape[3:]
    assert np.array_equal(R.read_output(out2, "B/2"), R.read_output(out, "B/2")[..., :h, :ww])


@case
def identical_bytes_threads_1_vs_2():
    d = fresh("threads")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(40, 48), grid=(4, 3), tcz=(1, 2, 1))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    # Given shards, and the automatic layout (which once depended on the
    # thread count: 0.5 shards of another size with other --threads).
    for fmt, layout in (("0.4", ["--shard", "2"]), ("0.5", ["--shard", "2"]), ("0.4", []), ("0.5", [])):
        outs = []
        for th in (1, 2, 5):
            o = os.path.join(d, "o%s_%s_%d.zarr" % (fmt, "auto" if not layout else "s2", th))
            run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", o, "--format", fmt,
                "--chunk", "8", *layout, "--levels", "1", "--threads", th, "--memory", "16M")
            outs.append(o)
        first = tree_digest(outs[0])
        for other in outs[1:]:
            got = tree_digest(other)
            assert got == first, "%s and %s differ: %s" % (outs[0], other, sorted(set(got.items()) ^ set(first.items()))[:5])
    # a re-run into the same output with another chunking leaves no stale files
    o = os.path.join(d, "rerun.zarr")
    for chunk in ("8", "16"):
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", o, "--chunk", chunk, "--format", "0.4")
    fresh_o = os.path.join(d, "fresh.zarr")
    run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", fresh_o, "--chunk", "16", "--format", "0.4")
    assert tree_digest(o) == tree_digest(fresh_o), "a re-run differs from a fresh run (stale files?)"


@case
def tcz_policy_min_and_max():
    d = fresh("tcz")
    # tile 0 has 1 channel and 1 timepoint, the others 2 of each
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 32), grid=(2, 2), tcz=(2, 2, 1),
                         per_tile_tcz={0: (1, 1, 1)})
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    raws, origins, _ = info["A/1"]
    for pol in ("min", "max"):
        out = os.path.join(d, "o_%s.zarr" % pol)
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--tcz", pol,
            "--chunk", "16", "--format", "0.4")
        _, ref = R.fuse(raws, origins, tcz=pol)
        got = R.read_output(out, "A/1")
        assert got.shape[:3] == ((1, 1, 1) if pol == "min" else (2, 2, 1)), got.shape
        compare_u16(got, ref, "tcz " + pol)


def t_out_refuses_a_chosen_layout(d, store, fmt):
    """--t-out into an existing mosaic (chunk 16, 1 level, the default
    codec) writes in its layout: a flag that chooses another layout, codec
    or format is refused, naming both values, and the store is left as it
    was (each was ignored, exit 0: the run came out in the store's layout,
    not the one asked for). The same values given explicitly are taken."""
    p, s = os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml")
    before = tree_digest(store)
    other = "0.5" if fmt == "0.4" else "0.4"
    layout = ["--chunk", "16", "--format", fmt]
    for flags, words in ((["--chunk", "8", "--format", fmt], ["--chunk 8", "16 px"]),
                         (layout + ["--levels", "2"], ["--levels 2", "1 extra level"]),
                         (layout + ["--codec", "zstd:3"], ["zstd:3", "blosc-zstd:3"]),
                         (layout + ["--codec", "blosc-zstd:5"], ["blosc-zstd:5", "blosc-zstd:3"]),
                         (["--chunk", "16", "--format", other], ["--format " + other, "OME-Zarr " + fmt])):
        r = run("fuse", p, s, "-o", store, "--t-out", 0, *flags, expect=2)
        for w in words:
            assert w in r.stderr, (flags, w, r.stderr)
        assert tree_digest(store) == before, "a refused --t-out run changed the store (%s)" % flags
    if fmt == "0.5":
        r = run("fuse", p, s, "-o", store, "--t-out", 0, "--chunk", "16", "--shard", "7", expect=2)
        assert "--shard 7" in r.stderr, r.stderr
        assert tree_digest(store) == before
    # The store's own values, chosen explicitly: taken.
    run("fuse", p, s, "-o", store, "--t-out", 0, "--chunk", "16", "--levels", 1, "--codec", "blosc-zstd:3",
        "--format", fmt)
    # --shard 0 is the automatic choice, as the flag left out: taken (a
    # re-run repeating the first run's --shard 0 was refused on 0.5).
    run("fuse", p, s, "-o", store, "--t-out", 0, "--chunk", "16", "--shard", 0, "--format", fmt)


@case
def t_out_into_existing_output():
    d = fresh("tout")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 32), grid=(2, 2))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins)
    for fmt in ("0.4", "0.5"):
        out = os.path.join(d, "o%s.zarr" % fmt)
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--t-out", 2,
            "--chunk", "16", "--format", fmt)
        got = R.read_output(out, "A/1")
        assert got.shape[0] == 3, got.shape
        compare_u16(got[2:3], ref, "t_out 2")
        assert not got[:2].any(), "T 0 and 1 should be empty"
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--t-out", 0,
            "--chunk", "16", "--format", fmt)
        got = R.read_output(out, "A/1")
        compare_u16(got[0:1], ref, "t_out 0")
        assert np.array_equal(got[0], got[2]) and not got[1].any()
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--t-out", 5,
            "--chunk", "16", "--format", fmt, expect=2)
        # An existing pyramid is updated whole: a run without --levels used
        # to leave level 1 of T 0 empty (stale); one with more levels added
        # a level holding only its timepoint, and is now refused.
        pyr = os.path.join(d, "pyr%s.zarr" % fmt)
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", pyr, "--t-out", 1,
            "--chunk", "16", "--levels", 1, "--format", fmt)
        run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", pyr, "--t-out", 0,
            "--chunk", "16", "--format", fmt)
        lv1 = R.read_output(pyr, "A/1", level=1)
        assert lv1[1].any() and np.array_equal(lv1[0], lv1[1]), "level 1 of T 0 not written by --t-out 0"
        t_out_refuses_a_chosen_layout(d, pyr, fmt)
        assert not os.path.exists(os.path.join(pyr, "A", "1", "0", "2")), "--t-out added a pyramid level"


@case
def t_out_04_takes_the_given_shard():
    """A 0.4 mosaic records no block, only each level's chunks (gcd(chunk,
    block >> k)): a --t-out run given the first run's --shard writes in
    that block. It derived its block from the canvas instead, so a mosaic
    made with --chunk 16 --shard 1 --levels 2 (level chunks 16, 8, 4 px)
    was refused whatever the flags (exit 2: 'existing array does not
    match'), the same flags repeated included."""
    d = fresh("tout04")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 32), grid=(2, 2))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    p, s, out = os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), os.path.join(d, "o.zarr")
    flags = ["--chunk", "16", "--shard", "1", "--levels", "2", "--format", "0.4"]
    run("fuse", p, s, "-o", out, "--t-out", 1, *flags)
    run("fuse", p, s, "-o", out, "--t-out", 0, *flags)
    for level in range(3):
        got = R.read_output(out, "A/1", level=level)
        assert got[1].any() and np.array_equal(got[0], got[1]), "level %d of T 0 not written" % level
    # Without --shard its block is still derived from the canvas, and the
    # lower levels' chunks differ: refused while the arrays are checked,
    # before any write, and the message says the image is as it was (it
    # said timepoint 0 'may be partly overwritten').
    before = tree_digest(out)
    r = run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", "--levels", "2", "--format", "0.4", expect=2)
    assert "left as it was" in r.stderr and "partly overwritten" not in r.stderr, r.stderr
    assert tree_digest(out) == before, "a refused --t-out run changed the store"


@case
def t_in_picks_the_input_timepoint():
    """--t-in T with --t-out: that input timepoint is written (the default is
    timepoint 0); beyond the tiles' timepoints, or without --t-out, refused."""
    d = fresh("tin")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 32), grid=(2, 2), tcz=(3, 1, 1))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins)
    assert ref.shape[0] == 3 and not np.array_equal(ref[1], ref[2])
    out = os.path.join(d, "o.zarr")
    args = [os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--chunk", "16", "--format", "0.4"]
    run("fuse", *args, "--t-out", 1)
    run("fuse", *args, "--t-out", 0, "--t-in", 2)
    got = R.read_output(out, "A/1")
    assert got.shape[0] == 2, got.shape
    compare_u16(got[0:1], ref[2:3], "t_in 2 -> t_out 0")
    compare_u16(got[1:2], ref[0:1], "default t_in 0 -> t_out 1")
    run("fuse", *args, "--t-out", 0, "--t-in", 3, expect=2)
    run("fuse", *args, "--t-in", 1, expect=2)


@case
def t_out_mismatch_in_second_well_writes_nothing():
    """--t-out into an output whose second well has another dtype: refused
    before the first well is written (it used to be written, then B/1 failed)."""
    d = fresh("tout_mismatch")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1", "B/1"], tile_hw=(16, 16), grid=(2, 1))
    p, s = os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml")
    R.write_shifts(s, info)
    out = os.path.join(d, "o.zarr")
    run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", "--wells", "B/1", "--dtype", "float32")
    r = run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", expect=2)
    assert "B/1" in r.stderr and "float32" in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(out, "A")), "well A/1 was written although B/1 does not fit"
    # Same for a --t-out beyond the second well's timepoints.
    out = os.path.join(d, "o2.zarr")
    run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", "--wells", "B/1", "--format", "0.4")
    run("fuse", p, s, "-o", out, "--t-out", 2, "--chunk", "16", "--wells", "A/1", "--format", "0.4")
    t2 = os.path.join(out, "A", "1", "0", "0", "2")  # 0.4 chunk keys t/c/z/y/x: A/1's chunks of T 2
    assert os.path.isdir(t2), os.listdir(os.path.dirname(t2))
    shutil.rmtree(t2)
    r = run("fuse", p, s, "-o", out, "--t-out", 2, "--chunk", "16", expect=2)
    assert "B/1" in r.stderr and "T=1" in r.stderr, r.stderr
    assert not os.path.exists(t2), "well A/1 was written although --t-out 2 is beyond B/1's timepoints"


@case
def t_out_adds_a_well_to_an_existing_plate():
    """A --t-out run that creates a well in an existing output plate lists it
    in the plate metadata (it was left unlisted, invisible to readers)."""
    d = fresh("tout_newwell")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1", "B/1"], tile_hw=(16, 16), grid=(2, 1))
    p, s = os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml")
    R.write_shifts(s, info)
    for fmt in ("0.4", "0.5"):
        out = os.path.join(d, "o%s.zarr" % fmt)
        run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", "--wells", "B/1", "--format", fmt)
        run("fuse", p, s, "-o", out, "--t-out", 0, "--chunk", "16", "--wells", "A/1", "--format", fmt)
        attrs = json.load(open(os.path.join(out, ".zattrs" if fmt == "0.4" else "zarr.json")))
        plate = attrs["plate"] if fmt == "0.4" else attrs["attributes"]["ome"]["plate"]
        assert sorted(w["path"] for w in plate["wells"]) == ["A/1", "B/1"], plate["wells"]
        R.validate_ngff(out, ["A/1", "B/1"], fmt)


@case
def orientation_mismatch_warns():
    d = fresh("mismatch")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(32, 32), grid=(2, 2))
    R.write_shifts(os.path.join(d, "s.yaml"), info, orientation=(False, False, 1))
    out = os.path.join(d, "o.zarr")
    p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", out, "--rot90", "0",
            "--json", "--chunk", "16")
    assert "warning" in p.stderr and "orientation" in p.stderr, p.stderr
    assert json.loads(p.stdout)["orientation_mismatch"] is True, p.stdout
    raws, origins, _ = info["A/1"]
    _, ref = R.fuse(raws, origins)  # the flags given (none) are used
    compare_u16(R.read_output(out, "A/1"), ref, "flags win")
    # non-square tiles: a wrong rot90 contradicts the recorded tile_shape, an
    # error (the origins were measured on tiles of the other shape)
    info = R.write_plate(os.path.join(d, "q.zarr"), ["A/1"], tile_hw=(24, 40), grid=(2, 2))
    R.write_shifts(os.path.join(d, "t.yaml"), info, tile_shape=(24, 40))
    p = run("fuse", os.path.join(d, "q.zarr"), os.path.join(d, "t.yaml"), "-o", os.path.join(d, "q_out.zarr"),
            "--rot90", "1", "--json", "--chunk", "16", expect=1)
    assert "tile_shape 24x40" in p.stderr and "40x24 px after orientation" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(d, "q_out.zarr"))


@case
def errors_are_clear():
    d = fresh("errors")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1"], tile_hw=(16, 16), grid=(2, 1))
    R.write_shifts(os.path.join(d, "s.yaml"), info)
    bad = os.path.join(d, "bad.yaml")
    with open(bad, "w") as f:
        f.write("total_translation:\n  A/1/000000: [0, 0]\n  A/1/009009: [5, 5]\n")
    p = run("fuse", os.path.join(d, "p.zarr"), bad, "-o", os.path.join(d, "o.zarr"), expect=1)
    assert "009009" in p.stderr, p.stderr
    p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", os.path.join(d, "o2.zarr"),
            "--format", "0.6", expect=2)
    assert "--format" in p.stderr
    p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", os.path.join(d, "o3.zarr"),
            "--wells", "C/9", expect=2)
    assert "C/9" in p.stderr, p.stderr
    assert "usage" in run("fuse", "--help").stdout
    p = run("fuse", os.path.join(d, "p.zarr"), os.path.join(d, "s.yaml"), "-o", os.path.join(d, "p.zarr"), expect=2)
    assert "is the input" in p.stderr, p.stderr
    absurd = os.path.join(d, "absurd.yaml")
    with open(absurd, "w") as f:
        f.write("total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [0, 900000000]\n")
    p = run("fuse", os.path.join(d, "p.zarr"), absurd, "-o", os.path.join(d, "o4.zarr"), expect=1)
    assert "absurd" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(d, "o4.zarr", "A")), "wrote output for absurd shifts"
    # A tile array claiming a 2^40 x 2^40 plane: a format error naming it (h * w overflowed, segfault).
    huge = os.path.join(d, "huge.zarr")
    shutil.copytree(os.path.join(d, "p.zarr"), huge)
    zpath = os.path.join(huge, "A", "1", "001000", "0", ".zarray")
    with open(zpath) as f:
        zmeta = json.load(f)
    zmeta["shape"][-2:] = [2 ** 40, 2 ** 40]
    with open(zpath, "w") as f:
        json.dump(zmeta, f)
    p = run("fuse", huge, os.path.join(d, "s.yaml"), "-o", os.path.join(d, "o5.zarr"), expect=1)
    assert "001000" in p.stderr and "beyond" in p.stderr, p.stderr
    zmeta["shape"] = [1, 2 ** 40, 1, 16, 16]  # and 2^40 channels, zero-padded by --tcz max
    with open(zpath, "w") as f:
        json.dump(zmeta, f)
    p = run("fuse", huge, os.path.join(d, "s.yaml"), "-o", os.path.join(d, "o5.zarr"), "--tcz", "max", expect=1)
    assert "001000" in p.stderr and "beyond" in p.stderr, p.stderr


@case
def bad_second_well_writes_nothing():
    d = fresh("badwell")
    info = R.write_plate(os.path.join(d, "p.zarr"), ["A/1", "B/1"], tile_hw=(16, 16), grid=(2, 1))
    s = os.path.join(d, "s.yaml")
    R.write_shifts(s, info)
    # a tile the plate does not have, in the second well
    text = open(s).read().replace("B/1/001000", "B/1/007000")
    with open(s, "w") as f:
        f.write(text)
    out = os.path.join(d, "o.zarr")
    p = run("fuse", os.path.join(d, "p.zarr"), s, "-o", out, expect=1)
    assert "B/1" in p.stderr and "007000" in p.stderr, p.stderr
    assert not os.path.exists(out), "the first well was written although the second is invalid"


@case
def simulate_05_input_and_stitch():
    """A plate written by `tessera simulate` (0.5 input, read for the reference
    with zarrita), fused at its true origins; then `stitch` end to end."""
    d = fresh("sim")
    plate = os.path.join(d, "sim.zarr")
    truth = os.path.join(d, "truth.yaml")
    run("simulate", "-o", plate, "--grid", "3x2", "--tile", "40x56", "--overlap", "10", "--channels", "2",
        "--acq-fliplr", "--acq-rot90", "3", "--truth", truth, "--seed", "3")
    out = os.path.join(d, "o.zarr")
    run("fuse", plate, truth, "-o", out, "--chunk", "16", "--format", "0.4")
    origins = R.read_shifts_origins(truth, "A/1")
    names = sorted(origins)
    raws = R.read_many_v3_zarrita([os.path.join(plate, "A/1", n, "0") for n in names])
    _, ref = R.fuse(raws, [origins[n] for n in names], orientation=(False, True, 3))
    compare_u16(R.read_output(out, "A/1"), ref, "simulate plate at truth")
    st = os.path.join(d, "st.zarr")
    # 56x40 tiles with 10 px overlaps: 4 of the 5 pairs that match are
    # outliers, which estimate's check refuses (docs/qc.md); this case is
    # about fuse's input, so the poor solution is accepted.
    p = run("stitch", plate, "-o", st, "--overlap", "10", "--fliplr", "--rot90", "3", "--json",
            "--chunk", "16", "--accept-poor")
    import json as _json
    summary = _json.loads(p.stdout)
    assert summary["fuse"]["wells"] == 1 and os.path.exists(summary["shifts"]), summary
    R.validate_ngff(st, ["A/1"], "0.5")
    # stitch = estimate + fuse: same bytes as fusing its shifts file
    again = os.path.join(d, "again.zarr")
    run("fuse", plate, summary["shifts"], "-o", again, "--chunk", "16")
    assert np.array_equal(R.read_output(again, "A/1"), R.read_output(st, "A/1"))


if FAILS:
    print("failed:", ", ".join(FAILS))
    sys.exit(1)
shutil.rmtree(TMP, ignore_errors=True)
print("all fuse interop cases passed")
