"""tessera: stitch tiled microscope scans into OME-Zarr mosaics.

A thin layer over libtessera (the C library the `tessera` program is built
on): the same stages, options and messages, from Python::

    import tessera
    shifts = tessera.estimate("plate.ome.zarr", overlap=205)
    shifts["positions"]["A/1/000000"]          # [y, x] float origin, px
    tessera.fuse("plate.ome.zarr", shifts, "mosaic.ome.zarr", levels=3)

Keyword options are the CLI's long flags with '_' for '-' (``edge_weights
="linear"``, ``max_shift=20``, ``cache=2**30`` bytes, ``memory=2**31``);
an unknown one is a TypeError. A failed run raises TesseraError with the
library's message; nothing half-written is left (as with the CLI). A
``progress=callable(stage, done, total)`` is called while a stage runs;
an exception it raises is raised when the run has ended (it does not stop
the run). See docs/python.md.
"""
import json
import math
import operator
import os
import tempfile

from . import _tessera
from ._tessera import TesseraError

__all__ = ["TesseraError", "simulate", "import_tiles", "estimate", "solve", "fuse", "read_shifts", "write_shifts",
           "info", "positions_array", "__version__"]
__version__ = _tessera.version()


def _options(options):
    """os.PathLike values as str (the binding takes str)."""
    return {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in options.items()}


def _overlap(overlap, options):
    """px as integers (operator.index): int() cut 32.7 to 32 unsaid."""
    if overlap is None:
        return
    if isinstance(overlap, (tuple, list)):
        options["overlap_y"], options["overlap_x"] = (operator.index(v) for v in overlap)
    else:
        options["overlap_y"] = options["overlap_x"] = operator.index(overlap)


def read_shifts(path):
    """The shifts file at path as a dict with the file's keys:
    ``total_translation`` and ``positions`` ({"A/1/000000": [y, x]}),
    ``pairs`` ({"A/1": [[tile_a, tile_b, dy, dx, confidence], ...]}),
    ``tiles``, ``tile_shape``, ``orientation``, ``residuals``, ``outliers``."""
    return json.loads(_tessera.read_shifts_json(os.fspath(path)))


def write_shifts(path, shifts):
    """Writes a shifts dict (as read_shifts returns, or just ``positions``)
    as a shifts file, atomically; checked as the library checks a file."""
    _tessera.write_shifts_json(os.fspath(path), json.dumps(_finite_or_none(shifts)))


def _finite_or_none(v):
    """NaN and infinities as null (JSON has no NaN): the library then
    refuses them naming their key, or reads a null residual as unknown."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite_or_none(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_finite_or_none(x) for x in v]
    return v


class _ShiftsPath:
    """A shifts argument: a path as given, or a dict written to a
    temporary file for the call."""

    def __init__(self, shifts):
        self._dir = None
        if isinstance(shifts, dict):
            self._dir = tempfile.TemporaryDirectory(prefix="tessera-shifts-")
            self.path = os.path.join(self._dir.name, "shifts.yaml")
            write_shifts(self.path, shifts)
        else:
            self.path = os.fspath(shifts)

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        if self._dir:
            self._dir.cleanup()


def simulate(output, **options):
    """A synthetic plate with known positions (``truth=`` writes them):
    grid_cols, grid_rows, tile_h, tile_w, overlap, jitter, blank, format, seed, ..."""
    _tessera.simulate(os.fspath(output), **_options(options))


def import_tiles(input, output, *, scale=None, **options):
    """A folder of TIFF tiles as an OME-Zarr plate (`tessera import`):
    pattern ("r{row}_c{col}.tif", or "{index}.tif" with grid_cols and
    grid_rows), order ("row", "column", "snake-row", "snake-column"),
    first_index, well, names_yx, format, chunk, codec ("zstd:5"), threads,
    progress; scale: the pixel size in micrometres, one number or (y, x)
    (default: the OME-XML's). Returns what it wrote (the CLI's --json)."""
    options = _options(options)
    if scale is not None:
        if isinstance(scale, (tuple, list)):
            options["scale_y"], options["scale_x"] = (float(v) for v in scale)
        else:
            options["scale_y"] = options["scale_x"] = float(scale)
    return _tessera.import_tiles(os.fspath(input), os.fspath(output), **options)


def estimate(plate, overlap=None, *, output=None, summary=False, **options):
    """Registers every neighbour pair of the plate's tiles and solves for
    their positions. overlap: px, or (y, x). Returns the shifts (as
    read_shifts), and with summary=True also what the run measured (the
    quality check, pair counts: the CLI's --json). output: also keep the
    shifts file there."""
    options = _options(options)
    _overlap(overlap, options)
    with tempfile.TemporaryDirectory(prefix="tessera-estimate-") as tmp:
        path = os.fspath(output) if output is not None else os.path.join(tmp, "shifts.yaml")
        result = _tessera.estimate(os.fspath(plate), path, **options)
        shifts = read_shifts(path)
    return (shifts, result) if summary else shifts


def solve(shifts, output=None, **options):
    """Solves the pairs of a shifts file (path or dict) again with other
    options (solver, edge_weights, guess, ...); returns the new shifts."""
    options = _options(options)
    with _ShiftsPath(shifts) as src, tempfile.TemporaryDirectory(prefix="tessera-solve-") as tmp:
        path = os.fspath(output) if output is not None else os.path.join(tmp, "shifts.yaml")
        _tessera.solve(src, path, **options)
        return read_shifts(path)


def fuse(plate, shifts, output, **options):
    """Blends the plate's tiles at the shifts (a path or a dict) into an
    OME-Zarr plate at output; returns what it wrote (the CLI's --json)."""
    options = _options(options)
    with _ShiftsPath(shifts) as path:
        return _tessera.fuse(os.fspath(plate), path, os.fspath(output), **options)


def info(store):
    """What `tessera info --json` prints for a store, as a dict."""
    return json.loads(_tessera.info_json(os.fspath(store)))


def positions_array(shifts, well):
    """(names, array): the tile names of a well and their float [y, x]
    positions as an (N, 2) numpy array (total_translation where a tile has
    no float position)."""
    import numpy as np
    names = shifts["tiles"][well]
    pos, tt = shifts.get("positions", {}), shifts["total_translation"]
    rows = [pos.get(well + "/" + n, tt[well + "/" + n]) for n in names]
    return names, np.asarray(rows, dtype=np.float64).reshape(len(names), 2)
