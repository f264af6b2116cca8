"""fuse of label images (segmentation masks), against a NumPy/SciPy reference.

The rule, from docs/fuse.md (not from the C code): a mosaic pixel takes the
value of the tile that covers it with the largest EDT weight
(scipy.ndimage.distance_transform_edt of the tile with its outer ring as
background), its 0 (background) included; of equal weights the tile listed
first in the shifts file wins; the dtype is kept. Pyramid levels: each pixel
the most frequent of its 2x2 source pixels (those that exist at odd edges),
0 included, ties to the first in raster order.

Plates: OME-Zarr 0.4 written with zarr-python.
  1. An intensity plate whose fields have NGFF labels (labels/cells, int32,
     consistent across overlaps, values beyond 2^24): fused with the default
     blending, the mosaic gets labels/cells, equal to the reference and to
     the truth it was cut from.
  2. A plate of uint32 label images with labels that differ per tile (so the
     chosen tile shows in every pixel) and background holes: --blend label.
Both in 0.4 and 0.5, with pyramid levels; threads 1 and 2 byte-identical;
metadata checked against the OME-NGFF schemas; read with zarr-python (0.4)
and zarrita (0.5)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import scipy.ndimage

sys.path.insert(0, os.path.dirname(__file__))
import fuse_reference as R  # noqa: E402
from interop_checks import check, finish, run, tree_digest  # noqa: E402

TILE = (40, 52)
GRID = (3, 2)          # cols, rows
OVERLAP = (11, 13)


def edt_weight(h, w):
    mask = np.ones((h, w), dtype=bool)
    mask[0, :] = mask[-1, :] = mask[:, 0] = mask[:, -1] = False
    return scipy.ndimage.distance_transform_edt(mask) + 1e-6


def label_reference(tiles, origins, dtype):
    """tiles: 2-D label arrays in shifts-file order; origins (y, x)."""
    H = max(oy + t.shape[0] for t, (oy, ox) in zip(tiles, origins))
    W = max(ox + t.shape[1] for t, (oy, ox) in zip(tiles, origins))
    best = np.zeros((H, W))
    out = np.zeros((H, W), dtype=dtype)
    for t, (oy, ox) in zip(tiles, origins):
        h, w = t.shape
        wt = edt_weight(h, w)
        region = best[oy:oy + h, ox:ox + w]
        take = wt > region  # strict: the earlier tile keeps a tie
        region[take] = wt[take]
        out[oy:oy + h, ox:ox + w][take] = t[take]
    return out


def mode_downsample(a):
    h, w = a.shape
    oh, ow = (h + 1) // 2, (w + 1) // 2
    out = np.zeros((oh, ow), dtype=a.dtype)
    for y in range(oh):
        for x in range(ow):
            vals = [a[sy, sx] for sy in (2 * y, 2 * y + 1) for sx in (2 * x, 2 * x + 1) if sy < h and sx < w]
            counts = [vals.count(v) for v in vals]
            out[y, x] = vals[counts.index(max(counts))]
    return out


def truth_labels(H, W, seed):
    """Nearest-seed cells with some background, ids beyond float32's exact
    integers (2^24)."""
    rng = np.random.default_rng(seed)
    n = 25
    pts = rng.random((n, 2)) * [H, W]
    yy, xx = np.mgrid[0:H, 0:W]
    d = (yy[..., None] - pts[:, 0]) ** 2 + (xx[..., None] - pts[:, 1]) ** 2
    near = d.argmin(-1)
    lab = (20_000_000 + 7 * near).astype(np.int32)
    lab[d.min(-1) > 60] = 0
    return lab


def write_group(g, attrs):
    for k, v in attrs.items():
        g.attrs[k] = v


def multiscales(ndim_axes):
    axes = {"t": {"name": "t", "type": "time"}, "c": {"name": "c", "type": "channel"},
            "z": {"name": "z", "type": "space", "unit": "micrometer"},
            "y": {"name": "y", "type": "space", "unit": "micrometer"},
            "x": {"name": "x", "type": "space", "unit": "micrometer"}}
    scale = {"t": 1.0, "c": 1.0, "z": 1.0, "y": 0.65, "x": 0.65}
    return [{"version": "0.4", "axes": [axes[a] for a in ndim_axes],
             "datasets": [{"path": "0", "coordinateTransformations": [
                 {"type": "scale", "scale": [scale[a] for a in ndim_axes]}]}]}]


def write_plate(path, kind, seed, dtype=np.uint32, orientation=(False, False, 0)):
    """kind 'with-labels': uint16 images + labels/cells (int32, consistent);
    kind 'label-plate': the images are labels of dtype (uint32, uint16),
    different per tile, stored as a camera would under orientation (the
    returned tiles are oriented).
    Returns (names, origins, label tiles, truth or None)."""
    import zarr
    from numcodecs import Zstd
    rng = np.random.default_rng(seed)
    th, tw = TILE
    cols, rows = GRID
    H = rows * (th - OVERLAP[0]) + OVERLAP[0] + 10
    W = cols * (tw - OVERLAP[1]) + OVERLAP[1] + 10
    truth = truth_labels(H, W, seed)
    root = zarr.open_group(zarr.DirectoryStore(path, dimension_separator="/"), mode="w")
    root.attrs["plate"] = {"version": "0.4", "name": "labels", "rows": [{"name": "A"}],
                           "columns": [{"name": "1"}],
                           "wells": [{"path": "A/1", "rowIndex": 0, "columnIndex": 0}], "field_count": cols * rows}
    g = root.require_group("A/1")
    names, origins, tiles = [], [], []
    for gy in range(rows):
        for gx in range(cols):
            i = gy * cols + gx
            oy = 3 + gy * (th - OVERLAP[0]) + int(rng.integers(-3, 4))
            ox = 3 + gx * (tw - OVERLAP[1]) + int(rng.integers(-3, 4))
            name = "%03d%03d" % (gx, gy)
            img = g.require_group(name)
            cut = truth[oy:oy + th, ox:ox + tw]
            if kind == "with-labels":
                inten = (1000 + 50 * (cut % 97) + rng.integers(0, 30, cut.shape)).astype(np.uint16)
                img.create_dataset("0", data=inten[None, None, None], chunks=(1, 1, 1, th, tw),
                                   compressor=Zstd(level=1))
                write_group(img, {"multiscales": multiscales("tczyx"),
                                  "omero": {"channels": [{"label": "dapi", "color": "0000FF",
                                                          "window": {"start": 0, "end": 4000, "min": 0,
                                                                     "max": 65535}}]}})
                labels = img.require_group("labels")
                labels.attrs["labels"] = ["cells"]
                cells = labels.require_group("cells")
                # (z, y, x) label images: axes other than the image's are read by name.
                cells.create_dataset("0", data=cut[None], chunks=(1, th, tw), compressor=Zstd(level=1))
                write_group(cells, {"multiscales": multiscales("zyx"), "image-label": {
                    "version": "0.4", "colors": [{"label-value": 20_000_000, "rgba": [255, 0, 0, 255]}],
                    "properties": [{"label-value": 20_000_007, "area (pixels)": 10}],
                    "source": {"image": "../../"}}})
                tiles.append(cut.copy())
            else:
                # Each tile its own ids (the tile chosen shows), a hole of
                # background, and the dtype's largest value.
                base = 20_000_000 if dtype == np.uint32 else 0
                t = np.where(cut > 0, (cut.astype(np.int64) - 20_000_000) + base + 1 + 1000 * (i + 1), 0)
                t = t.astype(dtype)
                t[5:9, 20:30] = 0
                t[0, 0] = np.iinfo(dtype).max
                raw = np.ascontiguousarray(R.unorient(t, *orientation))
                img.create_dataset("0", data=raw[None, None, None], chunks=(1, 1, 1) + raw.shape,
                                   compressor=Zstd(level=1))
                write_group(img, {"multiscales": multiscales("tczyx"), "image-label": {"version": "0.4"}})
                tiles.append(t)
            names.append(name)
            origins.append((oy, ox))
    g.attrs["well"] = {"version": "0.4", "images": [{"path": n} for n in names]}
    return names, origins, tiles, truth


def write_shifts(path, names, origins, order):
    oy0 = min(o[0] for o in origins)
    ox0 = min(o[1] for o in origins)
    lines = ["total_translation:"]
    for i in order:
        lines.append("  A/1/%s: [%d, %d]" % (names[i], origins[i][0] - oy0, origins[i][1] - ox0))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return [(origins[i][0] - oy0, origins[i][1] - ox0) for i in order]


def mpirun_prefix():
    """mpirun -n 3 when tessera is built with MPI (linked with libmpi), else None."""
    binary = shutil.which(os.environ.get("TESSERA_BIN", "tessera"))
    mpirun = shutil.which("mpirun")
    if not binary or not mpirun:
        return None
    p = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if "libmpi" not in p.stdout:
        return None
    cmd = [mpirun, "--oversubscribe", "-q", "-n", "3"]
    if os.getuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


def mpi_env(tmp):
    """Under the sanitizers Open MPI's own allocations at MPI_Init are not
    freed at MPI_Finalize: not tessera's leaks (as test_mpi.sh, told apart by
    the library in their stacks)."""
    supp = os.path.join(tmp, "lsan.supp")
    with open(supp, "w") as f:
        f.write("".join("leak:%s\n" % x for x in ("libmpi.so", "libopen-pal.so", "libopen-rte.so", "libpmix.so",
                                                   "libhwloc.so", "libevent", "mca_")))
    env = dict(os.environ)
    env["LSAN_OPTIONS"] = "suppressions=%s" % supp + (":" + env["LSAN_OPTIONS"] if env.get("LSAN_OPTIONS") else "")
    env["ASAN_OPTIONS"] = (env["ASAN_OPTIONS"] + ":" if env.get("ASAN_OPTIONS") else "") + "fast_unwind_on_malloc=0"
    env["OMPI_MCA_mca_base_component_disable_dlclose"] = "1"
    return env


def validate(kind, attrs, version):
    import jsonschema
    try:
        R.validate_schema(kind, attrs, version)
        return True
    except jsonschema.ValidationError as e:
        print("schema", kind, version, e.message)
        return False


def check_levels(where, image_dir, ref0, levels, dtype, allowed):
    arr = R.read_array(os.path.join(image_dir, "0"))
    check(arr.dtype == np.dtype(dtype), "%s: dtype %s, want %s" % (where, arr.dtype, dtype))
    a0 = arr.reshape(arr.shape[-2:])
    check(a0.shape == ref0.shape, "%s: shape %s, want %s" % (where, a0.shape, ref0.shape))
    if a0.shape == ref0.shape:
        bad = int((a0 != ref0).sum())
        check(bad == 0, "%s level 0: %d of %d pixels differ from the max-EDT reference" % (where, bad, a0.size))
    prev = a0
    for k in range(1, levels + 1):
        ak = R.read_array(os.path.join(image_dir, str(k)))
        check(ak.dtype == np.dtype(dtype), "%s level %d: dtype %s" % (where, k, ak.dtype))
        ak = ak.reshape(ak.shape[-2:])
        want = mode_downsample(prev)
        check(ak.shape == want.shape and (ak == want).all(),
              "%s level %d: not the 2x2 mode of level %d" % (where, k, k - 1))
        extra = set(np.unique(ak).tolist()) - allowed
        check(not extra, "%s level %d: labels not in any input: %s" % (where, k, sorted(extra)[:5]))
        prev = ak


def main():
    tmp = tempfile.mkdtemp(prefix="tessera_labels_")
    try:
        # ---- 1: an image plate whose fields have labels/cells
        plate = os.path.join(tmp, "with_labels.zarr")
        names, origins, tiles, truth = write_plate(plate, "with-labels", 5)
        order = [3, 0, 5, 1, 4, 2]  # not the plate's order: ties follow the shifts file
        sh = os.path.join(tmp, "a.yaml")
        placed = write_shifts(sh, names, origins, order)
        ref = label_reference([tiles[i] for i in order], placed, np.int32)
        allowed = set(np.unique(np.concatenate([t.ravel() for t in tiles])).tolist())
        # Consistent labels: the mosaic is the truth where tiles cover.
        oy0 = min(o[0] for o in origins)
        ox0 = min(o[1] for o in origins)
        cover = np.zeros(ref.shape, bool)
        for (oy, ox) in placed:
            cover[oy:oy + TILE[0], ox:ox + TILE[1]] = True
        tr = truth[oy0:oy0 + ref.shape[0], ox0:ox0 + ref.shape[1]]
        check((ref[cover] == tr[cover]).all(), "reference: consistent labels should give the truth")
        for fmt in ("0.4", "0.5"):
            outs = []
            for threads in ("1", "2"):
                out = os.path.join(tmp, "a%s_%s.zarr" % (fmt, threads))
                run("fuse", plate, sh, "-o", out, "--format", fmt, "--levels", "2", "--chunk", "16",
                    "--threads", threads)
                outs.append(out)
            check(tree_digest(outs[0]) == tree_digest(outs[1]), "%s: --threads 1 and 2 differ" % fmt)
            out = outs[0]
            mpi = mpirun_prefix()
            if mpi:
                # Bands split over 3 ranks (chunk 16, shard 1: 5 bands): the same store.
                out3 = os.path.join(tmp, "a%s_mpi.zarr" % fmt)
                p = subprocess.run(mpi + [os.environ.get("TESSERA_BIN", "tessera"), "fuse", plate, sh, "-o", out3,
                                          "--format", fmt, "--levels", "2", "--chunk", "16", "--shard", "1"],
                                   capture_output=True, text=True, timeout=300, env=mpi_env(tmp))
                one = os.path.join(tmp, "a%s_one.zarr" % fmt)
                run("fuse", plate, sh, "-o", one, "--format", fmt, "--levels", "2", "--chunk", "16", "--shard", "1")
                check(p.returncode == 0 and tree_digest(out3) == tree_digest(one),
                      "%s: mpirun -n 3 differs from one process (%d %s)" % (fmt, p.returncode, p.stderr[-300:]))
            else:
                print("skip: MPI (tessera is not linked with libmpi, or no mpirun)")
            # Into the existing store: the image is replaced (staged, swapped
            # in), its labels written into it; the same bytes.
            before = tree_digest(out)
            run("fuse", plate, sh, "-o", out, "--format", fmt, "--levels", "2", "--chunk", "16")
            check(tree_digest(out) == before, "%s: a re-run into the existing store changed it" % fmt)
            image = os.path.join(out, "A", "1", "0")
            cells = os.path.join(image, "labels", "cells")
            check(os.path.isdir(cells), "%s: no labels/cells in the mosaic" % fmt)
            if not os.path.isdir(cells):
                continue
            check_levels("%s labels/cells" % fmt, cells, ref, 2, np.int32, allowed)
            a0 = R.read_array(os.path.join(cells, "0"))
            check(a0.shape == (1, 1, 1) + ref.shape, "%s labels/cells: shape %s (t, c, z, y, x)" % (fmt, a0.shape))
            # The image itself is still blended (uint16).
            img0 = R.read_array(os.path.join(image, "0"))
            check(img0.dtype == np.uint16, "%s image: dtype %s" % (fmt, img0.dtype))
            la = R._attrs(os.path.join(image, "labels"))
            lo = la if fmt == "0.4" else la.get("ome", {})
            check(lo.get("labels") == ["cells"], "%s: labels group lists %s" % (fmt, lo.get("labels")))
            ca = R._attrs(cells)
            co = ca if fmt == "0.4" else ca.get("ome", {})
            il = co.get("image-label", {})
            check(il.get("source") == {"image": "../../"}, "%s: image-label source %s" % (fmt, il.get("source")))
            check(il.get("colors") == [{"label-value": 20_000_000, "rgba": [255, 0, 0, 255]}],
                  "%s: image-label colours not carried: %s" % (fmt, il.get("colors")))
            check(co.get("multiscales", [{}])[0].get("type") == "mode", "%s: multiscales type" % fmt)
            check(validate("label", ca, fmt), "%s: labels/cells fails label.schema" % fmt)
            check(validate("image", ca, fmt), "%s: labels/cells fails image.schema" % fmt)
            if fmt == "0.5":
                check(validate("image", R._attrs(image), fmt), "0.5: image fails image.schema")
            R.validate_ngff(out, ["A/1"], fmt)
            # `info` lists the label image; `verify` reads it with the rest.
            p = run("info", out, "--json", ok=False)
            info = json.loads(p.stdout) if p.returncode == 0 else {}
            check(info.get("image", {}).get("labels") == [{"name": "cells", "dtype": "int32", "levels": 3}],
                  "%s: info's labels: %s" % (fmt, info.get("image", {}).get("labels")))
            broken = os.path.join(tmp, "broken%s.zarr" % fmt)
            shutil.copytree(out, broken)
            meta = os.path.join(broken, "A", "1", "0", "labels", "cells", "zarr.json" if fmt == "0.5" else ".zattrs")
            with open(meta, "w") as f:
                f.write("{")
            p = run("info", broken, ok=False)
            check(p.returncode == 1 and "label image cells" in p.stderr and meta.split(tmp)[1][1:] in p.stdout + p.stderr,
                  "%s: info of a broken label image: exit %d, %s" % (fmt, p.returncode, p.stderr.strip()))
            p = run("verify", out, ok=False)
            check(p.returncode == 0, "%s: verify: %s %s" % (fmt, p.stdout[-300:], p.stderr[-300:]))

        # ---- 2: a plate of uint32 label images, --blend label
        plate2 = os.path.join(tmp, "label_plate.zarr")
        names, origins, tiles, _ = write_plate(plate2, "label-plate", 9)
        order = [2, 5, 0, 3, 1, 4]
        sh2 = os.path.join(tmp, "b.yaml")
        placed = write_shifts(sh2, names, origins, order)
        ref = label_reference([tiles[i] for i in order], placed, np.uint32)
        allowed = set(np.unique(np.concatenate([t.ravel() for t in tiles])).tolist())
        # The chosen tiles differ across the mosaic (ids 1000 * (tile + 1)
        # apart) and the background holes show: the rule is observable.
        ids = ref[(ref > 0) & (ref < 2 ** 31)].astype(np.int64)
        chosen = set(((ids - 20_000_000 - 1) // 1000).tolist())
        check(len(chosen) == len(tiles), "reference: every tile should win somewhere (%s)" % sorted(chosen))
        for fmt in ("0.4", "0.5"):
            out = os.path.join(tmp, "b%s.zarr" % fmt)
            run("fuse", plate2, sh2, "-o", out, "--format", fmt, "--blend", "label", "--levels", "3",
                "--chunk", "8", "--threads", "2")
            image = os.path.join(out, "A", "1", "0")
            check_levels("%s --blend label" % fmt, image, ref, 3, np.uint32, allowed)
            ia = R._attrs(image)
            io = ia if fmt == "0.4" else ia.get("ome", {})
            check("image-label" in io and "omero" not in io, "%s --blend label: attrs %s" % (fmt, sorted(io)))
            check(validate("label", ia, fmt), "%s --blend label: fails label.schema" % fmt)
            R.validate_ngff(out, ["A/1"], fmt)
        # Without --blend label: detected from the images' image-label
        # metadata, the same store.
        out = os.path.join(tmp, "b_detect.zarr")
        run("fuse", plate2, sh2, "-o", out, "--format", "0.5", "--levels", "3", "--chunk", "8", "--threads", "1")
        check(tree_digest(out) == tree_digest(os.path.join(tmp, "b0.5.zarr")),
              "a plate of image-label images without --blend label: not fused as labels")

        # uint16 labels (blended straight from the decoded tile when rows
        # run forward) and stored rotated and flipped (oriented copies).
        for orientation, flags in (((False, False, 0), []), ((True, False, 0), ["--flipud"]),
                                   ((True, False, 1), ["--flipud", "--rot90", "1"]),
                                   ((False, True, 2), ["--fliplr", "--rot90", "2"])):
            plate3 = os.path.join(tmp, "u16_%d%d%d.zarr" % orientation)
            names, origins, tiles, _ = write_plate(plate3, "label-plate", 13, np.uint16, orientation)
            sh3 = os.path.join(tmp, "c.yaml")
            placed = write_shifts(sh3, names, origins, order)
            ref = label_reference([tiles[i] for i in order], placed, np.uint16)
            allowed = set(np.unique(np.concatenate([t.ravel() for t in tiles])).tolist())
            out = os.path.join(tmp, "c_%d%d%d.zarr" % orientation)
            run("fuse", plate3, sh3, "-o", out, "--format", "0.4", "--levels", "2", "--chunk", "8", *flags)
            check_levels("uint16 %s" % (orientation,), os.path.join(out, "A", "1", "0"), ref, 2, np.uint16, allowed)

        # ---- refusals
        # A field without the label image the well's first field lists, and
        # one whose label image is not at the image's resolution.
        for what in ("missing", "shape"):
            bad = os.path.join(tmp, "bad_%s.zarr" % what)
            shutil.copytree(plate, bad)
            cells = os.path.join(bad, "A", "1", "001000", "labels", "cells")
            if what == "missing":
                shutil.rmtree(cells)
            else:
                import zarr
                zarr.open_group(zarr.DirectoryStore(cells, dimension_separator="/"), mode="a").create_dataset(
                    "0", data=np.ones((1, 20, 26), np.int32), chunks=(1, 20, 26), overwrite=True)
            o = os.path.join(tmp, "bad_%s_out.zarr" % what)
            p = run("fuse", bad, sh, "-o", o, ok=False)
            want = "001000/labels/cells" if what == "missing" else "20x26"
            check(p.returncode == 1 and want in p.stderr and "Traceback" not in p.stderr,
                  "label image %s: exit %d, %s" % (what, p.returncode, p.stderr.strip()))
            check(not os.path.exists(o), "label image %s: the refused run left an output" % what)
        fplate = os.path.join(tmp, "float.zarr")
        fsh = os.path.join(tmp, "f.yaml")
        R.write_shifts(fsh, R.write_plate(fplate, ["A/1"], dtype=np.float32))
        p = run("fuse", fplate, fsh, "-o", os.path.join(tmp, "f_out.zarr"), "--blend", "label", ok=False)
        check(p.returncode == 1 and "float32" in p.stderr and "label" in p.stderr,
              "--blend label of float32 tiles: %d %s" % (p.returncode, p.stderr))
        check(not os.path.exists(os.path.join(tmp, "f_out.zarr")), "refused run left an output")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
