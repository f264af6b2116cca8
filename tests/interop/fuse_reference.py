"""NumPy/SciPy reference of tessera's fusion, and a writer of small test plates.

The reference is written from the SPEC's formula, not from the C code:
  weight of oriented tile pixel (y, x) = (EDT + 1e-6) ** exponent, EDT being
  scipy.ndimage.distance_transform_edt of the tile with its outermost pixel
  ring as background ('average': weight 1); zero pixels carry no weight;
  output = sum(w v) / sum(w), 0 where nothing covers; uint16 by rounding and
  clamping. Orientation: np.flipud, then np.fliplr, then np.rot90(k).
Pyramid levels: 2x mean of the stored level below, over the pixels that
exist at odd edges (uint16: rounded half up).
Plates are OME-Zarr 0.4 (zarr v2) written with zarr-python.
"""
import json
import os

import numpy as np
import scipy.ndimage


def orient(a, flipud=False, fliplr=False, k=0):
    """Orient the last two axes as tessera does (numpy semantics)."""
    if flipud:
        a = a[..., ::-1, :]
    if fliplr:
        a = a[..., :, ::-1]
    return np.rot90(a, k, axes=(-2, -1))


def unorient(a, flipud=False, fliplr=False, k=0):
    """Inverse of orient: the raw tile a camera would store."""
    a = np.rot90(a, -k, axes=(-2, -1))
    if fliplr:
        a = a[..., :, ::-1]
    if flipud:
        a = a[..., ::-1, :]
    return a


def edt_distance(h, w):
    mask = np.ones((h, w), dtype=bool)
    mask[0, :] = mask[-1, :] = mask[:, 0] = mask[:, -1] = False
    return scipy.ndimage.distance_transform_edt(mask)


def weights(h, w, blend="edt", exponent=1.0):
    if blend == "average":
        return np.ones((h, w))
    return (edt_distance(h, w) + 1e-6) ** exponent


def fuse(tiles, origins, orientation=(False, False, 0), blend="edt", exponent=1.0,
         tcz="min", dtype="uint16"):
    """tiles: list of raw (T, C, Z, H, W) arrays; origins: list of (y, x) ints.
    Returns the (T, C, Z, Y, X) mosaic as float64 (before the cast) and cast."""
    fu, fl, k = orientation
    ot = [orient(np.asarray(t, dtype=np.float64), fu, fl, k) for t in tiles]
    pick = min if tcz == "min" else max
    T = pick(t.shape[0] for t in ot)
    C = pick(t.shape[1] for t in ot)
    Z = pick(t.shape[2] for t in ot)
    oy0 = min(o[0] for o in origins)
    ox0 = min(o[1] for o in origins)
    origins = [(int(round(y)) - oy0, int(round(x)) - ox0) for y, x in origins]
    H = max(o[0] + t.shape[3] for o, t in zip(origins, ot))
    W = max(o[1] + t.shape[4] for o, t in zip(origins, ot))
    num = np.zeros((T, C, Z, H, W))
    den = np.zeros((T, C, Z, H, W))
    for t, (oy, ox) in zip(ot, origins):
        h, w = t.shape[3], t.shape[4]
        wt = weights(h, w, blend, exponent)
        tt, cc, zz = min(T, t.shape[0]), min(C, t.shape[1]), min(Z, t.shape[2])
        v = t[:tt, :cc, :zz]
        m = (v != 0) * wt
        num[:tt, :cc, :zz, oy:oy + h, ox:ox + w] += m * v
        den[:tt, :cc, :zz, oy:oy + h, ox:ox + w] += m
    out = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    return out, cast(out, dtype)


def cast(out, dtype):
    if dtype == "float32":
        return out.astype(np.float32)
    return np.clip(np.rint(out), 0, 65535).astype(np.uint16)


def downsample(a):
    """2x mean over the last two axes; edge pixels average what exists."""
    h, w = a.shape[-2:]
    oh, ow = (h + 1) // 2, (w + 1) // 2
    s = np.zeros(a.shape[:-2] + (oh, ow))
    n = np.zeros((oh, ow))
    af = a.astype(np.float64)
    for dy in (0, 1):
        for dx in (0, 1):
            part = af[..., dy::2, dx::2]
            s[..., :part.shape[-2], :part.shape[-1]] += part
            n[:part.shape[-2], :part.shape[-1]] += 1
    if a.dtype == np.uint16:
        si = s.astype(np.int64)
        ni = n.astype(np.int64)
        return ((si + ni // 2) // ni).astype(np.uint16)
    return (s / n).astype(a.dtype)


# ------------------------------------------------------------ test plates

def specimen(h, w, c, seed):
    """A smooth positive image with structure at several scales."""
    rng = np.random.default_rng(seed)
    out = np.empty((c, h, w))
    for ch in range(c):
        base = rng.random((h // 8 + 2, w // 8 + 2))
        img = scipy.ndimage.zoom(base, 8, order=3)[:h, :w]
        img = scipy.ndimage.gaussian_filter(img + 0.3 * rng.random((h, w)), 1.0)
        out[ch] = 500 + 20000 * (img - img.min()) / (np.ptp(img) + 1e-9) + 1000 * ch
    return out


def write_plate(path, wells, tile_hw=(48, 64), grid=(3, 2), overlap=(10, 12), tcz=(1, 1, 1),
                orientation=(False, False, 0), jitter=3, seed=1, zero_border=True,
                dtype=np.uint16, per_tile_tcz=None, compressor="zstd"):
    """Writes an OME-Zarr 0.4 plate; returns {well: (raw_tiles, origins, names)}.

    tile_hw is the oriented tile size; grid = (cols, rows); tiles are cut from
    a specimen at jittered positions; stored raw = unorient(oriented).
    per_tile_tcz: optional {index: (T, C, Z)} overrides (for the tcz policy)."""
    import zarr
    from numcodecs import Blosc, Zstd
    comp = Zstd(level=1) if compressor == "zstd" else Blosc(cname="lz4", shuffle=Blosc.SHUFFLE)
    rng = np.random.default_rng(seed)
    th, tw = tile_hw
    cols, rows = grid
    T, C, Z = tcz
    root = zarr.open_group(zarr.DirectoryStore(path, dimension_separator="/"), mode="w")
    row_names = sorted({w.split("/")[0] for w in wells})
    col_names = sorted({w.split("/")[1] for w in wells}, key=int)
    root.attrs["plate"] = {
        "version": "0.4", "name": "test",
        "rows": [{"name": r} for r in row_names],
        "columns": [{"name": c} for c in col_names],
        "wells": [{"path": w, "rowIndex": row_names.index(w.split("/")[0]),
                   "columnIndex": col_names.index(w.split("/")[1])} for w in wells],
        "field_count": cols * rows,
    }
    result = {}
    for wi, well in enumerate(wells):
        pitch_y, pitch_x = th - overlap[0], tw - overlap[1]
        H = rows * pitch_y + overlap[0] + 2 * jitter + 2
        W = cols * pitch_x + overlap[1] + 2 * jitter + 2
        spec = specimen(H, W, max(C, 4), seed + 17 * wi)
        g = root.require_group(well)
        names, raws, origins = [], [], []
        for gy in range(rows):
            for gx in range(cols):
                i = gy * cols + gx
                oy = jitter + gy * pitch_y + int(rng.integers(-jitter, jitter + 1))
                ox = jitter + gx * pitch_x + int(rng.integers(-jitter, jitter + 1))
                tT, tC, tZ = (per_tile_tcz or {}).get(i, (T, C, Z))
                o = np.empty((tT, tC, tZ, th, tw))
                for t in range(tT):
                    for c in range(tC):
                        for z in range(tZ):
                            o[t, c, z] = spec[c, oy:oy + th, ox:ox + tw] * (1 + 0.1 * t + 0.05 * z)
                o += rng.normal(0, 30, o.shape)
                o = np.clip(o, 1, 60000)
                if zero_border:  # padding a camera writes: must carry no weight
                    o[..., :2, : tw // 3] = 0
                raw = np.ascontiguousarray(unorient(o, *orientation)).astype(dtype)
                name = "%03d%03d" % (gx, gy)
                img = g.require_group(name)
                img.create_dataset("0", data=raw, chunks=(1, 1, 1) + raw.shape[3:],
                                   compressor=comp, overwrite=True)
                img.attrs["multiscales"] = [{
                    "version": "0.4",
                    "axes": [{"name": "t", "type": "time"}, {"name": "c", "type": "channel"},
                             {"name": "z", "type": "space", "unit": "micrometer"},
                             {"name": "y", "type": "space", "unit": "micrometer"},
                             {"name": "x", "type": "space", "unit": "micrometer"}],
                    "datasets": [{"path": "0", "coordinateTransformations": [
                        {"type": "scale", "scale": [1.0, 1.0, 2.0, 0.65, 0.65]}]}],
                }]
                img.attrs["omero"] = {"channels": [
                    {"label": "ch%d-%s" % (c, well.replace("/", "")), "color": "00FF00",
                     "window": {"start": 0, "end": 65535, "min": 0, "max": 65535}}
                    for c in range(tC)]}
                names.append(name)
                raws.append(raw)
                origins.append((oy, ox))
        g.attrs["well"] = {"version": "0.4", "images": [{"path": n} for n in names]}
        result[well] = (raws, origins, names)
    return result


def write_shifts(path, plate_info, orientation=None, tile_shape=None):
    """The shifts format's total_translation (+ orientation when given)."""
    lines = ["total_translation:"]
    for well, (_, origins, names) in plate_info.items():
        oy0 = min(o[0] for o in origins)
        ox0 = min(o[1] for o in origins)
        for n, (y, x) in zip(names, origins):
            lines.append("  %s/%s: [%d, %d]" % (well, n, y - oy0, x - ox0))
    if orientation is not None:
        fu, fl, k = orientation
        lines.append("orientation: {flipud: %s, fliplr: %s, rot90: %d}" %
                     ("true" if fu else "false", "true" if fl else "false", k))
    if tile_shape is not None:
        lines.append("tile_shape: [%d, %d]" % tuple(tile_shape))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def read_output(store, well, level=0):
    """Reads a fused image with an independent reader (read_array)."""
    return read_array(os.path.join(store, well, "0", str(level)))


def read_array(arr_dir):
    """Reads a zarr array with an independent reader: zarr-python for v2
    (0.4), zarrita (node, tests/interop/js) for v3 (0.5)."""
    arr_dir = os.path.abspath(arr_dir)
    if os.path.exists(os.path.join(arr_dir, ".zarray")):
        import zarr
        return zarr.open_array(zarr.DirectoryStore(arr_dir, dimension_separator="/"), mode="r")[...]
    return read_v3_zarrita(arr_dir)


def read_v3_zarrita(arr_dir):
    return read_many_v3_zarrita([arr_dir])[0]


def read_many_v3_zarrita(arr_dirs):
    """Reads zarr v3 arrays with zarrita (node), one process for all."""
    import subprocess
    import tempfile
    src = os.environ.get("TESSERA_SOURCE", os.path.join(os.path.dirname(__file__), "..", ".."))
    js = os.path.join(src, "tests", "interop", "js", "zarr_dump.mjs")
    with tempfile.TemporaryDirectory() as td:
        args = []
        for i, d in enumerate(arr_dirs):
            args += [os.path.abspath(d), os.path.join(td, "%d.bin" % i)]
        p = subprocess.run(["node", js] + args, capture_output=True, text=True, cwd=os.path.dirname(js))
        lines = [json.loads(x) for x in p.stdout.strip().splitlines() if x.startswith("{")]
        if p.returncode != 0 or len(lines) != len(arr_dirs) or not all(x.get("ok") for x in lines):
            raise RuntimeError("zarrita could not read %s: %s %s" % (arr_dirs, lines, p.stderr))
        return [np.fromfile(os.path.join(td, "%d.bin" % i), dtype=np.dtype(x["dtype"])).reshape(x["shape"])
                for i, x in enumerate(lines)]


def read_shifts_origins(path, well):
    """total_translation of one well from a shifts file (PyYAML)."""
    import yaml
    with open(path) as f:
        doc = yaml.safe_load(f)
    out = {}
    for k, v in doc["total_translation"].items():
        w, name = k.rsplit("/", 1)
        if w == well:
            out[name] = (int(v[0]), int(v[1]))
    return out


# ------------------------------------------------------- NGFF validation

def _ngff_schemas(version):
    base = os.environ.get("TESSERA_TESTDATA", "/work/shared/testdata")
    d = os.path.join(base, "ngff-spec", version, "schemas")
    store = {}
    for name in os.listdir(d):
        if name.endswith(".schema"):
            with open(os.path.join(d, name)) as f:
                s = json.load(f)
            store[s.get("$id", name)] = s
            store["https://ngff.openmicroscopy.org/%s/schemas/%s" % (version, name)] = s
    return store


def _attrs(group_dir):
    zj = os.path.join(group_dir, "zarr.json")
    if os.path.exists(zj):
        with open(zj) as f:
            return json.load(f).get("attributes", {})
    with open(os.path.join(group_dir, ".zattrs")) as f:
        return json.load(f)


def validate_schema(kind, attrs, version, schemas=None):
    """Validates attrs against the OME-NGFF `kind` schema (plate, well,
    image, label, ...); raises jsonschema.ValidationError."""
    import jsonschema
    schemas = schemas or _ngff_schemas(version)
    s = schemas["https://ngff.openmicroscopy.org/%s/schemas/%s.schema" % (version, kind)]
    cls = jsonschema.validators.validator_for(s)
    resolver = jsonschema.RefResolver(base_uri=s.get("$id", ""), referrer=s, store=schemas)
    cls(s, resolver=resolver).validate(attrs)


def validate_ngff(store, wells, version):
    """Validates the plate, well and image metadata of a fused store against
    the official OME-NGFF JSON schemas (the normative ones; the 0.4 strict_*
    variants add recommendations such as acquisition names)."""
    schemas = _ngff_schemas(version)

    def check(kind, attrs):
        validate_schema(kind, attrs, version, schemas)

    check("plate", _attrs(store))
    for w in wells:
        check("well", _attrs(os.path.join(store, w)))
        check("image", _attrs(os.path.join(store, w, "0")))
