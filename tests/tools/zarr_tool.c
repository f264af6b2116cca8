/* Test-only driver of tessera's zarr layer for the interop tests:
 *
 *   zarr_tool write-random PATH --out EXPECTED.bin [--format 2|3] [--dtype uint16]
 *             [--shape 37,50] [--chunk 16,16] [--shard 32,32] [--codec zstd]
 *             [--sep /|.] [--fill V] [--seed N] [--index-start]
 *       creates an array (with --shard: v3 sharded, --chunk = inner chunk),
 *       fills it with seeded random values where about a quarter of the
 *       (inner) chunks are left at the fill value, writes every storage block,
 *       and writes the whole array as raw native C-order bytes to EXPECTED.bin.
 *   zarr_tool dump PATH OUT.bin
 *       reads the whole array into OUT.bin (raw native C order) and prints
 *       {"shape": [...], "dtype": "...", "zarr_format": N, "sharded": b}.
 *   On failure: the ts_error message on stderr, exit status 1 (2 for usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "zarr/zarr.h"

static int usage(const char *msg) {
    fprintf(stderr, "zarr_tool: %s\n", msg);
    return 2;
}

static int parse_list(const char *s, int64_t *v) {
    int n = 0;
    while (s && *s && n < TZ_MAX_DIM) {
        char *end;
        v[n++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

static uint64_t rng_state;
static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void set_codec(tz_array_meta *m, const char *name) {
    ts_codec c;
    if (ts_codec_from_name(name, &c) == 0) { tz_meta_set_codec(m, c); return; }
    /* Extra chains for tests: zlib, crc32c, blosc-zstd-bit, zstd-crc32c. */
    tz_meta_set_codec(m, TS_CODEC_NONE);
    tz_codec_chain *ch = m->sharded ? &m->sharding.codecs : &m->codecs;
    tz_codec x;
    memset(&x, 0, sizeof x);
    if (strcmp(name, "zlib") == 0) { x.id = TZ_CODEC_ZLIB; x.level = 5; ch->c[ch->n++] = x; }
    else if (strcmp(name, "crc32c") == 0) { x.id = TZ_CODEC_CRC32C; ch->c[ch->n++] = x; }
    else if (strcmp(name, "zstd-crc32c") == 0) {
        x.id = TZ_CODEC_ZSTD; x.level = 1; ch->c[ch->n++] = x;
        memset(&x, 0, sizeof x); x.id = TZ_CODEC_CRC32C; ch->c[ch->n++] = x;
    } else if (strncmp(name, "blosc-", 6) == 0) {
        /* blosc-CNAME-SHUFFLE, shuffle none|byte|bit */
        char cname[16] = "";
        const char *p = name + 6, *dash = strchr(p, '-');
        size_t len = dash ? (size_t)(dash - p) : strlen(p);
        if (len >= sizeof cname) len = sizeof cname - 1;
        memcpy(cname, p, len);
        x.id = TZ_CODEC_BLOSC; x.level = 5;
        strcpy(x.cname, cname);
        x.shuffle = !dash ? TZ_SHUFFLE_BYTE : strcmp(dash + 1, "bit") == 0 ? TZ_SHUFFLE_BIT
                  : strcmp(dash + 1, "none") == 0 ? TZ_SHUFFLE_NONE : TZ_SHUFFLE_BYTE;
        ch->c[ch->n++] = x;
    } else {
        fprintf(stderr, "zarr_tool: unknown codec %s\n", name);
        exit(2);
    }
}

static void put_value(ts_dtype dt, void *p, uint64_t r) {
    switch (dt) {
    case TS_FLOAT32: { float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2000.0 - 1000.0); memcpy(p, &f, 4); break; }
    case TS_FLOAT64: { double f = (double)(r >> 11) / 9007199254740992.0 * 2e6 - 1e6; memcpy(p, &f, 8); break; }
    case TS_BOOL: *(unsigned char *)p = r & 1; break;
    default: memcpy(p, &r, ts_dtype_size(dt)); break; /* little-endian hosts: low bytes */
    }
}

static int write_random(int argc, char **argv) {
    if (argc < 3) return usage("write-random PATH --out FILE ...");
    const char *path = argv[2], *out = NULL, *codec = "zstd";
    tz_array_meta m;
    int format = 3;
    int64_t shape[TZ_MAX_DIM] = {37, 50}, chunk[TZ_MAX_DIM] = {16, 16}, shard[TZ_MAX_DIM] = {0};
    int nd = 2, nshard = 0;
    ts_dtype dt = TS_UINT16;
    char sep = 0;
    double fill = 0;
    bool index_start = false;
    rng_state = 1;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--index-start") == 0) { index_start = true; continue; }
        if (!v) return usage("missing value");
        i++;
        if (strcmp(a, "--out") == 0) out = v;
        else if (strcmp(a, "--format") == 0) format = atoi(v);
        else if (strcmp(a, "--dtype") == 0) dt = ts_dtype_from_name(v);
        else if (strcmp(a, "--shape") == 0) nd = parse_list(v, shape);
        else if (strcmp(a, "--chunk") == 0) parse_list(v, chunk);
        else if (strcmp(a, "--shard") == 0) nshard = parse_list(v, shard);
        else if (strcmp(a, "--codec") == 0) codec = v;
        else if (strcmp(a, "--sep") == 0) sep = v[0];
        else if (strcmp(a, "--fill") == 0) fill = atof(v);
        else if (strcmp(a, "--seed") == 0) rng_state = strtoull(v, NULL, 10);
        else return usage(a);
    }
    if (!out || nd <= 0 || dt == TS_DTYPE_INVALID) return usage("bad --out/--shape/--dtype");
    tz_array_meta_init(&m, format);
    m.ndim = nd;
    m.dtype = dt;
    m.fill_value = fill;
    if (sep) m.separator = sep;
    for (int d = 0; d < nd; d++) {
        m.shape[d] = shape[d];
        m.chunk[d] = nshard ? shard[d] : chunk[d];
        if (nshard) m.sharding.inner_chunk[d] = chunk[d];
    }
    m.sharded = nshard > 0;
    m.sharding.index_at_start = index_start;
    set_codec(&m, codec);
    ts_error err;
    tz_array *arr;
    if (tz_array_create(path, &m, &arr, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    /* The whole array, padded to whole blocks. */
    int64_t grid[TZ_MAX_DIM], padded[TZ_MAX_DIM];
    tz_array_grid(arr, grid);
    size_t es = ts_dtype_size(dt), n = 1, np = 1;
    for (int d = 0; d < nd; d++) { padded[d] = grid[d] * m.chunk[d]; n *= (size_t)shape[d]; np *= (size_t)padded[d]; }
    unsigned char fillv[8];
    {
        /* One element of fill via a tiny array read: a missing chunk is fill. */
        int64_t s0[TZ_MAX_DIM] = {0}, c1[TZ_MAX_DIM];
        for (int d = 0; d < nd; d++) c1[d] = 1;
        if (tz_array_read(arr, s0, c1, fillv, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    }
    unsigned char *full = malloc(np * es);
    int64_t idx[TZ_MAX_DIM] = {0};
    for (size_t k = 0; k < np; k++) {
        /* Chunk (inner chunk when sharded) of this element decides emptiness. */
        uint64_t h = 1469598103934665603ull;
        bool inside = true;
        for (int d = 0; d < nd; d++) {
            h = (h ^ (uint64_t)(idx[d] / chunk[d])) * 1099511628211ull;
            inside = inside && idx[d] < shape[d];
        }
        bool empty = ((h >> 17) & 3) == 0;
        if (!inside || empty) memcpy(full + k * es, fillv, es);
        else put_value(dt, full + k * es, rng());
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < padded[d]) break;
            idx[d] = 0;
        }
    }
    /* Write every block, then the unpadded expectation. */
    size_t bn = 1;
    for (int d = 0; d < nd; d++) bn *= (size_t)m.chunk[d];
    unsigned char *blk = malloc(bn * es);
    int64_t b[TZ_MAX_DIM] = {0};
    for (;;) {
        int64_t off[TZ_MAX_DIM];
        for (int d = 0; d < nd; d++) off[d] = b[d] * m.chunk[d];
        /* copy block out of `full` row by row */
        int64_t e[TZ_MAX_DIM] = {0};
        size_t rows = bn / (size_t)m.chunk[nd - 1];
        for (size_t r = 0; r < rows; r++) {
            size_t so = 0;
            for (int d = 0; d < nd; d++) so = so * (size_t)padded[d] + (size_t)(off[d] + e[d]);
            memcpy(blk + r * (size_t)m.chunk[nd - 1] * es, full + so * es, (size_t)m.chunk[nd - 1] * es);
            for (int d = nd - 2; d >= 0; d--) {
                if (++e[d] < m.chunk[d]) break;
                e[d] = 0;
            }
        }
        if (tz_array_write_block(arr, b, blk, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
        int d = nd - 1;
        for (; d >= 0; d--) {
            if (++b[d] < grid[d]) break;
            b[d] = 0;
        }
        if (d < 0) break;
    }
    FILE *f = fopen(out, "wb");
    if (!f) { perror(out); return 1; }
    int64_t i2[TZ_MAX_DIM] = {0};
    size_t rows = n / (size_t)shape[nd - 1];
    for (size_t r = 0; r < rows; r++) {
        size_t so = 0;
        for (int d = 0; d < nd; d++) so = so * (size_t)padded[d] + (size_t)i2[d];
        fwrite(full + so * es, es, (size_t)shape[nd - 1], f);
        for (int d = nd - 2; d >= 0; d--) {
            if (++i2[d] < shape[d]) break;
            i2[d] = 0;
        }
    }
    fclose(f);
    free(blk);
    free(full);
    tz_array_close(arr);
    return 0;
}

static int dump(int argc, char **argv) {
    if (argc < 4) return usage("dump PATH OUT.bin");
    tz_array *a;
    ts_error err;
    if (tz_array_open(argv[2], &a, &err)) {
        fprintf(stderr, "%s: %s\n", ts_status_name(err.code), err.message);
        return 1;
    }
    const tz_array_meta *m = tz_array_get_meta(a);
    size_t n = ts_dtype_size(m->dtype);
    for (int d = 0; d < m->ndim; d++) n *= (size_t)m->shape[d];
    void *buf = malloc(n ? n : 1);
    int64_t start[TZ_MAX_DIM] = {0};
    if (tz_array_read(a, start, m->shape, buf, &err)) {
        fprintf(stderr, "%s: %s\n", ts_status_name(err.code), err.message);
        return 1;
    }
    FILE *f = fopen(argv[3], "wb");
    if (!f || fwrite(buf, 1, n, f) != n) { perror(argv[3]); return 1; }
    fclose(f);
    printf("{\"shape\": [");
    for (int d = 0; d < m->ndim; d++) printf("%s%lld", d ? ", " : "", (long long)m->shape[d]);
    printf("], \"dtype\": \"%s\", \"zarr_format\": %d, \"sharded\": %s}\n", ts_dtype_name(m->dtype),
           m->zarr_format, m->sharded ? "true" : "false");
    free(buf);
    tz_array_close(a);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage("write-random|dump ...");
    if (strcmp(argv[1], "write-random") == 0) return write_random(argc, argv);
    if (strcmp(argv[1], "dump") == 0) return dump(argc, argv);
    return usage("unknown command");
}
