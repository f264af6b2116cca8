/* zarr layer: CRC32C, codec round trips, v2/v3 arrays with edge chunks,
 * sharding (hand-built shard, empty sentinel, corrupt/truncated shards). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xorshift.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/pool.h"
#include "zarr/zarr.h"
#include "scratch_dir.h"

SCRATCH_FIXTURES("test_zarr")

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) { return xorshift64(&rng_state); }

/* ----------------------------------------------------------------- crc32c */

static void test_crc32c_vectors(void **state) {
    (void)state;
    assert_int_equal(tz_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(tz_crc32c(0, "", 0), 0);
    unsigned char zeros[32] = {0}, ones[32];
    memset(ones, 0xff, sizeof ones);
    /* RFC 3720 (iSCSI) B.4 test vectors. */
    assert_int_equal(tz_crc32c(0, zeros, 32), 0x8A9136AAu);
    assert_int_equal(tz_crc32c(0, ones, 32), 0x62A8AB43u);
    unsigned char inc[32];
    for (int i = 0; i < 32; i++) inc[i] = (unsigned char)i;
    assert_int_equal(tz_crc32c(0, inc, 32), 0x46DD794Eu);
    /* Incremental equals one-shot. */
    uint32_t c = tz_crc32c(0, "1234", 4);
    assert_int_equal(tz_crc32c(c, "56789", 5), 0xE3069283u);
}

/* ----------------------------------------------------------- codec chain */

static tz_codec codec(tz_codec_id id) {
    tz_codec c;
    memset(&c, 0, sizeof c);
    c.id = id;
    return c;
}

static void roundtrip(const tz_codec_chain *chain, ts_dtype dt, bool be, const char *what) {
    int64_t shape[3] = {5, 7, 9};
    size_t es = ts_dtype_size(dt), n = 5 * 7 * 9;
    unsigned char *in = malloc(n * es), *back = malloc(n * es);
    for (size_t i = 0; i < n * es; i++) in[i] = (unsigned char)((i * 7) % 13 + (rng() % 3));
    void *enc = NULL;
    size_t enc_n = 0;
    ts_error err;
    ts_status st = tz_encode_chunk(chain, dt, be, 3, shape, in, &enc, &enc_n, &err);
    if (st) fail_msg("%s: encode: %s", what, err.message);
    st = tz_decode_chunk(chain, dt, be, 3, shape, enc, enc_n, back, &err);
    if (st) fail_msg("%s: decode: %s", what, err.message);
    if (memcmp(in, back, n * es) != 0) fail_msg("%s: round trip differs", what);
    free(enc);
    free(in);
    free(back);
}

static void test_codec_roundtrips(void **state) {
    (void)state;
    tz_codec_chain ch;
    memset(&ch, 0, sizeof ch);
    roundtrip(&ch, TS_UINT16, false, "none");
    roundtrip(&ch, TS_UINT16, true, "none big-endian");
    ch.n = 1;
    ch.c[0] = codec(TZ_CODEC_ZSTD);
    ch.c[0].level = 3;
    roundtrip(&ch, TS_UINT16, false, "zstd");
    ch.c[0].checksum = true;
    roundtrip(&ch, TS_FLOAT64, false, "zstd checksum");
    ch.c[0] = codec(TZ_CODEC_GZIP);
    ch.c[0].level = 5;
    roundtrip(&ch, TS_INT32, false, "gzip");
    ch.c[0] = codec(TZ_CODEC_ZLIB);
    ch.c[0].level = 1;
    roundtrip(&ch, TS_INT32, true, "zlib big-endian");
    ch.c[0] = codec(TZ_CODEC_CRC32C);
    roundtrip(&ch, TS_UINT8, false, "crc32c");
    const char *cnames[] = {"lz4", "zstd", "blosclz", "zlib", "lz4hc"};
    for (int k = 0; k < 5; k++)
        for (int sh = 0; sh <= 2; sh++) {
            ch.c[0] = codec(TZ_CODEC_BLOSC);
            strcpy(ch.c[0].cname, cnames[k]);
            ch.c[0].level = 5;
            ch.c[0].shuffle = (tz_shuffle)sh;
            char what[64];
            snprintf(what, sizeof what, "blosc %s shuffle %d", cnames[k], sh);
            roundtrip(&ch, TS_UINT16, false, what);
        }
    /* transpose + big-endian bytes + zstd + crc32c */
    ch.n = 4;
    ch.c[0] = codec(TZ_CODEC_TRANSPOSE);
    ch.c[0].order[0] = 2; ch.c[0].order[1] = 0; ch.c[0].order[2] = 1;
    ch.c[1] = codec(TZ_CODEC_BYTES);
    ch.c[1].big_endian = true;
    ch.c[2] = codec(TZ_CODEC_ZSTD);
    ch.c[3] = codec(TZ_CODEC_CRC32C);
    roundtrip(&ch, TS_FLOAT32, false, "transpose+bytes(big)+zstd+crc32c");
}

static void test_transpose_layout(void **state) {
    (void)state;
    /* transpose order [1,0] of a 2x3 array stores it as its 3x2 transpose. */
    tz_codec_chain ch = {0};
    ch.n = 1;
    ch.c[0] = codec(TZ_CODEC_TRANSPOSE);
    ch.c[0].order[0] = 1;
    ch.c[0].order[1] = 0;
    int64_t shape[2] = {2, 3};
    uint8_t a[6] = {0, 1, 2, 3, 4, 5}, expect[6] = {0, 3, 1, 4, 2, 5};
    void *enc;
    size_t n;
    ts_error err;
    assert_int_equal(tz_encode_chunk(&ch, TS_UINT8, false, 2, shape, a, &enc, &n, &err), TS_OK);
    assert_int_equal(n, 6);
    assert_memory_equal(enc, expect, 6);
    free(enc);
}

static void test_big_endian_bytes(void **state) {
    (void)state;
    tz_codec_chain ch = {0};
    int64_t shape[1] = {2};
    uint16_t v[2] = {0x0102, 0x0304};
    void *enc;
    size_t n;
    ts_error err;
    assert_int_equal(tz_encode_chunk(&ch, TS_UINT16, true, 1, shape, v, &enc, &n, &err), TS_OK);
    const unsigned char expect[4] = {1, 2, 3, 4};
    assert_memory_equal(enc, expect, 4);
    free(enc);
}

static void test_crc32c_codec_detects_corruption(void **state) {
    (void)state;
    tz_codec_chain ch = {0};
    ch.n = 1;
    ch.c[0] = codec(TZ_CODEC_CRC32C);
    int64_t shape[1] = {9};
    void *enc;
    size_t n;
    ts_error err;
    assert_int_equal(tz_encode_chunk(&ch, TS_UINT8, false, 1, shape, "123456789", &enc, &n, &err), TS_OK);
    assert_int_equal(n, 13);
    const unsigned char crc[4] = {0x83, 0x92, 0x06, 0xE3};
    assert_memory_equal((unsigned char *)enc + 9, crc, 4);
    ((unsigned char *)enc)[3] ^= 1;
    char out[9];
    assert_int_equal(tz_decode_chunk(&ch, TS_UINT8, false, 1, shape, enc, n, out, &err), TS_ERR_CORRUPT);
    free(enc);
}

/* ------------------------------------------------------------- arrays */

static tz_array_meta meta2d(int format, int64_t h, int64_t w, int64_t ch, int64_t cw, ts_dtype dt) {
    tz_array_meta m;
    tz_array_meta_init(&m, format);
    m.ndim = 2;
    m.shape[0] = h;
    m.shape[1] = w;
    m.chunk[0] = ch;
    m.chunk[1] = cw;
    m.dtype = dt;
    return m;
}

/* Writes every block of a 2-D uint16 array from `full` (with fill padding) and reads it back in several boxes. */
static void write_all_blocks(tz_array *a, const uint16_t *full, uint16_t fill) {
    const tz_array_meta *m = tz_array_get_meta(a);
    int64_t grid[TZ_MAX_DIM];
    tz_array_grid(a, grid);
    uint16_t *blk = malloc(sizeof(uint16_t) * (size_t)(m->chunk[0] * m->chunk[1]));
    for (int64_t by = 0; by < grid[0]; by++)
        for (int64_t bx = 0; bx < grid[1]; bx++) {
            for (int64_t y = 0; y < m->chunk[0]; y++)
                for (int64_t x = 0; x < m->chunk[1]; x++) {
                    int64_t gy = by * m->chunk[0] + y, gx = bx * m->chunk[1] + x;
                    blk[y * m->chunk[1] + x] =
                        gy < m->shape[0] && gx < m->shape[1] ? full[gy * m->shape[1] + gx] : fill;
                }
            int64_t idx[2] = {by, bx};
            ts_error err;
            if (tz_array_write_block(a, idx, blk, &err)) fail_msg("write_block: %s", err.message);
        }
    free(blk);
}

static void check_boxes(const tz_array *a, const uint16_t *full) {
    const tz_array_meta *m = tz_array_get_meta(a);
    int64_t H = m->shape[0], W = m->shape[1];
    for (int rep = 0; rep < 40; rep++) {
        int64_t s[2], c[2];
        if (rep == 0) { s[0] = s[1] = 0; c[0] = H; c[1] = W; }
        else if (rep == 1 && H >= m->chunk[0] && W >= m->chunk[1]) { s[0] = s[1] = 0; c[0] = m->chunk[0]; c[1] = m->chunk[1]; }
        else {
            s[0] = (int64_t)(rng() % (uint64_t)H);
            s[1] = (int64_t)(rng() % (uint64_t)W);
            c[0] = 1 + (int64_t)(rng() % (uint64_t)(H - s[0]));
            c[1] = 1 + (int64_t)(rng() % (uint64_t)(W - s[1]));
        }
        uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)(c[0] * c[1]));
        ts_error err;
        if (tz_array_read(a, s, c, buf, &err)) fail_msg("read: %s", err.message);
        for (int64_t y = 0; y < c[0]; y++)
            for (int64_t x = 0; x < c[1]; x++)
                if (buf[y * c[1] + x] != full[(s[0] + y) * W + s[1] + x])
                    fail_msg("box %d: value at (%lld,%lld) is %u, expected %u", rep, (long long)(s[0] + y),
                             (long long)(s[1] + x), buf[y * c[1] + x], full[(s[0] + y) * W + s[1] + x]);
        free(buf);
    }
}

static void test_v2_edge_chunks_and_reopen(void **state) {
    (void)state;
    const int64_t H = 37, W = 50;
    uint16_t *full = malloc(sizeof(uint16_t) * H * W);
    for (int64_t i = 0; i < H * W; i++) full[i] = (uint16_t)(rng() & 0xffff);
    for (int sepi = 0; sepi < 2; sepi++) {
        tz_array_meta m = meta2d(2, H, W, 16, 16, TS_UINT16);
        m.separator = sepi ? '/' : '.';
        m.fill_value = 7;
        tz_meta_set_codec(&m, TS_CODEC_BLOSC_LZ4);
        m.attributes_json = "{\"hello\": [1, 2]}";
        const char *p = tmp_path(sepi ? "v2slash" : "v2dot");
        tz_array *a;
        ts_error err;
        if (tz_array_create(p, &m, &a, &err)) fail_msg("%s", err.message);
        write_all_blocks(a, full, 7);
        tz_array_close(a);
        if (tz_array_open(p, &a, &err)) fail_msg("%s", err.message);
        assert_int_equal(tz_array_get_meta(a)->zarr_format, 2);
        assert_int_equal(tz_array_get_meta(a)->separator, m.separator);
        assert_non_null(strstr(tz_array_attributes(a), "hello"));
        check_boxes(a, full);
        /* Edge chunk file decodes to a full 16x16 chunk. */
        char key[64], file[1200];
        int64_t idx[2] = {2, 3};
        tz_chunk_key(tz_array_get_meta(a), idx, key, sizeof key);
        assert_string_equal(key, sepi ? "2/3" : "2.3");
        snprintf(file, sizeof file, "%s/%s", p, key);
        void *data;
        size_t n;
        assert_int_equal(ts_read_file(file, &data, &n, &err), TS_OK);
        uint16_t chunk[256];
        int64_t cs[2] = {16, 16};
        assert_int_equal(tz_decode_chunk(&tz_array_get_meta(a)->codecs, TS_UINT16, false, 2, cs, data, n, chunk, &err), TS_OK);
        assert_int_equal(chunk[0], full[32 * W + 48]);
        assert_int_equal(chunk[2], 7); /* beyond x = 50: padding */
        assert_int_equal(chunk[5 * 16], 7); /* beyond y = 37 */
        free(data);
        tz_array_close(a);
    }
    free(full);
}

static void test_v3_missing_chunk_reads_fill(void **state) {
    (void)state;
    tz_array_meta m = meta2d(3, 10, 10, 4, 4, TS_FLOAT32);
    m.fill_value = NAN;
    tz_meta_set_codec(&m, TS_CODEC_ZSTD);
    tz_array *a;
    ts_error err;
    if (tz_array_create(tmp_path("v3nan"), &m, &a, &err)) fail_msg("%s", err.message);
    float blk[16];
    for (int i = 0; i < 16; i++) blk[i] = (float)i;
    int64_t idx[2] = {1, 1};
    assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
    float out[100];
    int64_t s[2] = {0, 0}, c[2] = {10, 10};
    assert_int_equal(tz_array_read(a, s, c, out, &err), TS_OK);
    assert_true(isnan(out[0]));
    assert_true(out[4 * 10 + 4] == 0.0f && out[7 * 10 + 7] == 15.0f);
    assert_true(isnan(out[9 * 10 + 9]));
    char key[64];
    tz_chunk_key(tz_array_get_meta(a), idx, key, sizeof key);
    assert_string_equal(key, "c/1/1");
    tz_array_close(a);
    /* Reopen: NaN fill survives the metadata round trip. */
    assert_int_equal(tz_array_open(tmp_path("v3nan"), &a, &err), TS_OK);
    assert_true(isnan(tz_array_get_meta(a)->fill_value));
    tz_array_close(a);
}

static tz_array_meta sharded_meta(int64_t h, int64_t w, int64_t shard, int64_t inner, ts_codec codec) {
    tz_array_meta m = meta2d(3, h, w, shard, shard, TS_UINT16);
    m.sharded = true;
    m.sharding.inner_chunk[0] = m.sharding.inner_chunk[1] = inner;
    tz_meta_set_codec(&m, codec);
    return m;
}

static void test_v3_sharded_roundtrip(void **state) {
    (void)state;
    const int64_t H = 45, W = 70;
    uint16_t *full = calloc((size_t)(H * W), sizeof(uint16_t));
    /* Leave the top-left 16x16 (one inner chunk of the first shard) at fill. */
    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++)
            full[y * W + x] = (y < 8 && x < 8) ? 0 : (uint16_t)(1 + (rng() % 60000));
    ts_codec codecs[] = {TS_CODEC_ZSTD, TS_CODEC_BLOSC_LZ4, TS_CODEC_GZIP, TS_CODEC_NONE};
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "v3shard%d", k);
        tz_array_meta m = sharded_meta(H, W, 32, 8, codecs[k]);
        m.sharding.index_at_start = k == 2;
        tz_array *a;
        ts_error err;
        if (tz_array_create(tmp_path(name), &m, &a, &err)) fail_msg("%s", err.message);
        write_all_blocks(a, full, 0);
        tz_array_close(a);
        if (tz_array_open(tmp_path(name), &a, &err)) fail_msg("%s", err.message);
        assert_true(tz_array_get_meta(a)->sharded);
        assert_int_equal(tz_array_get_meta(a)->sharding.index_at_start, k == 2);
        check_boxes(a, full);
        tz_array_close(a);
        /* The first shard's index says inner chunk (0,0) is the empty sentinel. */
        char file[1200];
        snprintf(file, sizeof file, "%s/c/0/0", tmp_path(name));
        void *data;
        size_t n;
        assert_int_equal(ts_read_file(file, &data, &n, &err), TS_OK);
        const unsigned char *idx = (const unsigned char *)data + (k == 2 ? 0 : n - (16 * 16 + 4));
        for (int b = 0; b < 16; b++) assert_int_equal(idx[b], 0xff);
        assert_int_not_equal(idx[16 + 15], 0xff);
        assert_int_equal(tz_crc32c(0, idx, 256), (uint32_t)idx[256] | (uint32_t)idx[257] << 8 |
                                                      (uint32_t)idx[258] << 16 | (uint32_t)idx[259] << 24);
        free(data);
    }
    free(full);
}

/* A tz_parallel that runs the items in reverse order, item i as worker
 * i % 3 (each worker's scratch then holds another chunk between two of its
 * items): the shard must come out byte for byte as the serial encoder
 * writes it. (Real threads: the fuse tests compare --threads 1 and 2.) */
static ts_status run_backwards(void *user, int64_t n, tz_item_fn fn, void *fn_user, ts_error *err) {
    (void)user;
    for (int64_t i = n - 1; i >= 0; i--) {
        ts_status st = fn(fn_user, i, (int)(i % 3), err);
        if (st) return st;
    }
    return TS_OK;
}

static void test_parallel_shard_encoding_same_bytes(void **state) {
    (void)state;
    const int64_t H = 53, W = 77;
    uint16_t *full = calloc((size_t)(H * W), sizeof(uint16_t));
    for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++)
            full[y * W + x] = (x < 8 && y >= 16) ? 0 : (uint16_t)(1 + (rng() % 60000));
    for (int at_start = 0; at_start < 2; at_start++) {
        tz_array_meta m = sharded_meta(H, W, 32, 8, TS_CODEC_ZSTD);
        m.sharding.index_at_start = at_start;
        tz_array *a, *b;
        ts_error err;
        char pa[1100], pb[1100];
        snprintf(pa, sizeof pa, "%s", tmp_path(at_start ? "par_s1" : "par_s0"));
        snprintf(pb, sizeof pb, "%s", tmp_path(at_start ? "par_p1" : "par_p0"));
        if (tz_array_create(pa, &m, &a, &err)) fail_msg("%s", err.message);
        if (tz_array_create(pb, &m, &b, &err)) fail_msg("%s", err.message);
        const tz_parallel par = {3, run_backwards, NULL};
        uint16_t *blk = malloc(32 * 32 * sizeof(uint16_t));
        for (int64_t by = 0; by < 2; by++)
            for (int64_t bx = 0; bx < 3; bx++) {
                for (int64_t y = 0; y < 32; y++)
                    for (int64_t x = 0; x < 32; x++) {
                        int64_t gy = by * 32 + y, gx = bx * 32 + x;
                        blk[y * 32 + x] = gy < H && gx < W ? full[gy * W + gx] : 0;
                    }
                int64_t idx[2] = {by, bx};
                assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
                assert_int_equal(tz_array_write_block_parallel(b, idx, blk, &par, &err), TS_OK);
                char fa[1200], fb[1200];
                snprintf(fa, sizeof fa, "%s/c/%lld/%lld", pa, (long long)by, (long long)bx);
                snprintf(fb, sizeof fb, "%s/c/%lld/%lld", pb, (long long)by, (long long)bx);
                void *da, *db;
                size_t na, nb;
                assert_int_equal(ts_read_file(fa, &da, &na, &err), TS_OK);
                assert_int_equal(ts_read_file(fb, &db, &nb, &err), TS_OK);
                assert_int_equal(na, nb);
                assert_memory_equal(da, db, na);
                free(da);
                free(db);
            }
        check_boxes(b, full);
        free(blk);
        tz_array_close(a);
        tz_array_close(b);
    }
    free(full);
}

/* A block (a shard, or a chunk of an unsharded array, v3 and v2) that
 * holds only the fill value is not stored, and the file an earlier write
 * left is removed (tz_remove_fill_block, one rule for both). */
static void test_all_fill_block_not_written(void **state) {
    (void)state;
    static const char *const names[3] = {"emptyshard", "emptychunk3", "emptychunk2"};
    for (int k = 0; k < 3; k++) {
        tz_array_meta m = k == 0 ? sharded_meta(16, 16, 16, 8, TS_CODEC_ZSTD) : meta2d(k == 1 ? 3 : 2, 16, 16, 16, 16, TS_UINT16);
        tz_array *a;
        ts_error err;
        assert_int_equal(tz_array_create(tmp_path(names[k]), &m, &a, &err), TS_OK);
        uint16_t blk[256];
        for (int i = 0; i < 256; i++) blk[i] = (uint16_t)i;
        int64_t idx[2] = {0, 0};
        assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
        char file[1200];
        snprintf(file, sizeof file, k == 2 ? "%s/0.0" : "%s/c/0/0", tmp_path(names[k]));
        assert_true(ts_path_exists(file));
        memset(blk, 0, sizeof blk);
        assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
        assert_false(ts_path_exists(file));
        uint16_t out[256];
        int64_t s[2] = {0, 0}, c[2] = {16, 16};
        memset(out, 0xab, sizeof out);
        assert_int_equal(tz_array_read(a, s, c, out, &err), TS_OK);
        assert_memory_equal(out, blk, sizeof blk);
        tz_array_close(a);
    }
}

/* A shard written out byte by byte: 1-D uint8 array of 8, shard 8, inner 4,
 * no inner compression; inner chunk 0 = 1..4, inner chunk 1 empty. */
static void write_text(const char *path, const char *text) {
    ts_error err;
    assert_int_equal(ts_write_file_atomic(path, text, strlen(text), &err), TS_OK);
}

static const char *HAND_META =
    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[8],\"data_type\":\"uint8\","
    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8]}},"
    "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
    "\"fill_value\":9,\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":{"
    "\"chunk_shape\":[4],\"codecs\":[{\"name\":\"bytes\"}],"
    "\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}],"
    "\"index_location\":\"end\"}}],\"attributes\":{}}";

static void hand_shard(unsigned char *shard /* 4 + 32 + 4 */) {
    const unsigned char data[4] = {1, 2, 3, 4};
    memcpy(shard, data, 4);
    unsigned char *idx = shard + 4;
    memset(idx, 0, 32);
    idx[0] = 0;  /* offset 0 */
    idx[8] = 4;  /* nbytes 4 */
    memset(idx + 16, 0xff, 16); /* empty sentinel */
    uint32_t crc = tz_crc32c(0, idx, 32);
    for (int k = 0; k < 4; k++) shard[36 + k] = (unsigned char)(crc >> (8 * k));
}

static void test_hand_built_shard(void **state) {
    (void)state;
    char p[1100], f[1200];
    snprintf(p, sizeof p, "%s", tmp_path("hand"));
    snprintf(f, sizeof f, "%s/zarr.json", p);
    write_text(f, HAND_META);
    unsigned char shard[40];
    hand_shard(shard);
    snprintf(f, sizeof f, "%s/c/0", p);
    ts_error err;
    assert_int_equal(ts_write_file_atomic(f, shard, sizeof shard, &err), TS_OK);
    tz_array *a;
    if (tz_array_open(p, &a, &err)) fail_msg("%s", err.message);
    uint8_t out[8];
    int64_t s = 0, c = 8;
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_OK);
    const uint8_t expect[8] = {1, 2, 3, 4, 9, 9, 9, 9};
    assert_memory_equal(out, expect, 8);
    s = 2; c = 3;
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_OK);
    assert_memory_equal(out, expect + 2, 3);
    /* Re-encoding the same values gives the same bytes. */
    int64_t idx0 = 0;
    uint8_t blk[8] = {1, 2, 3, 4, 9, 9, 9, 9};
    assert_int_equal(tz_array_write_block(a, &idx0, blk, &err), TS_OK);
    void *data;
    size_t n;
    assert_int_equal(ts_read_file(f, &data, &n, &err), TS_OK);
    assert_int_equal(n, 40);
    assert_memory_equal(data, shard, 40);
    free(data);

    /* Corrupt index CRC: error names the file and the chunk key. */
    shard[4 + 8] = 5;
    assert_int_equal(ts_write_file_atomic(f, shard, sizeof shard, &err), TS_OK);
    s = 0; c = 8;
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, f));
    assert_non_null(strstr(err.message, "'c/0'"));
    assert_non_null(strstr(err.message, "CRC32C"));

    /* Truncated shard. */
    hand_shard(shard);
    assert_int_equal(ts_write_file_atomic(f, shard + 10, 30, &err), TS_OK);
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, f));
    assert_non_null(strstr(err.message, "'c/0'"));
    assert_int_equal(ts_write_file_atomic(f, shard, 20, &err), TS_OK);
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, "truncated"));

    /* An index pointing past the end of the file. */
    hand_shard(shard);
    shard[4 + 8] = 200;
    uint32_t crc = tz_crc32c(0, shard + 4, 32);
    for (int k = 0; k < 4; k++) shard[36 + k] = (unsigned char)(crc >> (8 * k));
    assert_int_equal(ts_write_file_atomic(f, shard, 40, &err), TS_OK);
    assert_int_equal(tz_array_read(a, &s, &c, out, &err), TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, "'c/0'"));
    tz_array_close(a);
}

static void test_corrupt_chunk_names_key(void **state) {
    (void)state;
    tz_array_meta m = meta2d(2, 8, 8, 4, 4, TS_UINT16);
    tz_meta_set_codec(&m, TS_CODEC_ZSTD);
    tz_array *a;
    ts_error err;
    assert_int_equal(tz_array_create(tmp_path("corrupt2"), &m, &a, &err), TS_OK);
    char f[1200];
    snprintf(f, sizeof f, "%s/1.0", tmp_path("corrupt2"));
    write_text(f, "this is not zstd");
    uint16_t out[64];
    int64_t s[2] = {0, 0}, c[2] = {8, 8};
    assert_int_equal(tz_array_read(a, s, c, out, &err), TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, tmp_path("corrupt2")));
    assert_non_null(strstr(err.message, "'1.0'"));
    tz_array_close(a);
}

static void test_unsupported_metadata(void **state) {
    (void)state;
    struct { const char *zarray; const char *needle; } cases[] = {
        {"{\"zarr_format\":2,\"shape\":[4],\"chunks\":[4],\"dtype\":\"<U7\",\"compressor\":null,\"fill_value\":\"\",\"order\":\"C\",\"filters\":null}", "<U7"},
        {"{\"zarr_format\":2,\"shape\":[4],\"chunks\":[4],\"dtype\":\"<f2\",\"compressor\":null,\"fill_value\":0,\"order\":\"C\",\"filters\":null}", "<f2"},
        {"{\"zarr_format\":2,\"shape\":[4],\"chunks\":[4],\"dtype\":\"<i2\",\"compressor\":null,\"fill_value\":0,\"order\":\"F\",\"filters\":null}", "order"},
        {"{\"zarr_format\":2,\"shape\":[4],\"chunks\":[4],\"dtype\":\"<i2\",\"compressor\":null,\"fill_value\":0,\"order\":\"C\",\"filters\":[{\"id\":\"delta\",\"dtype\":\"<i2\"}]}", "delta"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[1100], f[1200];
        snprintf(p, sizeof p, "%s/unsup%zu", scratch_dir, i);
        snprintf(f, sizeof f, "%s/.zarray", p);
        write_text(f, cases[i].zarray);
        tz_array *a;
        ts_error err;
        assert_int_equal(tz_array_open(p, &a, &err), TS_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.message, p));
        assert_non_null(strstr(err.message, cases[i].needle));
    }
}

static void test_groups(void **state) {
    (void)state;
    ts_error err;
    for (int fmt = 2; fmt <= 3; fmt++) {
        const char *p = tmp_path(fmt == 2 ? "g2" : "g3");
        assert_int_equal(tz_group_create(p, fmt, "{\"ome\": {\"version\": \"0.5\"}}", &err), TS_OK);
        int got;
        char *attrs;
        assert_int_equal(tz_node_attributes(p, &got, &attrs, &err), TS_OK);
        assert_int_equal(got, fmt);
        assert_non_null(strstr(attrs, "\"version\""));
        free(attrs);
    }
    int got;
    char *attrs;
    /* A v2 group without .zattrs and a v3 array without "attributes": "{}". */
    char f[1200];
    snprintf(f, sizeof f, "%s/.zgroup", tmp_path("bare2"));
    write_text(f, "{\"zarr_format\": 2}");
    assert_int_equal(tz_node_attributes(tmp_path("bare2"), &got, &attrs, &err), TS_OK);
    assert_string_equal(attrs, "{}");
    free(attrs);
    snprintf(f, sizeof f, "%s/zarr.json", tmp_path("bare3"));
    write_text(f, "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[2],\"data_type\":\"uint8\","
                  "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
                  "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":\"bytes\"}]}");
    tz_array *a;
    assert_int_equal(tz_array_open(tmp_path("bare3"), &a, &err), TS_OK);
    assert_string_equal(tz_array_attributes(a), "{}");
    tz_array_close(a);
    /* Malformed JSON: TS_ERR_FORMAT naming the file. */
    write_text(f, "{\"zarr_format\": 3, ");
    assert_int_equal(tz_array_open(tmp_path("bare3"), &a, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, f));
    assert_int_equal(tz_node_attributes(tmp_path("nothing-here"), &got, &attrs, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, "nothing-here"));
}

/* ---------------------------------------------------- threads (run under ASan) */

typedef struct {
    tz_array *arr;
    const uint16_t *full;
    int64_t H, W, S;
} par_ctx;

static int par_write(void *user, int64_t i, int worker) {
    (void)worker;
    par_ctx *c = user;
    int64_t gw = (c->W + c->S - 1) / c->S;
    int64_t idx[2] = {i / gw, i % gw};
    uint16_t *blk = malloc(sizeof(uint16_t) * (size_t)(c->S * c->S));
    for (int64_t y = 0; y < c->S; y++)
        for (int64_t x = 0; x < c->S; x++) {
            int64_t gy = idx[0] * c->S + y, gx = idx[1] * c->S + x;
            blk[y * c->S + x] = gy < c->H && gx < c->W ? c->full[gy * c->W + gx] : 0;
        }
    ts_error err;
    int rc = tz_array_write_block(c->arr, idx, blk, &err) != TS_OK;
    free(blk);
    return rc;
}

static int par_read(void *user, int64_t i, int worker) {
    (void)worker;
    par_ctx *c = user;
    uint64_t r = (uint64_t)i * 0x9E3779B97F4A7C15ull + 1;
    int64_t s[2] = {(int64_t)(r % (uint64_t)c->H), (int64_t)((r >> 20) % (uint64_t)c->W)};
    int64_t n[2] = {1 + (int64_t)((r >> 40) % (uint64_t)(c->H - s[0])), 1 + (int64_t)((r >> 50) % (uint64_t)(c->W - s[1]))};
    uint16_t *buf = malloc(sizeof(uint16_t) * (size_t)(n[0] * n[1]));
    ts_error err;
    int rc = tz_array_read(c->arr, s, n, buf, &err) != TS_OK;
    for (int64_t y = 0; !rc && y < n[0]; y++)
        for (int64_t x = 0; x < n[1]; x++)
            if (buf[y * n[1] + x] != c->full[(s[0] + y) * c->W + s[1] + x]) { rc = 2; break; }
    free(buf);
    return rc;
}

static void test_parallel_writes_and_reads(void **state) {
    (void)state;
    const int64_t H = 100, W = 90, S = 32;
    uint16_t *full = malloc(sizeof(uint16_t) * (size_t)(H * W));
    for (int64_t i = 0; i < H * W; i++) full[i] = (uint16_t)(i % 7 == 0 ? 0 : 1 + rng() % 65000);
    ts_pool *pool = ts_pool_create(4);
    assert_non_null(pool);
    for (int sharded = 0; sharded < 2; sharded++) {
        tz_array_meta m = sharded ? sharded_meta(H, W, S, 8, TS_CODEC_ZSTD) : meta2d(2, H, W, S, S, TS_UINT16);
        if (!sharded) tz_meta_set_codec(&m, TS_CODEC_BLOSC_ZSTD);
        par_ctx c = {NULL, full, H, W, S};
        ts_error err;
        assert_int_equal(tz_array_create(tmp_path(sharded ? "par3" : "par2"), &m, &c.arr, &err), TS_OK);
        assert_int_equal(ts_pool_for(pool, ((H + S - 1) / S) * ((W + S - 1) / S), par_write, &c), 0);
        assert_int_equal(ts_pool_for(pool, 200, par_read, &c), 0);
        tz_array_close(c.arr);
    }
    ts_pool_destroy(pool);
    free(full);
}

/* ------------------------------------------- damaged files never crash */

/* Every single-byte change of a stored block reads back as TS_OK (a byte
 * the format does not check, e.g. inside a payload blosc stored raw) or
 * TS_ERR_CORRUPT naming the file, and every truncation as TS_ERR_CORRUPT;
 * never anything else (ASan/UBSan watch). */
static void damage_and_read(const char *array_path, const char *key, int64_t n0, int64_t n1) {
    char file[1200];
    snprintf(file, sizeof file, "%s/%s", array_path, key);
    void *orig;
    size_t n;
    ts_error err;
    assert_int_equal(ts_read_file(file, &orig, &n, &err), TS_OK);
    tz_array *a;
    assert_int_equal(tz_array_open(array_path, &a, &err), TS_OK);
    unsigned char *buf = malloc(n);
    uint16_t *out = malloc(sizeof(uint16_t) * (size_t)(n0 * n1));
    int64_t s[2] = {0, 0}, c[2] = {n0, n1};
    for (int trial = 0; trial < 300; trial++) {
        memcpy(buf, orig, n);
        size_t len = n;
        bool truncated = trial % 3 == 0;
        if (truncated) len = (size_t)(rng() % n);
        else buf[rng() % n] ^= (unsigned char)(1 + rng() % 255);  /* flip */
        assert_int_equal(ts_write_file_atomic(file, buf, len, &err), TS_OK);
        ts_status st = tz_array_read(a, s, c, out, &err);
        if (st == TS_OK && truncated) fail_msg("trial %d: %s truncated to %zu of %zu bytes read as OK", trial, file, len, n);
        if (st != TS_OK) {
            if (st != TS_ERR_CORRUPT) fail_msg("trial %d: status %d: %s", trial, st, err.message);
            assert_non_null(strstr(err.message, key));
        }
    }
    assert_int_equal(ts_write_file_atomic(file, orig, n, &err), TS_OK);
    tz_array_close(a);
    free(out);
    free(buf);
    free(orig);
}

static void test_damaged_blocks(void **state) {
    (void)state;
    const int64_t H = 40, W = 40;
    uint16_t *full = malloc(sizeof(uint16_t) * H * W);
    for (int64_t i = 0; i < H * W; i++) full[i] = (uint16_t)(i % 5 == 0 ? 0 : rng());
    ts_codec codecs[] = {TS_CODEC_ZSTD, TS_CODEC_BLOSC_LZ4, TS_CODEC_BLOSC_ZSTD, TS_CODEC_GZIP};
    for (int k = 0; k < 4; k++) {
        char name[32];
        tz_array *a;
        ts_error err;
        snprintf(name, sizeof name, "dmg3_%d", k);
        tz_array_meta m = sharded_meta(H, W, 40, 8, codecs[k]);
        assert_int_equal(tz_array_create(tmp_path(name), &m, &a, &err), TS_OK);
        write_all_blocks(a, full, 0);
        tz_array_close(a);
        damage_and_read(tmp_path(name), "c/0/0", H, W);
        snprintf(name, sizeof name, "dmg2_%d", k);
        m = meta2d(2, H, W, 40, 40, TS_UINT16);
        tz_meta_set_codec(&m, codecs[k]);
        assert_int_equal(tz_array_create(tmp_path(name), &m, &a, &err), TS_OK);
        write_all_blocks(a, full, 0);
        tz_array_close(a);
        damage_and_read(tmp_path(name), "0.0", H, W);
    }
    free(full);
}

/* Shapes from disk whose sizes overflow 64 bits, or whose decoded units could
 * never be allocated, are refused at open with the path named (they used to
 * wrap to tiny buffers that reads then overran). */
static void test_absurd_chunk_shapes(void **state) {
    (void)state;
    const char *docs[] = {
        /* v2: 2^22 * 2^21 * 2^21 * 2 bytes wraps to 0 */
        "{\"zarr_format\":2,\"shape\":[4,4,4],\"chunks\":[4194304,2097152,2097152],\"dtype\":\"<u2\","
        "\"compressor\":null,\"fill_value\":0,\"order\":\"C\",\"filters\":null}",
        /* v2: no overflow, but a 2^41-byte chunk */
        "{\"zarr_format\":2,\"shape\":[4,4],\"chunks\":[1048576,1048576],\"dtype\":\"<u2\","
        "\"compressor\":null,\"fill_value\":0,\"order\":\"C\",\"filters\":null}",
        /* v3 sharded: 2^62 inner chunks of one element; the index size wraps */
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[4],\"data_type\":\"uint16\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4611686018427387904]}},"
        "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":\"sharding_indexed\","
        "\"configuration\":{\"chunk_shape\":[1],\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}],"
        "\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}]}}]}",
        /* v3: shape near INT64_MAX (the chunk grid would overflow) */
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[9223372036854775807],\"data_type\":\"uint8\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[16]}},"
        "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":\"bytes\"}]}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char p[1100], f[1200];
        snprintf(p, sizeof p, "%s/absurd%zu", scratch_dir, i);
        snprintf(f, sizeof f, "%s/%s", p, strstr(docs[i], "\"zarr_format\":2") ? ".zarray" : "zarr.json");
        write_text(f, docs[i]);
        /* A small file where the (wrapped) shard index or chunk would be. */
        snprintf(f, sizeof f, "%s/%s", p, i == 2 ? "c/0" : i < 2 ? "0.0.0" : "c/0");
        write_text(f, "0123456789abcdefXXXX");
        tz_array *a = NULL;
        ts_error err;
        assert_int_equal(tz_array_open(p, &a, &err), TS_ERR_FORMAT);
        assert_null(a);
        assert_non_null(strstr(err.message, p));
    }
    /* Creating such an array is refused before anything is written. */
    tz_array_meta m;
    tz_array_meta_init(&m, 2);
    m.ndim = 2;
    m.shape[0] = m.shape[1] = 4;
    m.chunk[0] = m.chunk[1] = (int64_t)1 << 31;
    tz_array *a = NULL;
    ts_error err;
    assert_int_equal(tz_array_create(tmp_path("absurd_create"), &m, &a, &err), TS_ERR_ARG);
    assert_false(ts_path_exists(tmp_path("absurd_create")));
}

/* A read box is checked without computing start + count, which overflows
 * for a huge count and used to pass the check (then read far beyond). */
static void test_read_box_bounds(void **state) {
    (void)state;
    tz_array_meta m = meta2d(2, 8, 8, 4, 4, TS_UINT16);
    tz_array *a;
    ts_error err;
    assert_int_equal(tz_array_create(tmp_path("bounds"), &m, &a, &err), TS_OK);
    uint16_t out[64];
    int64_t s[2] = {0, 1}, c[2] = {1, INT64_MAX};
    assert_int_equal(tz_array_read(a, s, c, out, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, tmp_path("bounds")));
    int64_t s2[2] = {9, 0}, c2[2] = {0, 1};
    assert_int_equal(tz_array_read(a, s2, c2, out, &err), TS_ERR_ARG);
    int64_t s3[2] = {4, 4}, c3[2] = {4, 4};
    assert_int_equal(tz_array_read(a, s3, c3, out, &err), TS_OK);
    tz_array_close(a);
}

/* A fill_value the dtype cannot hold is a format error naming the array
 * (it was converted with undefined behaviour: -1 as uint16, 1e20 as int32). */
static void test_fill_value_out_of_range(void **state) {
    (void)state;
    struct { const char *dtype, *fill; ts_status want; double value; } cases[] = {
        {"<u2", "-1", TS_ERR_FORMAT, 0},     {"<u2", "65536", TS_ERR_FORMAT, 0},
        {"<i4", "1e20", TS_ERR_FORMAT, 0},   {"|u1", "1.5", TS_ERR_FORMAT, 0},
        {"<i8", "9223372036854775807", TS_ERR_FORMAT, 0}, /* rounds to 2^63 as a double */
        {"<u8", "1e19", TS_ERR_FORMAT, 0},   /* could not be written back as a JSON integer */
        {"<u2", "65535", TS_OK, 65535},      {"|i1", "-128", TS_OK, -128},
        {"<u2", "7.0", TS_OK, 7},            {"<f4", "1e20", TS_OK, 1e20},
        {"|b1", "true", TS_OK, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char p[1100], f[1200], doc[512];
        snprintf(p, sizeof p, "%s/fillrange%zu", scratch_dir, i);
        snprintf(f, sizeof f, "%s/.zarray", p);
        snprintf(doc, sizeof doc,
                 "{\"zarr_format\":2,\"shape\":[4],\"chunks\":[4],\"dtype\":\"%s\",\"compressor\":null,"
                 "\"fill_value\":%s,\"order\":\"C\",\"filters\":null}", cases[i].dtype, cases[i].fill);
        write_text(f, doc);
        tz_array *a = NULL;
        ts_error err;
        assert_int_equal(tz_array_open(p, &a, &err), cases[i].want);
        if (cases[i].want == TS_OK) {
            assert_true(tz_array_get_meta(a)->fill_value == cases[i].value);
            tz_array_close(a);
        } else {
            assert_non_null(strstr(err.message, p));
            assert_non_null(strstr(err.message, "fill_value"));
        }
    }
}

/* Codec configurations that cannot be read as written are refused at open,
 * naming the array: an index_location other than start/end (was read as
 * "end", so an index at the start was taken from the wrong bytes) and a
 * transpose order that is not a permutation. */
static void test_bad_codec_configuration(void **state) {
    (void)state;
    const char *docs[] = {
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[8],\"data_type\":\"uint8\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8]}},"
        "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":\"sharding_indexed\","
        "\"configuration\":{\"chunk_shape\":[4],\"codecs\":[{\"name\":\"bytes\"}],"
        "\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}],"
        "\"index_location\":\"Start\"}}]}",
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[4,4],\"data_type\":\"uint8\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4,4]}},"
        "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":["
        "{\"name\":\"transpose\",\"configuration\":{\"order\":[0,7]}},{\"name\":\"bytes\"}]}",
    };
    const char *needle[] = {"index_location", "transpose"};
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char p[1100], f[1200];
        snprintf(p, sizeof p, "%s/badcodec%zu", scratch_dir, i);
        snprintf(f, sizeof f, "%s/zarr.json", p);
        write_text(f, docs[i]);
        tz_array *a = NULL;
        ts_error err;
        assert_int_equal(tz_array_open(p, &a, &err), TS_ERR_FORMAT);
        assert_non_null(strstr(err.message, p));
        assert_non_null(strstr(err.message, needle[i]));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c_vectors),
        cmocka_unit_test(test_codec_roundtrips),
        cmocka_unit_test(test_transpose_layout),
        cmocka_unit_test(test_big_endian_bytes),
        cmocka_unit_test(test_crc32c_codec_detects_corruption),
        cmocka_unit_test(test_v2_edge_chunks_and_reopen),
        cmocka_unit_test(test_v3_missing_chunk_reads_fill),
        cmocka_unit_test(test_v3_sharded_roundtrip),
        cmocka_unit_test(test_parallel_shard_encoding_same_bytes),
        cmocka_unit_test(test_all_fill_block_not_written),
        cmocka_unit_test(test_hand_built_shard),
        cmocka_unit_test(test_corrupt_chunk_names_key),
        cmocka_unit_test(test_unsupported_metadata),
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_parallel_writes_and_reads),
        cmocka_unit_test(test_damaged_blocks),
        cmocka_unit_test(test_absurd_chunk_shapes),
        cmocka_unit_test(test_read_box_bounds),
        cmocka_unit_test(test_fill_value_out_of_range),
        cmocka_unit_test(test_bad_codec_configuration),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
