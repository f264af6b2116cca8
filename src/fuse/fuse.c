/* ts_fuse: the fuse stage's entry point. Reads the shifts and the plate,
 * decides the orientation, and fuses each selected well through the
 * pipeline (pipeline.c) into an OME-Zarr plate. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <zlib.h>

#include "common/fs.h"
#include "common/lock.h"
#include "common/outpath.h"
#include "common/staged.h"
#include "common/strbuf.h"
#include "fuse/fuse_internal.h"
#include "mpi/dist.h"
#include "fuse/run_guard.h"
#include "fuse/viewer.h"
#include "shifts/shifts.h"

void ts_fuse_options_init(ts_fuse_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->format = TS_OME_05;
    opt->blend = TS_BLEND_EDT;
    opt->exponent = 1.0;
    opt->dtype = TS_UINT16;
    opt->chunk = 512;
    opt->shard = 0;
    /* blosc-zstd level 3 with byte shuffle: on fused chunks of simulated and
     * real-image plates it is 7-19% smaller than zstd 3 at the same speed
     * or faster, and blosc is what every OME-Zarr reader (neuroglancer
     * too) decodes (docs/fuse.md, "Codecs"; bench/fuse_limit.sh). */
    opt->codec = TS_CODEC_BLOSC_ZSTD;
    opt->codec_level = 3;
    opt->levels = -1; /* a pyramid to 1024 px (viewer.h) */
    opt->tcz = TS_TCZ_MIN;
    opt->t_out = -1;
    opt->threads = 0;
    opt->memory = (size_t)2 << 30;
}

ts_status ts_fuse(const ts_fuse_options *opt, ts_error *err) { return ts_fuse_run(opt, NULL, err); }

static ts_status check_options(const ts_fuse_options *o, ts_error *err) {
    if (!o->input || !*o->input) return ts_fail(err, TS_ERR_ARG, "fuse: no input plate given");
    if (!o->shifts || !*o->shifts) return ts_fail(err, TS_ERR_ARG, "fuse: no shifts file given");
    if (!o->output || !*o->output) return ts_fail(err, TS_ERR_ARG, "fuse: no output path given");
    if (o->format != TS_OME_04 && o->format != TS_OME_05)
        return ts_fail(err, TS_ERR_ARG, "fuse: output format must be 0.4 or 0.5");
    if (o->dtype != TS_UINT16 && o->dtype != TS_FLOAT32)
        return ts_fail(err, TS_ERR_ARG, "fuse: output dtype %s is not uint16 or float32", ts_dtype_name(o->dtype));
    if (!(o->exponent >= 0 && o->exponent <= 100))
        return ts_fail(err, TS_ERR_ARG, "fuse: exponent %g is not in [0, 100]", o->exponent);
    /* Weights and their sums are float32: the outer ring's weight (1e-6)^E
     * must stay a normal float (denormal, it is clamped in the normalisation
     * and its pixels come out darker; zero, they vanish where no other tile
     * covers). That binds first: at E <= 6.32 the centre's weight of a tile
     * under 170,000 px a side, times 65535 x 256 overlaps, is finite. */
    const double ring_max = log(FLT_MIN) / log(1e-6);
    if (o->blend == TS_BLEND_EDT && o->exponent > ring_max)
        return ts_fail(err, TS_ERR_ARG,
                       "fuse: --exponent %g does not fit float32 weights (the outer ring's (1e-6)^%g "
                       "underflows); use at most %.2f", o->exponent, o->exponent, floor(ring_max * 100) / 100);
    if (o->chunk < 1 || o->chunk > 65536) return ts_fail(err, TS_ERR_ARG, "fuse: chunk %d px not in [1, 65536]", o->chunk);
    if (o->shard < 0 || o->shard > 4096) return ts_fail(err, TS_ERR_ARG, "fuse: shard %d chunks not in [0, 4096]", o->shard);
    if (o->levels < -1 || o->levels >= FUSE_MAX_LEVELS)
        return ts_fail(err, TS_ERR_ARG, "fuse: levels %d not in [0, %d] (-1: down to %d px)", o->levels,
                       FUSE_MAX_LEVELS - 1, FUSE_AUTO_LEVELS_SIDE);
    ts_status cst = ts_codec_check_level(o->codec, o->codec_level, err);
    if (cst) return cst;
    if (o->t_out < -1) return ts_fail(err, TS_ERR_ARG, "fuse: t_out %d is negative", o->t_out);
    if (o->t_in < 0) return ts_fail(err, TS_ERR_ARG, "fuse: t_in %d is negative", o->t_in);
    if (o->t_in > 0 && o->t_out < 0)
        return ts_fail(err, TS_ERR_ARG, "fuse: t_in %d is given without t_out (the timepoint to write it to)", o->t_in);
    const char *inputs[2] = {o->input, o->shifts};
    ts_status st = ts_check_output_path("output", o->output, inputs, 2, err);
    if (st) return st;
    if (o->memory < ((size_t)16 << 20)) return ts_fail(err, TS_ERR_ARG, "fuse: memory bound %zu bytes is below 16 MiB", o->memory);
    if (o->device != TS_DEVICE_CPU && o->device != TS_DEVICE_GPU && o->device != TS_DEVICE_AUTO)
        return ts_fail(err, TS_ERR_ARG, "fuse: device %d is not cpu, gpu or auto", (int)o->device);
    /* --device gpu without one fails before anything is written
     * (docs/gpu.md); auto runs on the CPU then. */
    char why[512];
    if (o->device == TS_DEVICE_GPU && !ts_gpu_info(why, sizeof why))
        return ts_fail(err, TS_ERR_UNSUPPORTED, "fuse --device gpu: %s", why);
    return TS_OK;
}

/* On the first rank, before anything is read or written: the run takes the
 * output's lock (common/lock.h) and checks that an existing output is a
 * mosaic plate of this run's format; a new store is built in a temporary
 * directory beside the output (its path into root) and renamed into place
 * once complete, so a killed run leaves no partial store. */
/* --resume: the build directory of the newest interrupted run of o->output
 * (a temporary directory beside it of a dead writer, holding a run
 * manifest), adopted as stage: kept whatever happens, so a failed resume
 * can be resumed again. */
static ts_status find_interrupted(const ts_fuse_options *o, ts_staged *stage, ts_error *err) {
    struct stat sb;
    if (o->t_out >= 0)
        return ts_fail(err, TS_ERR_ARG, "--resume continues a run that was writing a new store; --t-out writes "
                       "into an existing one (re-run it without --resume)");
    if (lstat(o->output, &sb) == 0)
        return ts_fail(err, TS_ERR_ARG, "--resume: %s exists, so no run is left to finish there (--resume continues "
                       "a killed run that was writing a new store); re-run without --resume", o->output);
    memset(stage, 0, sizeof *stage);
    char dir[4200];
    snprintf(stage->final, sizeof stage->final, "%s", o->output);
    size_t n = strlen(stage->final);
    while (n > 1 && stage->final[n - 1] == '/') stage->final[--n] = '\0';
    const char *slash = strrchr(stage->final, '/');
    const char *base = slash ? slash + 1 : stage->final;
    if (slash) snprintf(dir, sizeof dir, "%.*s", slash == stage->final ? 1 : (int)(slash - stage->final), stage->final);
    else snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir);
    if (!d) return ts_fail(err, TS_ERR_IO, "--resume: cannot list '%s': %s", dir, strerror(errno));
    size_t blen = strlen(base);
    double newest = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, base, blen) != 0 || strncmp(e->d_name + blen, ".tmp.", 5) != 0) continue;
        long pid = ts_temp_name_pid(e->d_name);
        if (pid <= 0 || ts_process_alive(pid)) continue;
        char cand[4600], manifest[4700];
        snprintf(cand, sizeof cand, "%s/%s", dir, e->d_name);
        snprintf(manifest, sizeof manifest, "%s/" FUSE_MANIFEST, cand);
        if (stat(manifest, &sb) != 0) continue;
        double when = (double)sb.st_mtim.tv_sec + sb.st_mtim.tv_nsec * 1e-9;
        if (when > newest) {
            newest = when;
            if ((size_t)snprintf(stage->dir, sizeof stage->dir, "%s", cand) >= sizeof stage->dir) continue;
        }
    }
    closedir(d);
    if (newest < 0)
        return ts_fail(err, TS_ERR_ARG, "--resume: no interrupted run of %s to continue (a killed run leaves "
                       "%s.tmp.*/ beside it); run without --resume", o->output, o->output);
    snprintf(stage->build, sizeof stage->build, "%s/%s", stage->dir, base);
    stage->keep = true;
    return TS_OK;
}

/* What makes a run's store what it is, one "key: value" line each: the
 * inputs (resolved paths; the shifts file's size and CRC-32), every option
 * that changes a byte of the output, and each well's layout. A run writing
 * a new store leaves it in its temporary directory; --resume continues only
 * a run whose manifest is this run's, line for line. */
static char *run_manifest(const ts_fuse_options *o, const ts_fuse_result *res, const fuse_well *wells, int nwells,
                          ts_error *err) {
    void *shifts = NULL;
    size_t shifts_size = 0;
    if (ts_read_file(o->shifts, &shifts, &shifts_size, err) != TS_OK) return NULL;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < shifts_size; off += 1u << 30) {
        size_t piece = shifts_size - off < (1u << 30) ? shifts_size - off : (1u << 30);
        crc = crc32(crc, (const Bytef *)shifts + off, (uInt)piece);
    }
    free(shifts);
    char in[4096] = "", sh[4096] = "";
    if (!realpath(o->input, in)) snprintf(in, sizeof in, "%s", o->input);
    if (!realpath(o->shifts, sh)) snprintf(sh, sizeof sh, "%s", o->shifts);
    ts_strbuf text = {0};
#define LINE(...) ts_strbuf_printf(&text, __VA_ARGS__)
    LINE("tessera fuse run %s\n", ts_version());
    LINE("input: %s\nshifts: %s (%zu bytes, crc32 %08lx)\n", in, sh, shifts_size, (unsigned long)crc);
    LINE("format: %s\nblend: %s\nexponent: %.17g\ndtype: %s\nchunk: %d\nshard: %d\ncodec: %s level %d\n",
         o->format == TS_OME_04 ? "0.4" : "0.5", o->blend == TS_BLEND_EDT ? "edt" : o->blend == TS_BLEND_LABEL ? "label" : "average", o->exponent,
         ts_dtype_name(o->dtype), o->chunk, o->shard, ts_codec_name(o->codec),
         o->codec_level ? o->codec_level : ts_codec_default_level(o->codec));
    LINE("levels: %d\ntcz: %s\nt_out: %d\nt_in: %d\norientation: flipud=%d fliplr=%d rot90=%d\n", o->levels,
         o->tcz == TS_TCZ_MAX ? "max" : "min", o->t_out, o->t_in, res->orientation.flipud,
         res->orientation.fliplr, ((res->orientation.rot90 % 4) + 4) % 4);
    for (int i = 0; i < nwells; i++) {
        const fuse_layout *L = &wells[i].L;
        LINE("well %s%s%s: %d tiles, canvas %lldx%lld, block %lld, chunk %lld, levels %d, T %lld C %lld Z %lld, "
             "timepoints %lld from %lld\n", wells[i].plate->wells[wells[i].w].path, wells[i].sub[0] ? " " : "",
             wells[i].sub, wells[i].ntiles,
             (long long)L->canvas_h, (long long)L->canvas_w, (long long)L->block, (long long)L->chunk, L->levels,
             (long long)L->T, (long long)L->C, (long long)L->Z, (long long)wells[i].nt, (long long)wells[i].t_out0);
    }
#undef LINE
    if (text.failed) {
        free(text.data);
        ts_fail(err, TS_ERR_NOMEM, "fuse: run manifest");
        return NULL;
    }
    return text.data;
}

/* The first line where two manifests differ, into a and b (n bytes each). */
static void first_difference(const char *x, const char *y, char *a, char *b, size_t n) {
    while (*x || *y) {
        size_t lx = strcspn(x, "\n"), ly = strcspn(y, "\n");
        if (lx != ly || strncmp(x, y, lx) != 0) {
            snprintf(a, n, "%.*s", (int)lx, x);
            snprintf(b, n, "%.*s", (int)ly, y);
            return;
        }
        x += lx + (x[lx] != '\0');
        y += ly + (y[ly] != '\0');
    }
    snprintf(a, n, "(none)");
    snprintf(b, n, "(none)");
}

/* A new store's run manifest: written beside the build (a plain run), or
 * compared with the interrupted run's (--resume). */
static ts_status manifest_step(const ts_fuse_options *o, const ts_fuse_result *res, const fuse_well *wells,
                               int nwells, const ts_staged *stage, ts_error *err) {
    char *mine = run_manifest(o, res, wells, nwells, err);
    if (!mine) return err ? err->code : TS_ERR_NOMEM;
    char path[4400];
    snprintf(path, sizeof path, "%s/" FUSE_MANIFEST, stage->dir);
    ts_status st;
    if (!o->resume) {
        st = ts_write_file_atomic(path, mine, strlen(mine), err);
    } else {
        void *theirs = NULL;
        size_t n = 0;
        st = ts_read_file(path, &theirs, &n, err);
        if (st == TS_OK && strcmp(theirs, mine) != 0) {
            char a[512], b[512];
            first_difference(theirs, mine, a, b, sizeof a);
            st = ts_fail(err, TS_ERR_ARG, "--resume: this run is not the interrupted one (%s): it had '%s', this "
                         "run has '%s'; re-run without --resume to start over", stage->dir, a, b);
        }
        free(theirs);
    }
    free(mine);
    return st;
}

static ts_status claim_output(const ts_fuse_options *o, ts_output_lock *lock, ts_staged *stage, char *root,
                              size_t n, int32_t *format, ts_error *err) {
    ts_status st = ts_output_lock_acquire(lock, o->output, "fuse", err);
    if (st) return st;
    if (o->resume) {
        if ((st = find_interrupted(o, stage, err)) != TS_OK) return st;
        if ((size_t)snprintf(root, n, "%s", stage->build) >= n)
            return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", stage->build);
        return TS_OK;
    }
    bool exists = false;
    ts_ome_version version = o->format;
    if ((st = ts_store_check_kind(o->output, TS_STORE_MOSAIC_PLATE, &version, &exists, err)) != TS_OK) return st;
    /* --t-out writes into the existing mosaic: its format rules (a format
     * the caller chose that differs is refused, as check_given_layout). */
    if (exists && o->t_out >= 0 && (o->given & TS_FUSE_GIVEN_FORMAT) && version != o->format)
        return ts_fail(err, TS_ERR_ARG, "%s is an OME-Zarr %s plate; --format %s differs, and --t-out writes into "
                       "it in its own format (leave --format out, or write to another output)", o->output,
                       version == TS_OME_04 ? "0.4" : "0.5", o->format == TS_OME_04 ? "0.4" : "0.5");
    if (exists && o->t_out >= 0) *format = (int32_t)version;
    else if (exists && version != o->format)
        return ts_fail(err, TS_ERR_IO, "%s is an OME-Zarr %s plate; this run writes %s, which would put %s "
                       "metadata beside its own (--format %s adds to it; or choose another output)", o->output,
                       version == TS_OME_04 ? "0.4" : "0.5", o->format == TS_OME_04 ? "0.4" : "0.5",
                       o->format == TS_OME_04 ? "zarr v2" : "zarr v3", version == TS_OME_04 ? "0.4" : "0.5");
    struct stat sb;
    if (lstat(o->output, &sb) == 0) return TS_OK; /* written in place (an empty directory, or a mosaic plate) */
    if ((st = ts_staged_begin(stage, o->output, err)) != TS_OK) return st;
    if ((size_t)snprintf(root, n, "%s", stage->build) >= n)
        return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", stage->build);
    return TS_OK;
}

static bool same_orientation(const ts_orientation *a, const ts_orientation *b) {
    return a->flipud == b->flipud && a->fliplr == b->fliplr && ((a->rot90 % 4) + 4) % 4 == ((b->rot90 % 4) + 4) % 4;
}

static ts_status peek_existing(const char *image_path, existing_out *ex, ts_error *err) {
    memset(ex, 0, sizeof *ex);
    char path[4300];
    snprintf(path, sizeof path, "%s/0", image_path);
    if (!ts_is_dir(path)) return TS_OK;
    tz_array *arr = NULL;
    ts_status st = tz_array_open(path, &arr, err);
    if (st) return st;
    const tz_array_meta *m = tz_array_get_meta(arr);
    if (m->ndim != 5) {
        /* formatted before the close: m belongs to arr */
        st = ts_fail(err, TS_ERR_FORMAT, "%s: existing output has %d dimensions, not 5", path, m->ndim);
        tz_array_close(arr);
        return st;
    }
    ex->present = true;
    ex->zarr_format = m->zarr_format;
    ex->T = m->shape[0], ex->C = m->shape[1], ex->Z = m->shape[2], ex->H = m->shape[3], ex->W = m->shape[4];
    ex->dtype = m->dtype;
    ex->chunk = m->sharded ? m->sharding.inner_chunk[3] : m->chunk[3];
    ex->shard = m->sharded ? m->chunk[3] / ex->chunk : 0;
    const tz_codec_chain *chain = m->sharded ? &m->sharding.codecs : &m->codecs;
    for (int i = 0; i < chain->n; i++)
        if (chain->c[i].id == TZ_CODEC_BLOSC || chain->c[i].id == TZ_CODEC_ZSTD || chain->c[i].id == TZ_CODEC_GZIP ||
            chain->c[i].id == TZ_CODEC_ZLIB)
            ex->compressor = chain->c[i];
    tz_array_close(arr);
    /* Its pyramid is kept whole: a --t-out run updates every level it has
     * (fewer would leave stale levels, more would add levels holding only
     * this timepoint). */
    while (ex->levels + 1 < FUSE_MAX_LEVELS) {
        snprintf(path, sizeof path, "%s/%d", image_path, ex->levels + 1);
        if (!ts_is_dir(path)) break;
        ex->levels++;
    }
    return TS_OK;
}

/* The bytes->bytes codec tz_meta_set_codec_level writes for codec at
 * level (id 0: none). */
static tz_codec compressor_of(ts_codec codec, int level) {
    tz_array_meta m;
    tz_array_meta_init(&m, 2);
    tz_meta_set_codec_level(&m, codec, level);
    return m.codecs.n ? m.codecs.c[0] : (tz_codec){0};
}

static bool same_codec(const tz_codec *a, const tz_codec *b) {
    if (a->id != b->id) return false;
    if (!a->id) return true;
    return a->level == b->level && (a->id != TZ_CODEC_BLOSC || (!strcmp(a->cname, b->cname) && a->shuffle == b->shuffle));
}

/* A codec as --codec spells it (ts_codec_name, NAME:LEVEL) when it is one
 * fuse writes, else its parts (a store another tool wrote). */
static void codec_text(const tz_codec *c, char *buf, size_t n) {
    for (int k = TS_CODEC_ZSTD; k <= TS_CODEC_NONE; k++) {
        tz_codec ours = compressor_of((ts_codec)k, c->level);
        if (!same_codec(c, &ours)) continue;
        if (c->id) snprintf(buf, n, "%s:%d", ts_codec_name((ts_codec)k), c->level);
        else snprintf(buf, n, "%s", ts_codec_name((ts_codec)k));
        return;
    }
    snprintf(buf, n, "codec %d (%s) level %d shuffle %d", (int)c->id, c->cname, c->level, (int)c->shuffle);
}

/* --t-out into an existing mosaic writes in its layout and codec: a value
 * the caller chose (opt->given) that differs is refused, not ignored (a
 * time series fused with --chunk 256 into a mosaic of 512-px chunks
 * otherwise came out in 512 px, exit 0). The format is claim_output's. */
static ts_status check_given_layout(const ts_fuse_options *opt, const existing_out *ex, const char *image_path,
                                    ts_error *err) {
    static const char tail[] = "--t-out writes into it in its own layout (leave the flag out, or write to another output)";
    if ((opt->given & TS_FUSE_GIVEN_CHUNK) && opt->chunk != ex->chunk)
        return ts_fail(err, TS_ERR_ARG, "%s/0: --chunk %d differs from the existing mosaic's chunks of %lld px; %s",
                       image_path, opt->chunk, (long long)ex->chunk, tail);
    /* (0.4 stores record no block: there the shard only sets the lower
     * levels' chunks, which fuse_output_open compares.) A shard of 0 and
     * levels of -1 are the automatic choice ("as the canvas and --memory
     * allow", "down to 1024 px"): they choose nothing, as a flag left out
     * (a re-run with the first run's --shard 0 was refused). */
    if ((opt->given & TS_FUSE_GIVEN_SHARD) && opt->shard > 0 && ex->shard > 0 && opt->shard != ex->shard)
        return ts_fail(err, TS_ERR_ARG, "%s/0: --shard %d differs from the existing mosaic's shards of %lld chunks; %s",
                       image_path, opt->shard, (long long)ex->shard, tail);
    if ((opt->given & TS_FUSE_GIVEN_LEVELS) && opt->levels >= 0 && opt->levels != ex->levels)
        return ts_fail(err, TS_ERR_ARG, "%s: --levels %d differs from the existing mosaic's %d extra level%s; %s",
                       image_path, opt->levels, ex->levels, ex->levels == 1 ? "" : "s", tail);
    if (opt->given & TS_FUSE_GIVEN_CODEC) {
        const tz_codec mine = compressor_of(opt->codec, opt->codec_level);
        if (!same_codec(&mine, &ex->compressor)) {
            char a[64], b[64];
            codec_text(&mine, a, sizeof a);
            codec_text(&ex->compressor, b, sizeof b);
            return ts_fail(err, TS_ERR_ARG, "%s/0: --codec %s differs from the existing mosaic's %s; %s", image_path,
                           a, b, tail);
        }
    }
    return TS_OK;
}

static void scratch_free(fuse_well *W) {
    if (!W->scratch) return;
    for (int i = 0; i < W->nworkers; i++) {
        free(W->scratch[i].num);
        free(W->scratch[i].den);
        free(W->scratch[i].chunk);
        for (int k = 0; k < FUSE_MAX_LEVELS; k++)
            if (W->scratch[i].level[k]) munmap(W->scratch[i].level[k], W->scratch[i].level_bytes[k]);
    }
    free(W->scratch);
    W->scratch = NULL;
}

static ts_status scratch_alloc(fuse_well *W, ts_error *err) {
    W->scratch = calloc((size_t)W->nworkers, sizeof *W->scratch);
    if (!W->scratch) return ts_fail(err, TS_ERR_NOMEM, "worker buffers");
    const int64_t B = W->L.block;
    for (int i = 0; i < W->nworkers; i++) {
        fuse_scratch *s = &W->scratch[i];
        s->num = malloc((size_t)(fuse_row_group(B) * B) * sizeof(float));
        s->den = malloc((size_t)(fuse_row_group(B) * B) * sizeof(float));
        s->chunk = malloc((size_t)(W->L.chunk * W->L.chunk) * W->out_elem);
        if (!s->num || !s->den || !s->chunk) goto nomem;
        /* The block buffers (level[]) are mapped by the worker at its first
         * block (blend.c), in parallel and while other workers read. */
    }
    return TS_OK;
nomem:
    return ts_fail(err, TS_ERR_NOMEM, "worker buffers for blocks of %lld px", (long long)B);
}

/* Pass 1, for every well before anything is written: tiles matched and
 * measured, canvas checked, an existing --t-out target checked. */
static ts_status well_prepare(fuse_well *Wp, const ts_fuse_options *opt, const ts_plate *plate,
                              int w, const ts_well_shifts *ws, const ts_orientation *orient,
                              const char *sub, ts_pool *pool, ts_error *err) {
    const ts_well_info *well = &plate->wells[w];
    fuse_well W;
    memset(&W, 0, sizeof W);
    W.opt = opt;
    W.plate = plate;
    W.w = w;
    W.orient = *orient;
    W.K = ts_fuse_cpu_kernels();
    W.format = opt->format;
    /* A label image (sub: one of the fields' NGFF labels) keeps its
     * tiles' dtype (fuse_label_check_tiles); up to 4 bytes until known. */
    W.label = opt->blend == TS_BLEND_LABEL || sub || fuse_label_plate(plate, w);
    if (sub) snprintf(W.sub, sizeof W.sub, "%s", sub);
    W.out_dtype = W.label ? TS_UINT32 : opt->dtype;
    W.out_elem = ts_dtype_size(W.out_dtype);
    W.nworkers = ts_pool_size(pool);
    char image_path[4200];
    snprintf(image_path, sizeof image_path, "%s/%s/0%s%s", opt->output, well->path, sub ? "/" : "", sub ? sub : "");

    ts_status st = fuse_well_tiles(&W, ws, pool, err);
    if (st == TS_OK && W.label) st = fuse_label_check_tiles(&W, err);
    if (st == TS_OK) st = fuse_canvas(W.tiles, W.ntiles, &W.canvas_h, &W.canvas_w, err);
    if (st == TS_OK) st = fuse_tile_image_meta(&W, 0, &W.image_meta, err);
    if (st == TS_OK && opt->t_out >= 0) st = peek_existing(image_path, &W.existing, err);
    if (st == TS_OK && W.existing.present && (W.existing.H < W.canvas_h || W.existing.W < W.canvas_w))
        st = ts_fail(err, TS_ERR_ARG, "%s/0: existing mosaic of %lldx%lld px is smaller than this "
                     "timepoint's canvas of %lldx%lld px", image_path, (long long)W.existing.H,
                     (long long)W.existing.W, (long long)W.canvas_h, (long long)W.canvas_w);
    if (st == TS_OK && opt->t_out >= 0 && opt->t_in >= W.L.T)
        st = ts_fail(err, TS_ERR_ARG, "%s: --t-in %d, but its tiles have %lld timepoint%s (--tcz %s)",
                     image_path, opt->t_in, (long long)W.L.T, W.L.T == 1 ? "" : "s",
                     opt->tcz == TS_TCZ_MAX ? "max" : "min");
    /* The rest of fuse_output_open's checks, here so that a mismatch in a
     * later well stops the run before an earlier one is written. */
    if (st == TS_OK && W.existing.present &&
        (W.existing.dtype != W.out_dtype || W.existing.C != W.L.C || W.existing.Z != W.L.Z ||
         W.existing.T <= opt->t_out))
        st = ts_fail(err, TS_ERR_ARG, "%s/0: existing mosaic is %s with T=%lld, C=%lld, Z=%lld; this "
                     "run writes %s with C=%lld, Z=%lld at T index %d", image_path,
                     ts_dtype_name(W.existing.dtype), (long long)W.existing.T, (long long)W.existing.C,
                     (long long)W.existing.Z, ts_dtype_name(W.out_dtype), (long long)W.L.C,
                     (long long)W.L.Z, opt->t_out);
    if (st == TS_OK && W.existing.present) st = check_given_layout(opt, &W.existing, image_path, err);
    if (st) {
        free(W.tiles);
        if (err && !strstr(err->message, well->path)) ts_fail_context(err, st, "well %s", well->path);
        return st;
    }
    *Wp = W;
    return TS_OK;
}

/* This rank's bands of every (t, z) through the pipeline (all of them in
 * one process). */
static ts_status run_bands(fuse_well *W, const fuse_sizing *sz, size_t usable, ts_pool *pool,
                           fuse_pipeline_stats *stats, ts_error *err) {
    /* Blocks blended at once: the workers, as far as --memory holds their
     * block buffers (the layout does not depend on the threads, so with
     * many threads the memory may hold fewer blocks than there are
     * workers; the others read and encode). */
    int max_blocks = fuse_blocks_in_flight(sz, W->L.block, usable);
    if (max_blocks > W->nworkers) max_blocks = W->nworkers;
    size_t fixed = (size_t)max_blocks * fuse_block_bytes(sz, W->L.block);
    /* What the worker buffers leave of --memory bounds the tile strips held
     * (at least a quarter of it: the block size was chosen to fit). */
    size_t budget = usable > fixed + usable / 4 ? usable - fixed : usable / 4;
    /* Of that, an eighth keeps freed strip mappings for reuse and an eighth
     * keeps the planes of tiles that span two bands (blend.c); the strips
     * held get the rest, so strips and both pools together stay within it
     * (the pools filling up to caps outside the budget made peak RSS grow
     * with the canvas until they were full). */
    W->recycle_cap = budget / 8;
    W->kept_cap = budget / 8;
    budget -= W->recycle_cap + W->kept_cap;
    fuse_stage_fns fns;
    fuse_stage_fns_init(W, &fns);
    /* This rank's blocks (all of them in one process): runs of blocks of
     * about equal work, not whole bands: 5 bands left 2 ranks 43% and 57%
     * of the work (docs/fuse.md). */
    int64_t g0 = 0, g1 = 0;
    ts_status sst =
        fuse_rank_blocks(W->plan, W->tiles, ts_dist_rank(W->opt->dist), ts_dist_size(W->opt->dist), &g0, &g1, err);
    if (sst) return sst;
    W->block_begin = g0, W->block_end = g1;
    if (W->opt->resume) {
        ts_status st = fuse_resume_scan(W, pool, err);
        if (st) return st;
    }
    char stage[320];
    snprintf(stage, sizeof stage, "fuse %s%s%s (well %d of %d)", W->plate->wells[W->w].path, W->sub[0] ? " " : "",
             W->sub, W->run_index + 1,
             W->run_count);
    return fuse_pipeline_run_blocks(W->plan, W->nt * W->L.Z, g0, g1, &fns, pool, budget, max_blocks,
                                    W->opt->progress, W->opt->progress_user, stage, stats, err);
}

static ts_status write_image_meta(const fuse_well *W, const char *image_path, ts_error *err) {
    const int64_t C = W->L.C;
    ts_image_meta im = W->image_meta;
    if (im.nchannels > C) im.nchannels = (int)C;
    for (int c = im.nchannels; c < C && c < TS_MAX_CHANNELS; c++) {
        snprintf(im.channel_labels[c], sizeof im.channel_labels[c], "Channel %d", c);
        im.channel_colors[c][0] = '\0';
    }
    im.nchannels = (int)(C < TS_MAX_CHANNELS ? C : TS_MAX_CHANNELS);
    if (W->label) return fuse_label_write_meta(W, image_path, &im, err);
    /* The display window from what was written (viewer.c), not the tiles'. */
    ts_status wst = fuse_window(W, &im, err);
    if (wst) return wst;
    return ts_image_write_meta(image_path, W->format, &im, W->L.levels + 1, err);
}

/* Strips read and blocks written by all ranks; the largest peak. */
static ts_status sum_stats(const ts_dist *dist, fuse_pipeline_stats *stats, int64_t *resumed, ts_error *err) {
    int64_t v[4] = {stats->strips_loaded, stats->blocks_done, (int64_t)stats->peak_strip_bytes, *resumed};
    const ts_dist_op op[4] = {TS_DIST_SUM, TS_DIST_SUM, TS_DIST_MAX, TS_DIST_SUM};
    ts_status st = ts_dist_reduce(dist, v, op, 4, err);
    stats->strips_loaded = v[0], stats->blocks_done = v[1];
    stats->peak_strip_bytes = (size_t)v[2];
    *resumed = v[3];
    return st;
}

/* Between the passes, for every well before anything is written: its
 * block layout and units. The layout depends on the canvas, the options
 * and layout_memory (the first rank's --memory under MPI), never on the
 * threads or ranks, so every run derives the same store. */
static ts_status well_layout(fuse_well *W, size_t layout_memory, ts_error *err) {
    const ts_fuse_options *opt = W->opt;
    const existing_out ex = W->existing;
    const int64_t T = W->L.T, C = W->L.C, Z = W->L.Z;
    fuse_sizing sz = {
        .canvas_h = W->canvas_h, .canvas_w = W->canvas_w, .C = C, .out_elem = W->out_elem,
        .chunk = opt->chunk, .shard = opt->shard, .levels = opt->levels,
        .memory = fuse_usable_memory(layout_memory),
    };
    for (int i = 0; i < W->ntiles; i++) {
        if (W->tiles[i].h > sz.tile_h) sz.tile_h = W->tiles[i].h;
        if (W->tiles[i].w > sz.tile_w) sz.tile_w = W->tiles[i].w;
    }
    if (ex.present) {
        sz.canvas_h = ex.H, sz.canvas_w = ex.W;
        sz.chunk = (int)ex.chunk;
        /* A 0.4 store records no block (ex.shard 0), only each level's
         * chunks, gcd(chunk, block >> k): a --shard given is the block of
         * the run that made it (derived from the canvas instead, a store
         * made with --shard 1 --levels 2 came out with other lower-level
         * chunks and was refused whatever the flags). fuse_output_open
         * compares every level's chunks. */
        sz.shard = ex.shard > 0 ? (int)ex.shard : (opt->given & TS_FUSE_GIVEN_SHARD) ? opt->shard : 0;
        sz.levels = ex.levels;
        W->format = ex.zarr_format == 2 ? TS_OME_04 : TS_OME_05;
    }
    ts_status st = fuse_layout_init(&W->L, &sz, err);
    W->L.C = C, W->L.Z = Z;
    if (opt->t_out >= 0) {
        W->nt = 1, W->t_in0 = opt->t_in, W->t_out0 = opt->t_out;
        W->L.T = ex.present ? ex.T : opt->t_out + 1;
    } else {
        W->nt = T, W->t_in0 = 0, W->t_out0 = 0;
        W->L.T = T;
    }
    W->sizing = sz;
    if (st && err && !strstr(err->message, W->plate->wells[W->w].path))
        ts_fail_context(err, st, "well %s", W->plate->wells[W->w].path);
    return st;
}

/* Pass 2: fuse one prepared well (frees its tiles). Under MPI every rank
 * runs it: the first creates the arrays, each fuses its own bands, the first
 * writes the image metadata once all are in and swaps a replacement in
 * (docs/mpi.md). The ts_dist_agree calls are reached by every rank whatever
 * failed where (mpi/dist.h). guard (the first rank's; NULL on the others)
 * learns when the well's writes begin, says where they go, and swaps: a
 * failure leaves an existing image as it was. */
static ts_status well_run(fuse_well *Wp, ts_pool *pool, fuse_guard *guard, int index, ts_fuse_result *res,
                          ts_error *err) {
    fuse_well W = *Wp;
    const ts_fuse_options *opt = W.opt;
    const ts_plate *plate = W.plate;
    const int w = W.w;
    const ts_well_info *well = &plate->wells[w];
    pthread_mutex_init(&W.recycle_mu, NULL);
    char image_path[4200];
    snprintf(image_path, sizeof image_path, "%s/%s/0%s%s", opt->output, well->path, W.sub[0] ? "/" : "", W.sub);
    const ts_dist *dist = opt->dist;
    const bool first = ts_dist_rank(dist) == 0;
    fuse_pipeline_stats stats = {0};
    /* This rank's budget is its own --memory (the layout is the first rank's). */
    fuse_sizing sz = W.sizing;
    size_t usable = fuse_usable_memory(opt->memory);

    ts_status st = fuse_weights_init(&W, err);
    /* The weights are held for the whole well: the rest of the budget is
     * what the blocks and strips get (fuse_well_tiles checked they fit). */
    usable = usable > fuse_weights_bytes(&W) ? usable - fuse_weights_bytes(&W) : 0;
    /* Writing begins. A mosaic replacing an existing image is built from
     * scratch in a temporary directory beside it (the guard's choice), so a
     * re-run gives the same store as a fresh one (no stale chunks of other
     * layouts) and a failure leaves the old image as it was. */
    char write_path[4400];
    snprintf(write_path, sizeof write_path, "%s", image_path);
    if (st == TS_OK && guard) st = fuse_guard_start_well(guard, index, write_path, sizeof write_path, err);
    if (st == TS_OK && first) st = fuse_output_open(&W, write_path, true, err);
    /* The other ranks open the arrays once the first has created them, at
     * the path it chose. */
    st = ts_dist_agree(dist, st, err);
    /* Past the agreement any rank may write (the first rank's guard). */
    if (st == TS_OK && guard) fuse_guard_writing(guard, index);
    if (st == TS_OK) st = ts_dist_bcast(dist, write_path, sizeof write_path, 0, err);
    if (st == TS_OK && !first) st = fuse_output_open(&W, write_path, false, err);
    if (st == TS_OK) st = fuse_plan_build(&W.L, W.tiles, W.ntiles, &W.plan, err);
    if (st == TS_OK) st = scratch_alloc(&W, err);
    if (st == TS_OK) st = fuse_gpu_start(&W, err);
    if (st == TS_OK) st = run_bands(&W, &sz, usable, pool, &stats, err);
    /* Image metadata last, once every rank's data is in: a mosaic is only
     * advertised once complete. */
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK && first) st = write_image_meta(&W, write_path, err);
    st = ts_dist_agree(dist, st, err);
    /* Complete: the first rank alone swaps a replacement in (every rank
     * has finished writing it), and all learn whether that worked. */
    if (st == TS_OK && guard) st = fuse_guard_finish_well(guard, index, err);
    st = ts_dist_agree(dist, st, err);
    int64_t resumed = W.resume_blocks_kept;
    if (st == TS_OK) st = sum_stats(dist, &stats, &resumed, err);
    if (st) goto done;

    if (res) {
        if (!W.sub[0]) { /* a label image of the fields is part of its well */
            res->wells++;
            res->tiles += W.ntiles;
        }
        res->strips_read += stats.strips_loaded;
        res->blocks_written += stats.blocks_done - resumed;
        res->output_pixels += W.L.canvas_h * W.L.canvas_w * W.L.C * W.L.Z * W.nt;
        res->blocks_resumed += resumed;
        res->canvas_h = W.L.canvas_h;
        res->canvas_w = W.L.canvas_w;
        res->chunk = (int)W.L.chunk;
        res->shard = (int)(W.L.block / W.L.chunk);
        if (stats.peak_strip_bytes > res->peak_strip_bytes) res->peak_strip_bytes = stats.peak_strip_bytes;
        if (W.gpu) res->device_used = TS_DEVICE_GPU;
    }
done:
    fuse_gpu_stop(&W);
    fuse_recycle_drain(&W);
    pthread_mutex_destroy(&W.recycle_mu);
    scratch_free(&W);
    fuse_plan_free(W.plan);
    fuse_output_close(&W);
    fuse_weights_free(&W);
    fuse_resume_free(&W);
    free(W.tiles);
    Wp->tiles = NULL;
    if (st && err && !strstr(err->message, well->path)) ts_fail_context(err, st, "well %s", well->path);
    return st;
}

/* Plate metadata (on the first rank, after every well): this run's wells;
 * with --t-out into an existing plate, its wells plus those this run added
 * (left as it is when none). */
static ts_status write_plate_meta(const ts_fuse_options *opt, const ts_plate *plate, const char **wells,
                                  int nwells, ts_error *err) {
    ts_status st = TS_OK;
    const char **all_wells = NULL;
    ts_plate *out_plate = NULL;
    char probe[4200], probe2[4200];
    snprintf(probe, sizeof probe, "%s/zarr.json", opt->output);
    snprintf(probe2, sizeof probe2, "%s/.zattrs", opt->output);
    static const char *const positions[] = {"0"};
    ts_plate_layout layout = {
        .path = opt->output,
        .version = opt->format,
        .name = plate->name[0] ? plate->name : NULL,
        .nwells = nwells,
        .wells = wells,
        .npositions = 1,
        .positions = positions,
        .field_count = 1,
    };
    if (opt->t_out >= 0 && (ts_path_exists(probe) || ts_path_exists(probe2))) {
        if ((st = ts_plate_open(opt->output, &out_plate, err)) != TS_OK) goto done;
        all_wells = calloc((size_t)(out_plate->nwells + nwells) + 1, sizeof *all_wells);
        if (!all_wells) { st = ts_fail(err, TS_ERR_NOMEM, "fuse: wells"); goto done; }
        int nall = 0;
        for (int i = 0; i < out_plate->nwells; i++) all_wells[nall++] = out_plate->wells[i].path;
        for (int i = 0; i < nwells; i++) {
            int k = 0;
            while (k < out_plate->nwells && strcmp(all_wells[k], wells[i]) != 0) k++;
            if (k == out_plate->nwells) all_wells[nall++] = wells[i];
        }
        if (nall == out_plate->nwells) goto done;
        layout.version = out_plate->version;
        layout.name = out_plate->name[0] ? out_plate->name : layout.name;
        layout.nwells = nall;
        layout.wells = all_wells;
    }
    st = ts_plate_write_layout(&layout, err);
done:
    free(all_wells);
    ts_plate_close(out_plate);
    return st;
}

ts_status ts_fuse_run(const ts_fuse_options *opt, ts_fuse_result *result, ts_error *err) {
    ts_fuse_result local;
    ts_fuse_result *res = result ? result : &local;
    memset(res, 0, sizeof *res);
    const ts_dist *dist = opt->dist;
    const bool first = ts_dist_rank(dist) == 0;
    ts_status st = check_options(opt, err);
    ts_shifts *shifts = NULL;
    ts_plate *plate = NULL;
    ts_pool *pool = NULL;
    const char **wells = NULL;
    fuse_well *prepared = NULL;
    int nprepared = 0, nalloc = 0;
    char (*label_names)[TS_MAX_LABEL_IMAGES][TS_LABEL_NAME_MAX] = NULL;
    fuse_guard guard = {0};
    bool guarded = false;
    int nwells = 0;
    /* Up to the agreement below every rank reads and checks on its own
     * (failures jump there, not to done: see mpi/dist.h). */
    /* The first rank claims the output for the whole run; every rank then
     * writes where it says (a new store is built beside the output). */
    ts_output_lock lock = {0};
    ts_staged stage = {0};
    char root[4400];
    snprintf(root, sizeof root, "%s", opt->output);
    int32_t format = (int32_t)opt->format;
    if (st == TS_OK && first) st = claim_output(opt, &lock, &stage, root, sizeof root, &format, err);
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK) st = ts_dist_bcast(dist, root, sizeof root, 0, err);
    if (st == TS_OK) st = ts_dist_bcast(dist, &format, sizeof format, 0, err);
    ts_fuse_options run = *opt;
    run.output = root;
    run.format = (ts_ome_version)format;
    opt = &run;
    if (st) goto prepared;
    if ((st = ts_shifts_read(opt->shifts, &shifts, err)) != TS_OK) goto prepared;
    if ((st = ts_plate_open(opt->input, &plate, err)) != TS_OK) goto prepared;
    if ((st = ts_plate_filter_wells(plate, opt->wells, err)) != TS_OK) goto prepared;
    if ((st = fuse_check_wells(opt, plate, shifts, err)) != TS_OK) goto prepared;

    /* Orientation: the flags given, else what the shifts file recorded. */
    ts_orientation none = {false, false, 0};
    if (shifts->has_orientation) res->file_orientation = shifts->orientation;
    if (opt->orientation_given) {
        res->orientation = opt->orientation;
        res->orientation_mismatch = shifts->has_orientation && !same_orientation(&opt->orientation, &shifts->orientation);
    } else {
        res->orientation = shifts->has_orientation ? shifts->orientation : none;
        res->orientation_from_file = shifts->has_orientation;
    }

    pool = ts_pool_create(opt->threads);
    wells = calloc((size_t)plate->nwells + 1, sizeof *wells);
    if (!pool || !wells) { st = ts_fail(err, TS_ERR_NOMEM, "fuse: thread pool"); goto prepared; }
    prepared = calloc((size_t)plate->nwells + 1, sizeof *prepared);
    nalloc = plate->nwells + 1;
    label_names = calloc((size_t)plate->nwells + 1, sizeof *label_names);
    if (!prepared || !label_names) { st = ts_fail(err, TS_ERR_NOMEM, "fuse: wells"); goto prepared; }
    for (int w = 0; w < plate->nwells; w++) {
        int sw = ts_shifts_find_well(shifts, plate->wells[w].path); /* >= 0: fuse_check_wells */
        /* The well's image, then the label images its fields have (NGFF
         * labels of the first position), each fused as labels into the
         * mosaic's labels/<name> (label.c). */
        int nl = 0, image = nprepared;
        char names_path[4300];
        ts_plate_image_path(plate, w, 0, names_path, sizeof names_path);
        if ((st = ts_labels_list(names_path, label_names[w], TS_MAX_LABEL_IMAGES, &nl, err)) != TS_OK) goto prepared;
        if (nprepared + 1 + nl > nalloc) {
            int want = (nprepared + 1 + nl) * 2;
            fuse_well *grown = realloc(prepared, (size_t)want * sizeof *prepared);
            if (!grown) { st = ts_fail(err, TS_ERR_NOMEM, "fuse: wells"); goto prepared; }
            prepared = grown, nalloc = want;
        }
        for (int l = -1; l < nl; l++) {
            char sub[160];
            if (l >= 0) snprintf(sub, sizeof sub, "labels/%s", label_names[w][l]);
            st = well_prepare(&prepared[nprepared], opt, plate, w, &shifts->wells[sw], &res->orientation,
                              l >= 0 ? sub : NULL, pool, err);
            if (st) goto prepared;
            fuse_well *P = &prepared[nprepared++];
            P->run_index = nwells;
            P->label_index = l, P->nlabel_names = nl, P->label_names = (const char (*)[TS_LABEL_NAME_MAX])label_names[w];
            if ((st = fuse_check_tile_shape(P, shifts, err)) != TS_OK) goto prepared;
            if (l >= 0 && (st = fuse_label_check_shapes(&prepared[image], P, err)) != TS_OK) goto prepared;
        }
        wells[nwells++] = plate->wells[w].path;
    }
    if (nwells == 0)
        st = ts_fail(err, TS_ERR_FORMAT, "plate %s has no well to fuse", opt->input);
prepared:
    st = ts_dist_agree(dist, st, err);
    /* Every well's layout, before anything is written. It depends on
     * --memory: every rank takes the first rank's, so all derive one. */
    /* One canvas for every well (and a pyramid to 1024 px unless --levels
     * says), so viewers can show the plate (viewer.h). */
    if (st == TS_OK) fuse_plate_canvas(prepared, nprepared, &run.levels);
    uint64_t layout_memory = opt->memory;
    if (st == TS_OK) st = ts_dist_bcast(dist, &layout_memory, sizeof layout_memory, 0, err);
    for (int i = 0; st == TS_OK && i < nprepared; i++) st = well_layout(&prepared[i], (size_t)layout_memory, err);
    st = ts_dist_agree(dist, st, err);
    if (st) goto done;
    /* Nothing is written before this point: from here a failure undoes
     * what the run wrote (run_guard.h). Only the first rank guards: it
     * creates the store, and it undoes a failed run once every rank has
     * agreed on the failure (so none is still writing). */
    if (first && stage.dir[0]) st = manifest_step(opt, res, prepared, nprepared, &stage, err);
    if (st == TS_OK && first && opt->resume) {
        /* The interrupted run's store is written on in place, its blocks
         * checked (resume.c); only its writers' dead temporaries go. */
        st = ts_sweep_temp_files(opt->output, true, NULL, err);
    } else if (st == TS_OK && first) {
        st = fuse_guard_begin(&guard, opt, wells, nwells, err);
        guarded = st == TS_OK;
    }
    st = ts_dist_agree(dist, st, err);
    /* A well's label images after its image: written into it, the
     * guard's (staged) build in a new store, else the swapped-in image. */
    for (int i = 0; st == TS_OK && i < nprepared; i++) {
        prepared[i].run_count = nwells;
        fuse_guard *g = first && guarded && !prepared[i].sub[0] ? &guard : NULL;
        st = well_run(&prepared[i], pool, g, prepared[i].run_index, res, err);
    }
    if (st) goto done;
    if (first) st = write_plate_meta(opt, plate, wells, nwells, err);
    /* A new store, complete: into place. */
    if (st == TS_OK && first && stage.dir[0]) st = ts_staged_commit(&stage, err);
    st = ts_dist_agree(dist, st, err);
done:
    if (st && guarded) fuse_guard_fail(&guard, st, err);
    fuse_guard_free(&guard);
    if (first) {
        if (st && stage.keep && stage.dir[0] && ts_path_exists(stage.dir) && err) {
            size_t len = strlen(err->message);
            snprintf(err->message + len, sizeof err->message - len, "; the interrupted run's store is kept in %s "
                     "for another --resume", stage.dir);
        }
        if (st) ts_staged_abort(&stage, err);
        ts_output_lock_release(&lock);
    }

    for (int i = 0; prepared && i < nprepared; i++) free(prepared[i].tiles);
    free(prepared);
    free(label_names);
    free(wells);
    ts_pool_destroy(pool);
    ts_plate_close(plate);
    ts_shifts_free(shifts);
    return st;
}
