/* tessera._tessera: the CPython binding of libtessera (docs/python.md).
 *
 * Keyword arguments are set on the library's options structs through one
 * table per stage (name, kind, offset): the struct is first filled by its
 * _init function, so an option the binding does not name keeps the
 * library's default, and an unknown keyword is a TypeError naming it. The
 * GIL is released while the library runs; the progress callable is called
 * back with it held, from whichever thread reports. Errors raise
 * tessera.TesseraError carrying the library's message and status. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <tessera/tessera.h>

static PyObject *TesseraError;

/* ---------------------------------------------------------------- errors */

static PyObject *raise_status(const ts_error *err) {
    /* A message naming a path that is not UTF-8 is still the message
     * (bytes escaped as \xNN), not a UnicodeDecodeError in its place. */
    PyObject *msg = PyUnicode_DecodeUTF8(err->message, (Py_ssize_t)strlen(err->message), "backslashreplace");
    PyObject *exc = msg ? PyObject_CallFunctionObjArgs(TesseraError, msg, NULL) : NULL;
    Py_XDECREF(msg);
    if (!exc) return NULL;
    /* A stable identifier per ts_status, in the enum's order. */
    static const char *const ids[] = {"ok", "arg", "io", "format", "unsupported", "corrupt", "codec",
                                      "nomem", "numeric", "internal", "busy"};
    int c = (int)err->code;
    PyObject *status = PyUnicode_FromString(c >= 0 && c < (int)(sizeof ids / sizeof *ids) ? ids[c] : "internal");
    if (status) PyObject_SetAttrString(exc, "status", status);
    Py_XDECREF(status);
    PyErr_SetObject(TesseraError, exc);
    Py_DECREF(exc);
    return NULL;
}

/* -------------------------------------------------------------- progress */

typedef struct {
    PyObject *callable;  /* borrowed from the keywords; NULL = none */
    PyObject *exc_type, *exc_value, *exc_tb; /* the first exception it raised */
} progress_ctx;

static void progress_trampoline(void *user, const char *stage, int64_t done, int64_t total) {
    progress_ctx *p = user;
    PyGILState_STATE g = PyGILState_Ensure();
    if (!p->exc_type) {
        PyObject *r = PyObject_CallFunction(p->callable, "sLL", stage, (long long)done, (long long)total);
        if (r) Py_DECREF(r);
        else PyErr_Fetch(&p->exc_type, &p->exc_value, &p->exc_tb); /* raised after the run */
    }
    PyGILState_Release(g);
}

/* After the run: the callback's exception wins over success. */
static bool progress_failed(progress_ctx *p) {
    if (!p->exc_type) return false;
    PyErr_Restore(p->exc_type, p->exc_value, p->exc_tb);
    p->exc_type = p->exc_value = p->exc_tb = NULL;
    return true;
}

/* --------------------------------------------------------------- options */

typedef enum {
    K_INT, K_U64, K_DOUBLE, K_BOOL, K_STR, K_SIZE, K_CODEC, K_FORMAT, K_DTYPE, K_SOLVER, K_EDGE_WEIGHTS, K_BLEND, K_TCZ,
    K_DEVICE, K_PROGRESS, K_POSITIONS, K_ORDER
} kind;

typedef struct {
    const char *name;
    kind k;
    size_t off;  /* of the field in the options struct */
    size_t off2; /* K_EDGE_WEIGHTS: the threshold; K_PROGRESS: progress_user; K_CODEC: codec_level;
                    K_POSITIONS: positions_file */
} field;

/* Strings and paths (the Python layer passes os.PathLike as str). The
 * UTF-8 buffer lives as long as the string object, which the caller's
 * arguments keep alive for the call. */
static int set_string(PyObject *v, const char **dst, const char *name) {
    if (v == Py_None) { *dst = NULL; return 0; }
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a str", name);
        return -1;
    }
    *dst = PyUnicode_AsUTF8(v);
    return *dst ? 0 : -1;
}

static int set_enum_name(PyObject *v, const char *name, const char *const *names, const int *values, int *dst) {
    const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
    if (s)
        for (int i = 0; names[i]; i++)
            if (!strcmp(s, names[i])) { *dst = values[i]; return 0; }
    PyObject *r = PyObject_Repr(v);
    PyErr_Format(PyExc_ValueError, "%s: %s is not one of the accepted values", name, r ? PyUnicode_AsUTF8(r) : "?");
    Py_XDECREF(r);
    return -1;
}

/* The keywords that take one of a few names, the CLI's words. Each sets
 * an enum field through an int: they are all int-sized (checked below). */
static const struct {
    kind k;
    const char *const names[5]; /* NULL-terminated */
    int values[4];
} ENUMS[] = {
    {K_ORDER, {"row", "column", "snake-row", "snake-column"},
     {TS_ORDER_ROW, TS_ORDER_COLUMN, TS_ORDER_SNAKE_ROW, TS_ORDER_SNAKE_COLUMN}},
    {K_FORMAT, {"0.4", "0.5"}, {TS_OME_04, TS_OME_05}},
    {K_SOLVER, {"l1", "l2"}, {TS_SOLVER_L1, TS_SOLVER_L2}},
    {K_BLEND, {"edt", "average", "label"}, {TS_BLEND_EDT, TS_BLEND_AVERAGE, TS_BLEND_LABEL}},
    {K_TCZ, {"min", "max"}, {TS_TCZ_MIN, TS_TCZ_MAX}},
    {K_DEVICE, {"cpu", "gpu", "auto"}, {TS_DEVICE_CPU, TS_DEVICE_GPU, TS_DEVICE_AUTO}}, /* docs/gpu.md */
};
_Static_assert(sizeof(ts_import_order) == sizeof(int) && sizeof(ts_ome_version) == sizeof(int) &&
                   sizeof(ts_solver) == sizeof(int) && sizeof(ts_blend) == sizeof(int) &&
                   sizeof(ts_tcz_policy) == sizeof(int) && sizeof(ts_device) == sizeof(int),
               "an enum keyword's field is set through an int");

static int set_field(char *base, const field *f, PyObject *v, progress_ctx *prog) {
    void *dst = base + f->off;
    for (size_t i = 0; i < sizeof ENUMS / sizeof ENUMS[0]; i++)
        if (ENUMS[i].k == f->k) return set_enum_name(v, f->name, ENUMS[i].names, ENUMS[i].values, (int *)dst);
    switch (f->k) {
    case K_INT: {
        long x = PyLong_AsLong(v);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (x < INT32_MIN || x > INT32_MAX) { PyErr_Format(PyExc_ValueError, "%s: %ld is out of range", f->name, x); return -1; }
        *(int *)dst = (int)x;
        return 0;
    }
    case K_U64: {
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) return -1;
        *(uint64_t *)dst = (uint64_t)x;
        return 0;
    }
    case K_DOUBLE: {
        double x = PyFloat_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred()) return -1;
        *(double *)dst = x;
        return 0;
    }
    case K_BOOL: {
        int b = PyObject_IsTrue(v);
        if (b < 0) return -1;
        *(bool *)dst = b;
        return 0;
    }
    case K_STR: return set_string(v, (const char **)dst, f->name);
    case K_SIZE: {
        unsigned long long x = PyLong_AsUnsignedLongLong(v);
        if (PyErr_Occurred()) return -1;
        if (x == 0) { PyErr_Format(PyExc_ValueError, "%s: must be > 0 bytes", f->name); return -1; }
        *(size_t *)dst = (size_t)x;
        return 0;
    }
    case K_CODEC: { /* "NAME[:LEVEL]", as the CLI's --codec */
        const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        ts_error err = {0};
        if (!s || ts_codec_parse(s, (ts_codec *)dst, (int *)(base + f->off2), &err) != TS_OK) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s: %s", f->name,
                         s ? err.message : "not NAME[:LEVEL] (zstd, blosc-lz4, blosc-zstd, gzip, none)");
            return -1;
        }
        return 0;
    }
    case K_POSITIONS: { /* "names", "metadata" or a TileConfiguration path, as --positions */
        const char *s = NULL;
        if (set_string(v, &s, f->name)) return -1;
        if (!s || !*s) {
            PyErr_Format(PyExc_ValueError, "%s: give \"names\", \"metadata\" or a TileConfiguration file", f->name);
            return -1;
        }
        ts_positions_source src = !strcmp(s, "names") ? TS_POSITIONS_NAMES
                                  : !strcmp(s, "metadata") ? TS_POSITIONS_METADATA : TS_POSITIONS_FILE;
        *(ts_positions_source *)dst = src;
        *(const char **)(base + f->off2) = src == TS_POSITIONS_FILE ? s : NULL;
        return 0;
    }
    case K_DTYPE: {
        const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        ts_dtype d = s ? ts_dtype_from_name(s) : TS_DTYPE_INVALID;
        if (d == TS_DTYPE_INVALID) { PyErr_Format(PyExc_ValueError, "%s: not a dtype name", f->name); return -1; }
        *(ts_dtype *)dst = d;
        return 0;
    }
    case K_EDGE_WEIGHTS: {
        const char *s = PyUnicode_Check(v) ? PyUnicode_AsUTF8(v) : NULL;
        if (!s || ts_edge_weighting_parse(s, (ts_edge_weighting *)dst, (double *)(base + f->off2)) != 0) {
            PyErr_Format(PyExc_ValueError, "%s: not none|linear|squared|threshold:CUT", f->name);
            return -1;
        }
        return 0;
    }
    case K_PROGRESS:
        if (v == Py_None) return 0;
        if (!PyCallable_Check(v)) { PyErr_Format(PyExc_TypeError, "%s: must be callable(stage, done, total)", f->name); return -1; }
        prog->callable = v;
        *(ts_progress_fn *)dst = progress_trampoline;
        *(void **)(base + f->off2) = prog;
        return 0;
    default: break; /* the ENUMS kinds, set above */
    }
    return -1;
}

/* Sets every keyword on the struct at base; a keyword no field names is a
 * TypeError naming it. */
static int apply_keywords(char *base, const field *fields, PyObject *kw, const char *func, progress_ctx *prog) {
    if (!kw) return 0;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(kw, &pos, &key, &value)) {
        const char *name = PyUnicode_AsUTF8(key);
        if (!name) return -1;
        const field *f = fields;
        while (f->name && strcmp(f->name, name)) f++;
        if (!f->name) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", func, name);
            return -1;
        }
        if (set_field(base, f, value, prog)) return -1;
    }
    return 0;
}

#define F(S, name, k, member) {name, k, offsetof(S, member), 0}
#define CODEC(S) {"codec", K_CODEC, offsetof(S, codec), offsetof(S, codec_level)}
#define PROGRESS(S) {"progress", K_PROGRESS, offsetof(S, progress), offsetof(S, progress_user)}

static const field SIMULATE_FIELDS[] = {
    F(ts_simulate_options, "wells", K_STR, wells),
    F(ts_simulate_options, "grid_cols", K_INT, grid_cols),
    F(ts_simulate_options, "grid_rows", K_INT, grid_rows),
    F(ts_simulate_options, "tile_h", K_INT, tile_h),
    F(ts_simulate_options, "tile_w", K_INT, tile_w),
    F(ts_simulate_options, "overlap", K_INT, overlap),
    F(ts_simulate_options, "jitter", K_DOUBLE, jitter),
    F(ts_simulate_options, "channels", K_INT, channels),
    F(ts_simulate_options, "timepoints", K_INT, timepoints),
    F(ts_simulate_options, "z", K_INT, z),
    F(ts_simulate_options, "noise", K_DOUBLE, noise),
    F(ts_simulate_options, "blank", K_DOUBLE, blank_fraction),
    F(ts_simulate_options, "missing", K_DOUBLE, missing_fraction),
    F(ts_simulate_options, "format", K_FORMAT, format),
    F(ts_simulate_options, "dtype", K_DTYPE, dtype),
    CODEC(ts_simulate_options),
    F(ts_simulate_options, "seed", K_U64, seed),
    F(ts_simulate_options, "truth", K_STR, truth),
    F(ts_simulate_options, "acq_flipud", K_BOOL, acquisition.flipud),
    F(ts_simulate_options, "acq_fliplr", K_BOOL, acquisition.fliplr),
    F(ts_simulate_options, "acq_rot90", K_INT, acquisition.rot90),
    F(ts_simulate_options, "names_yx", K_BOOL, names_yx),
    F(ts_simulate_options, "pixel_size_um", K_DOUBLE, pixel_size_um),
    F(ts_simulate_options, "threads", K_INT, threads),
    F(ts_simulate_options, "vignetting", K_DOUBLE, vignetting),
    F(ts_simulate_options, "background", K_DOUBLE, background),
    {NULL, 0, 0, 0}};

/* The solve's options inside estimate's (prefix "solve." is not needed:
 * the names do not collide). */
#define SOLVE_FIELDS(S, m)                                                                                     \
    F(S, "solver", K_SOLVER, m solver), {"edge_weights", K_EDGE_WEIGHTS, offsetof(S, m edge_weights),          \
                                          offsetof(S, m threshold)},                                          \
        F(S, "weight_floor", K_DOUBLE, m weight_floor), F(S, "max_iterations", K_INT, m max_iterations),      \
        F(S, "tolerance", K_DOUBLE, m tolerance), F(S, "outlier_px", K_DOUBLE, m outlier_px),                 \
        F(S, "cost_tolerance", K_DOUBLE, m cost_tolerance), F(S, "loop_check", K_BOOL, m loop_check),         \
        F(S, "guess", K_STR, m guess)

static const field ESTIMATE_FIELDS[] = {
    F(ts_estimate_options, "overlap_x", K_INT, overlap_x),
    F(ts_estimate_options, "overlap_y", K_INT, overlap_y),
    F(ts_estimate_options, "channel", K_INT, channel),
    F(ts_estimate_options, "timepoint", K_INT, timepoint),
    F(ts_estimate_options, "z", K_INT, z),
    F(ts_estimate_options, "flipud", K_BOOL, orientation.flipud),
    F(ts_estimate_options, "fliplr", K_BOOL, orientation.fliplr),
    F(ts_estimate_options, "rot90", K_INT, orientation.rot90),
    F(ts_estimate_options, "names_yx", K_BOOL, names_yx),
    F(ts_estimate_options, "clahe", K_BOOL, clahe),
    F(ts_estimate_options, "wells", K_STR, wells),
    F(ts_estimate_options, "threads", K_INT, threads),
    F(ts_estimate_options, "cache", K_SIZE, cache_bytes),
    F(ts_estimate_options, "max_shift", K_DOUBLE, max_shift),
    F(ts_estimate_options, "accept_poor", K_BOOL, accept_poor),
    F(ts_estimate_options, "no_stage_model", K_BOOL, no_stage_model),
    {"positions", K_POSITIONS, offsetof(ts_estimate_options, positions), offsetof(ts_estimate_options, positions_file)},
    PROGRESS(ts_estimate_options),
    SOLVE_FIELDS(ts_estimate_options, solve.),
    {NULL, 0, 0, 0}};

static const field SOLVE_ONLY_FIELDS[] = {SOLVE_FIELDS(ts_solve_options, ), {NULL, 0, 0, 0}};

static const field FUSE_FIELDS[] = {
    F(ts_fuse_options, "format", K_FORMAT, format),
    F(ts_fuse_options, "blend", K_BLEND, blend),
    F(ts_fuse_options, "exponent", K_DOUBLE, exponent),
    F(ts_fuse_options, "dtype", K_DTYPE, dtype),
    F(ts_fuse_options, "chunk", K_INT, chunk),
    F(ts_fuse_options, "shard", K_INT, shard),
    CODEC(ts_fuse_options),
    F(ts_fuse_options, "levels", K_INT, levels),
    F(ts_fuse_options, "tcz", K_TCZ, tcz),
    F(ts_fuse_options, "t_out", K_INT, t_out),
    F(ts_fuse_options, "t_in", K_INT, t_in),
    F(ts_fuse_options, "wells", K_STR, wells),
    F(ts_fuse_options, "threads", K_INT, threads),
    F(ts_fuse_options, "memory", K_SIZE, memory),
    F(ts_fuse_options, "resume", K_BOOL, resume),
    F(ts_fuse_options, "device", K_DEVICE, device),
    PROGRESS(ts_fuse_options),
    {NULL, 0, 0, 0}};

static const field IMPORT_FIELDS[] = {
    F(ts_import_options, "pattern", K_STR, pattern),
    F(ts_import_options, "well", K_STR, well),
    F(ts_import_options, "first_index", K_INT, first_index),
    F(ts_import_options, "grid_cols", K_INT, grid_cols),
    F(ts_import_options, "grid_rows", K_INT, grid_rows),
    F(ts_import_options, "order", K_ORDER, order),
    F(ts_import_options, "names_yx", K_BOOL, names_yx),
    F(ts_import_options, "format", K_FORMAT, format),
    F(ts_import_options, "chunk", K_INT, chunk),
    CODEC(ts_import_options),
    F(ts_import_options, "scale_y", K_DOUBLE, scale_y),
    F(ts_import_options, "scale_x", K_DOUBLE, scale_x),
    F(ts_import_options, "threads", K_INT, threads),
    PROGRESS(ts_import_options),
    {NULL, 0, 0, 0}};

/* fuse's orientation flags: given only when one is passed (else the
 * shifts file's). */
static int fuse_orientation(ts_fuse_options *o, PyObject *kw) {
    static const char *const names[] = {"flipud", "fliplr", "rot90"};
    for (int i = 0; i < 3; i++) {
        PyObject *v = kw ? PyDict_GetItemString(kw, names[i]) : NULL;
        if (!v) continue;
        o->orientation_given = true;
        if (i < 2) {
            int b = PyObject_IsTrue(v);
            if (b < 0) return -1;
            *(i ? &o->orientation.fliplr : &o->orientation.flipud) = b;
        } else {
            long k = PyLong_AsLong(v);
            if (k == -1 && PyErr_Occurred()) return -1;
            /* Checked before the cast: (int)(2**32 + 1) was 1, a quarter
             * turn the caller never asked for. */
            if (k < -3 || k > 3) {
                PyErr_Format(PyExc_ValueError, "rot90: %ld is not a quarter-turn count in -3..3", k);
                return -1;
            }
            o->orientation.rot90 = (int)k;
        }
        if (PyDict_DelItemString(kw, names[i])) return -1;
    }
    return 0;
}

/* fuse's layout keywords given (opt->given): with t_out into an existing
 * mosaic a differing one is refused rather than ignored. */
static void fuse_given(ts_fuse_options *o, PyObject *kw) {
    static const char *const names[] = {"format", "chunk", "shard", "levels", "codec"};
    static const unsigned bits[] = {TS_FUSE_GIVEN_FORMAT, TS_FUSE_GIVEN_CHUNK, TS_FUSE_GIVEN_SHARD,
                                    TS_FUSE_GIVEN_LEVELS, TS_FUSE_GIVEN_CODEC};
    _Static_assert(sizeof names / sizeof *names == sizeof bits / sizeof *bits, "one bit per keyword");
    for (size_t i = 0; kw && i < sizeof names / sizeof *names; i++)
        if (PyDict_GetItemString(kw, names[i])) o->given |= bits[i];
}

/* -------------------------------------------------------------- results */

static PyObject *overlap_dict(const ts_overlap_qc *q) {
    return Py_BuildValue("{s:L,s:L,s:L,s:L,s:i,s:d,s:d,s:(ddd),s:O}", "pairs", (long long)q->pairs, "measured",
                         (long long)q->measured, "trusted", (long long)q->trusted, "outliers", (long long)q->outliers,
                         "nominal", q->nominal, "overlap", q->overlap, "spread", q->spread, "confidence_quartiles",
                         q->conf_q[0], q->conf_q[1], q->conf_q[2], "wide_strips", q->probed ? Py_True : Py_False);
}

static PyObject *estimate_dict(const ts_estimate_result *r) {
    PyObject *x = overlap_dict(&r->overlap[0]), *y = overlap_dict(&r->overlap[1]);
    PyObject *d = x && y ? Py_BuildValue("{s:i,s:L,s:L,s:L,s:L,s:L,s:L,s:i,s:L,s:s,s:s,s:O,s:O,s:O}", "wells",
                                         r->wells, "tiles", (long long)r->tiles, "pairs", (long long)r->pairs,
                                         "unmatched_pairs", (long long)r->unmatched_pairs, "low_confidence_pairs",
                                         (long long)r->low_confidence_pairs, "outlier_pairs",
                                         (long long)r->outlier_pairs, "isolated_tiles", (long long)r->isolated_tiles,
                                         "max_components", r->max_components, "tile_reads", (long long)r->tile_reads,
                                         "verdict", ts_verdict_name(r->verdict), "message", r->verdict_message,
                                         "written", r->written ? Py_True : Py_False, "x", x, "y", y)
                         : NULL;
    Py_XDECREF(x);
    Py_XDECREF(y);
    /* The stage model's and the loop check's counts (the CLI's --json keys). */
    const struct { const char *key; int64_t v; } more[] = {{"reregistered_pairs", r->reregistered_pairs},
                                                          {"rematched_pairs", r->rematched_pairs},
                                                          {"loop_downweighted_pairs", r->loop_downweighted_pairs},
                                                          {"stage_downweighted_pairs", r->stage_downweighted_pairs},
                                                          {"disputed_pairs", r->disputed_pairs},
                                                          {"content_reads", r->content_reads}};
    for (size_t k = 0; d && k < sizeof more / sizeof *more; k++) {
        PyObject *v = PyLong_FromLongLong((long long)more[k].v);
        if (!v || PyDict_SetItemString(d, more[k].key, v)) Py_CLEAR(d);
        Py_XDECREF(v);
    }
    return d;
}

static PyObject *fuse_dict(const ts_fuse_result *r) {
    return Py_BuildValue("{s:i,s:L,s:L,s:L,s:L,s:L,s:(LL),s:i,s:i,s:{s:O,s:O,s:i},s:O,s:s}", "wells", r->wells, "tiles",
                         (long long)r->tiles, "strips_read", (long long)r->strips_read, "blocks_written",
                         (long long)r->blocks_written, "blocks_resumed", (long long)r->blocks_resumed,
                         "output_pixels", (long long)r->output_pixels, "canvas", (long long)r->canvas_h,
                         (long long)r->canvas_w, "chunk", r->chunk, "shard", r->shard, "orientation", "flipud",
                         r->orientation.flipud ? Py_True : Py_False, "fliplr",
                         r->orientation.fliplr ? Py_True : Py_False, "rot90", r->orientation.rot90,
                         "orientation_mismatch", r->orientation_mismatch ? Py_True : Py_False, "device",
                         ts_device_name(r->device_used));
}

/* ------------------------------------------------------------ functions */

/* The first n positional arguments as strings (paths), into out[]. */
static int positional_paths(PyObject *args, int n, const char **out, const char *const *names) {
    if (PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "expected %d positional arguments", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (set_string(PyTuple_GET_ITEM(args, i), &out[i], names[i]) || !out[i]) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s: a path is required", names[i]);
            return -1;
        }
    return 0;
}

static PyObject *py_simulate(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *const names[] = {"output"};
    ts_simulate_options o;
    ts_simulate_options_init(&o);
    if (positional_paths(args, 1, &o.output, names) ||
        apply_keywords((char *)&o, SIMULATE_FIELDS, kw, "simulate", NULL))
        return NULL;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_simulate(&o, &err);
    Py_END_ALLOW_THREADS
    if (st != TS_OK) return raise_status(&err);
    Py_RETURN_NONE;
}

static PyObject *py_estimate(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *const names[] = {"plate", "output"};
    const char *paths[2];
    ts_estimate_options o;
    ts_estimate_options_init(&o);
    progress_ctx prog = {0};
    if (positional_paths(args, 2, paths, names) ||
        apply_keywords((char *)&o, ESTIMATE_FIELDS, kw, "estimate", &prog))
        return NULL;
    o.input = paths[0];
    o.output = paths[1];
    ts_estimate_result res;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_estimate_run(&o, &res, &err);
    Py_END_ALLOW_THREADS
    if (progress_failed(&prog)) {
        if (st == TS_OK) ts_estimate_result_free(&res);
        return NULL;
    }
    if (st != TS_OK) return raise_status(&err);
    PyObject *d = estimate_dict(&res);
    ts_estimate_result_free(&res);
    return d;
}

static PyObject *py_solve(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *const names[] = {"shifts", "output"};
    const char *paths[2];
    ts_solve_options o;
    ts_solve_options_init(&o);
    if (positional_paths(args, 2, paths, names) || apply_keywords((char *)&o, SOLVE_ONLY_FIELDS, kw, "solve", NULL))
        return NULL;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_solve_file(paths[0], paths[1], &o, &err);
    Py_END_ALLOW_THREADS
    if (st != TS_OK) return raise_status(&err);
    Py_RETURN_NONE;
}

static PyObject *py_fuse(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *const names[] = {"plate", "shifts", "output"};
    const char *paths[3];
    ts_fuse_options o;
    ts_fuse_options_init(&o);
    progress_ctx prog = {0};
    PyObject *rest = kw ? PyDict_Copy(kw) : NULL; /* the orientation flags are taken out of it */
    if (kw && !rest) return NULL;
    fuse_given(&o, rest);
    if (positional_paths(args, 3, paths, names) || fuse_orientation(&o, rest) ||
        apply_keywords((char *)&o, FUSE_FIELDS, rest, "fuse", &prog)) {
        Py_XDECREF(rest);
        return NULL;
    }
    o.input = paths[0];
    o.shifts = paths[1];
    o.output = paths[2];
    ts_fuse_result res;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_fuse_run(&o, &res, &err);
    Py_END_ALLOW_THREADS
    Py_XDECREF(rest); /* the strings in o point into it: released only now */
    if (progress_failed(&prog)) return NULL;
    if (st != TS_OK) return raise_status(&err);
    return fuse_dict(&res);
}

/* The CLI's import --json keys. */
static PyObject *import_dict(const ts_import_result *r, const ts_import_options *o) {
    const char *from = r->scale_from_ome ? "ome-xml" : o->scale_y > 0 ? "option" : "default";
    return Py_BuildValue("{s:L,s:L,s:(ii),s:(LL),s:i,s:s,s:(dd),s:s,s:O,s:O,s:O}", "positions", (long long)r->tiles,
                         "missing", (long long)r->missing, "grid", r->grid_cols, r->grid_rows, "tile",
                         (long long)r->tile_h, (long long)r->tile_w, "channels", r->channels, "dtype",
                         ts_dtype_name(r->dtype), "pixel_size", r->scale_y, r->scale_x, "pixel_size_from", from,
                         "channel_names_from_ome", r->names_from_ome ? Py_True : Py_False, "stage_positions",
                         r->positions ? Py_True : Py_False, "position_unit_assumed",
                         r->position_unit_assumed ? Py_True : Py_False);
}

static PyObject *py_import(PyObject *self, PyObject *args, PyObject *kw) {
    static const char *const names[] = {"input", "output"};
    const char *paths[2];
    ts_import_options o;
    ts_import_options_init(&o);
    progress_ctx prog = {0};
    if (positional_paths(args, 2, paths, names) || apply_keywords((char *)&o, IMPORT_FIELDS, kw, "import_tiles", &prog))
        return NULL;
    o.input = paths[0];
    o.output = paths[1];
    ts_import_result res;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_import(&o, &res, &err);
    Py_END_ALLOW_THREADS
    if (progress_failed(&prog)) return NULL;
    if (st != TS_OK) return raise_status(&err);
    return import_dict(&res, &o);
}

/* Functions of one path returning a malloc'd JSON text. */
static PyObject *json_text(ts_status (*fn)(const char *, char **, ts_error *), PyObject *args, const char *name) {
    const char *path;
    const char *const names[] = {name};
    if (positional_paths(args, 1, &path, names)) return NULL;
    char *text = NULL;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = fn(path, &text, &err);
    Py_END_ALLOW_THREADS
    if (st != TS_OK) return raise_status(&err);
    PyObject *s = PyUnicode_FromString(text);
    free(text);
    return s;
}

static PyObject *py_info_json(PyObject *self, PyObject *args) { return json_text(ts_info_json, args, "store"); }

static PyObject *py_read_shifts_json(PyObject *self, PyObject *args) {
    return json_text(ts_shifts_read_json, args, "path");
}

static PyObject *py_write_shifts_json(PyObject *self, PyObject *args) {
    const char *path, *text;
    if (!PyArg_ParseTuple(args, "ss", &path, &text)) return NULL;
    ts_error err;
    ts_status st;
    Py_BEGIN_ALLOW_THREADS st = ts_shifts_write_json(path, text, &err);
    Py_END_ALLOW_THREADS
    if (st != TS_OK) return raise_status(&err);
    Py_RETURN_NONE;
}

static PyObject *py_version(PyObject *self, PyObject *unused) { return PyUnicode_FromString(ts_version()); }

static PyMethodDef METHODS[] = {
    {"version", py_version, METH_NOARGS, "The library's version."},
    {"simulate", (PyCFunction)(void (*)(void))py_simulate, METH_VARARGS | METH_KEYWORDS,
     "simulate(output, **options): a synthetic plate with known positions."},
    {"estimate", (PyCFunction)(void (*)(void))py_estimate, METH_VARARGS | METH_KEYWORDS,
     "estimate(plate, output, **options) -> summary dict; writes the shifts file."},
    {"solve", (PyCFunction)(void (*)(void))py_solve, METH_VARARGS | METH_KEYWORDS,
     "solve(shifts, output, **options): re-solve the pairs of a shifts file."},
    {"fuse", (PyCFunction)(void (*)(void))py_fuse, METH_VARARGS | METH_KEYWORDS,
     "fuse(plate, shifts, output, **options) -> summary dict."},
    {"import_tiles", (PyCFunction)(void (*)(void))py_import, METH_VARARGS | METH_KEYWORDS,
     "import_tiles(input, output, **options) -> summary dict; a folder of TIFF tiles as a plate."},
    {"info_json", py_info_json, METH_VARARGS, "info_json(store) -> JSON text."},
    {"read_shifts_json", py_read_shifts_json, METH_VARARGS, "read_shifts_json(path) -> JSON text."},
    {"write_shifts_json", py_write_shifts_json, METH_VARARGS, "write_shifts_json(path, text)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "tessera._tessera",
                                    "The CPython binding of libtessera (use the tessera package).", -1, METHODS,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__tessera(void) {
    PyObject *m = PyModule_Create(&MODULE);
    if (!m) return NULL;
    TesseraError = PyErr_NewExceptionWithDoc("tessera.TesseraError",
                                             "A tessera run failed; str() is the library's message (naming the file, "
                                             "key or value at fault), .status one of arg, io, format, unsupported, "
                                             "corrupt, codec, nomem, numeric, internal, busy.",
                                             NULL, NULL);
    if (!TesseraError || PyModule_AddObject(m, "TesseraError", TesseraError)) {
        Py_XDECREF(TesseraError);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(TesseraError);
    return m;
}
