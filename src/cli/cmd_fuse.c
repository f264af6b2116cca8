/* tessera fuse: blend tiles at their positions into an OME-Zarr mosaic. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *FUSE_USAGE =
    "usage: tessera fuse PLATE shifts.yaml -o OUT [options]\n"
    "\n"
    "Blend the tiles of PLATE at the positions in shifts.yaml (total_translation)\n"
    "into one mosaic per well, written as an OME-Zarr plate OUT (image ROW/COL/0).\n"
    "\n"
    "output:\n"
    "  -o, --output OUT       output plate store (required)\n"
    "  --format 0.4|0.5       OME-Zarr version: 0.4 (zarr v2 chunks) or 0.5 (zarr v3\n"
    "                         shards), default 0.5\n"
    "  --dtype uint16|float32 output type, default uint16 (rounded, clamped)\n"
    "  --chunk PX             chunk side (inner chunk for 0.5), default 512\n"
    "  --shard CHUNKS         chunks per shard side (0.5) / per block side (0.4);\n"
    "                         default: up to 64 (4096 chunks), as the canvas and\n"
    "                         --memory allow\n"
    "  --codec NAME[:LEVEL]   zstd|blosc-lz4|blosc-zstd|gzip|none, default\n"
    "                         blosc-zstd:3 (byte shuffle); blosc-lz4 encodes ~8x\n"
    "                         faster, larger files; LEVEL zstd 1-22 (default 3),\n"
    "                         blosc and gzip 1-9 (5)\n"
    "  --levels N             extra pyramid levels (2x mean each); default: down\n"
    "                         to 1024 px on both axes\n"
    "  --t-out T              write this run's timepoint into T index T of OUT\n"
    "                         (created with T+1 timepoints when new)\n"
    "  --t-in T               with --t-out: the input timepoint written, default 0\n"
    "blending:\n"
    "  --blend edt|average|label\n"
    "                         weights: distance to the tile border ^ exponent\n"
    "                         (default edt), or 1; label: integer label images,\n"
    "                         each pixel the label of the covering tile deepest\n"
    "                         inside it, dtype kept, pyramid by 2x2 mode (the\n"
    "                         fields' NGFF labels are always fused so)\n"
    "  --exponent E           edt exponent in [0, 6.32], default 1\n"
    "  --tcz min|max          tiles with different T/C/Z: truncate (min, default)\n"
    "                         or zero-pad (max)\n"
    "tiles:\n"
    "  --flipud, --fliplr, --rot90 K\n"
    "                         tile orientation (flipud, then fliplr, then rot90);\n"
    "                         default: as recorded in shifts.yaml\n"
    "  --wells LIST           only these wells, e.g. A/1,B/3\n"
    "running:\n"
    "  --threads N            worker threads, default all cores\n"
    "  --memory BYTES         working-memory bound (e.g. 2G, 512M), default 2G\n"
    "  --device cpu|gpu|auto  where blocks are blended (docs/gpu.md): cpu (default),\n"
    "                         gpu (an error without a CUDA device), auto (the GPU\n"
    "                         if there is one); the same bytes on either\n"
    "  --resume               continue a killed run that was writing the new store\n"
    "                         OUT (same options and inputs): its complete blocks are\n"
    "                         checked and kept, the rest written\n"
    "  --progress MODE        auto (default: a bar on a terminal, else a log line\n"
    "                         every 15 s and at each stage's end), bar,\n"
    "                         log[:SECONDS], none\n"
    "  --json                 print a JSON summary on stdout\n"
    "  -q, --quiet            no summary on stderr (warnings and errors still)\n"
    "  -h, --help             this help\n";

int cli_fuse_option(const char *cmd, int argc, char **argv, int *i, ts_fuse_options *o) {
    const char *a = argv[*i];
    const char *v;
#define VALUE() do { if (!(v = cli_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "--format")) {
        VALUE();
        if (!cli_format(cmd, v, &o->format)) return -1;
        o->given |= TS_FUSE_GIVEN_FORMAT;
    } else if (!strcmp(a, "--blend")) {
        VALUE();
        static const char *const NAMES[] = {"edt", "average", "label"};
        static const int VALUES[] = {TS_BLEND_EDT, TS_BLEND_AVERAGE, TS_BLEND_LABEL};
        int x;
        if (!cli_choice(cmd, "--blend", v, NAMES, VALUES, 3, &x)) return -1;
        o->blend = (ts_blend)x;
    } else if (!strcmp(a, "--exponent")) {
        VALUE();
        if (!cli_double(cmd, a, v, &o->exponent)) return -1;
        if (o->exponent < 0) { cli_usage_error(cmd, "--exponent: %s is negative", v); return -1; }
    } else if (!strcmp(a, "--dtype")) {
        VALUE();
        static const char *const NAMES[] = {"uint16", "float32"};
        static const int VALUES[] = {TS_UINT16, TS_FLOAT32};
        int x;
        if (!cli_choice(cmd, "--dtype", v, NAMES, VALUES, 2, &x)) return -1;
        o->dtype = (ts_dtype)x;
    } else if (!strcmp(a, "--chunk")) {
        VALUE();
        if (!cli_int(cmd, a, v, 1, 65536, &o->chunk)) return -1;
        o->given |= TS_FUSE_GIVEN_CHUNK;
    } else if (!strcmp(a, "--shard")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 4096, &o->shard)) return -1;
        o->given |= TS_FUSE_GIVEN_SHARD;
    } else if (!strcmp(a, "--codec")) {
        VALUE();
        if (!cli_codec_level(cmd, v, &o->codec, &o->codec_level)) return -1;
        o->given |= TS_FUSE_GIVEN_CODEC;
    } else if (!strcmp(a, "--levels")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 16, &o->levels)) return -1;
        o->given |= TS_FUSE_GIVEN_LEVELS;
    } else if (!strcmp(a, "--tcz")) {
        VALUE();
        static const char *const NAMES[] = {"min", "max"};
        static const int VALUES[] = {TS_TCZ_MIN, TS_TCZ_MAX};
        int x;
        if (!cli_choice(cmd, "--tcz", v, NAMES, VALUES, 2, &x)) return -1;
        o->tcz = (ts_tcz_policy)x;
    } else if (!strcmp(a, "--t-out")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 1000000, &o->t_out)) return -1;
    } else if (!strcmp(a, "--t-in")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 1000000, &o->t_in)) return -1;
    } else if (!strcmp(a, "--memory")) {
        VALUE();
        if (!cli_size(cmd, a, v, &o->memory)) return -1;
    } else if (!strcmp(a, "--resume")) {
        o->resume = true;
    } else if (!strcmp(a, "--device")) {
        VALUE();
        if (!cli_device(cmd, v, &o->device)) return -1;
    } else {
        return 0;
    }
#undef VALUE
    return 1;
}

void cli_fuse_warn(const char *cmd, const ts_fuse_result *r) {
    if (r->orientation_mismatch)
        fprintf(stderr,
                "tessera %s: warning: orientation flags (flipud=%d fliplr=%d rot90=%d) differ from "
                "the shifts file's (flipud=%d fliplr=%d rot90=%d); using the flags given\n",
                cmd, r->orientation.flipud, r->orientation.fliplr, r->orientation.rot90,
                r->file_orientation.flipud, r->file_orientation.fliplr, r->file_orientation.rot90);
}

bool cli_device(const char *cmd, const char *v, ts_device *d) {
    static const char *const NAMES[] = {"cpu", "gpu", "auto"};
    static const int VALUES[] = {TS_DEVICE_CPU, TS_DEVICE_GPU, TS_DEVICE_AUTO};
    int x;
    if (!cli_choice(cmd, "--device", v, NAMES, VALUES, 3, &x)) return false;
    *d = (ts_device)x;
    return true;
}

/* One line on stderr: what was written and in which layout (a --t-out run
 * into an existing mosaic takes that mosaic's chunk and shard: a flag that
 * differs is refused, a flag left out takes them, and the line shows them). */
void cli_fuse_summary(const char *cmd, const char *output, const ts_fuse_result *r, double seconds) {
    fprintf(stderr, "tessera %s: wrote %s: %d well%s, %lld tiles, canvas %lldx%lld px, chunk %d, shard %d, "
            "%lld blocks written", cmd, output, r->wells, r->wells == 1 ? "" : "s", (long long)r->tiles,
            (long long)r->canvas_h, (long long)r->canvas_w, r->chunk, r->shard, (long long)r->blocks_written);
    if (r->blocks_resumed) fprintf(stderr, " (%lld kept from the interrupted run)", (long long)r->blocks_resumed);
    fprintf(stderr, ", %.1f MP in %.2f s on the %s\n", (double)r->output_pixels / 1e6, seconds,
            r->device_used == TS_DEVICE_GPU ? "GPU" : "CPU");
}

json_t *cli_fuse_json(const ts_fuse_result *r, double seconds) {
    json_t *j = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:[I,I], s:i, s:i, s:I, s:{s:b, s:b, s:i}, s:b, s:b, "
                     "s:f, s:f}",
                     "wells", r->wells, "tiles", (json_int_t)r->tiles, "strips_read", (json_int_t)r->strips_read,
                     "blocks_written", (json_int_t)r->blocks_written, "blocks_resumed",
                     (json_int_t)r->blocks_resumed, "output_pixels", (json_int_t)r->output_pixels, "canvas",
                     (json_int_t)r->canvas_h, (json_int_t)r->canvas_w, "chunk", r->chunk, "shard", r->shard,
                     "peak_strip_bytes", (json_int_t)r->peak_strip_bytes,
                     "orientation", "flipud", r->orientation.flipud, "fliplr", r->orientation.fliplr, "rot90",
                     r->orientation.rot90, "orientation_from_file", r->orientation_from_file,
                     "orientation_mismatch", r->orientation_mismatch, "seconds", seconds, "megapixels_per_second",
                     seconds > 0 ? (double)r->output_pixels / 1e6 / seconds : 0.0);
    /* Which device blended (--device auto falls back to the CPU). */
    json_object_set_new(j, "device", json_string(ts_device_name(r->device_used)));
    return j;
}

int cmd_fuse(int argc, char **argv) {
    const char *cmd = "fuse";
    ts_fuse_options o;
    ts_fuse_options_init(&o);
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    cli_common com = {0};
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(FUSE_USAGE, stdout);
            return CLI_OK;
        }
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = true;
            continue;
        }
        int r = cli_fuse_option(cmd, argc, argv, &i, &o);
        if (r == 0) r = cli_common_option(cmd, argc, argv, &i, &com);
        if (r < 0) return CLI_USAGE;
        if (r == 0 && cli_positional(cmd, argv[i], pos, &npos, 2) != CLI_OK) return CLI_USAGE;
    }
    o.output = com.output;
    o.orientation = com.orientation;
    o.orientation_given = com.orientation_given;
    o.wells = com.wells;
    o.threads = com.threads;
    if (npos < 2) return cli_usage_error(cmd, "needs PLATE and shifts.yaml");
    if (!o.output) return cli_usage_error(cmd, "needs -o OUT");
    o.input = pos[0];
    o.shifts = pos[1];
    o.progress = cli_progress;
    o.dist = cli_dist();
    ts_fuse_result res;
    ts_error err;
    double t0 = cli_now();
    if (ts_fuse_run(&o, &res, &err) != TS_OK) return cli_fail(cmd, &err);
    double seconds = cli_now() - t0;
    cli_fuse_warn(cmd, &res);
    if (!quiet) cli_fuse_summary(cmd, o.output, &res, seconds);
    if (com.json) {
        json_t *j = json_pack("{s:o}", "shifts", cli_json_path(o.shifts));
        json_object_update_new(j, cli_fuse_json(&res, seconds)); /* the summary is freed with it */
        cli_json_emit(cmd, o.input, o.output, j);
    }
    return CLI_OK;
}
