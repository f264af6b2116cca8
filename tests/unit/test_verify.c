/* ts_verify on arrays built here with the zarr layer: shards with the index
 * at the start (tessera writes it at the end; no independent writer here
 * can write sharded arrays), an index without CRC32C, and one big shard
 * split into parts over threads, which must report and count exactly what
 * one thread does. Plus the placement rule of tz_shard_entry_check at its
 * boundaries. Damage is written into the files here, index CRC rewritten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "zarr/zarr.h"
#include "scratch_dir.h"

SCRATCH_FIXTURES("test_verify")

/* A 2D uint16 array H x W in shards of S x S, inner chunks of I x I, zstd;
 * every pixel non-zero except the first inner chunk of every shard (the
 * empty sentinel). Returns the path. */
static const char *make_sharded(const char *name, int64_t H, int64_t W, int64_t S, int64_t I, bool at_start,
                                bool crc) {
    tz_array_meta m;
    tz_array_meta_init(&m, 3);
    m.ndim = 2;
    m.shape[0] = H, m.shape[1] = W;
    m.chunk[0] = m.chunk[1] = S;
    m.dtype = TS_UINT16;
    m.sharded = true;
    m.sharding.inner_chunk[0] = m.sharding.inner_chunk[1] = I;
    tz_meta_set_codec(&m, TS_CODEC_ZSTD);
    m.sharding.index_at_start = at_start;
    if (!crc) m.sharding.index_codecs.n = 1; /* bytes only */
    const char *path = tmp_path(name);
    tz_array *a;
    ts_error err;
    if (tz_array_create(path, &m, &a, &err)) fail_msg("%s", err.message);
    uint16_t *blk = malloc((size_t)(S * S) * sizeof *blk);
    uint64_t r = 7;
    for (int64_t by = 0; by * S < H; by++)
        for (int64_t bx = 0; bx * S < W; bx++) {
            for (int64_t y = 0; y < S; y++)
                for (int64_t x = 0; x < S; x++) {
                    r = r * 6364136223846793005ull + 1442695040888963407ull;
                    bool inside = by * S + y < H && bx * S + x < W;
                    blk[y * S + x] = inside && !(y < I && x < I) ? (uint16_t)(1 + (r >> 52)) : 0;
                }
            int64_t idx[2] = {by, bx};
            if (tz_array_write_block(a, idx, blk, &err)) fail_msg("%s", err.message);
        }
    free(blk);
    tz_array_close(a);
    return path;
}

static ts_verify_result run(const char *store, int threads) {
    ts_verify_options o;
    ts_verify_options_init(&o);
    o.store = store;
    o.threads = threads;
    ts_verify_result r;
    ts_error err;
    if (ts_verify(&o, &r, &err)) fail_msg("ts_verify %s: %s", store, err.message);
    return r;
}

/* The index of shard file `file` of array `path` as entries, and back
 * (CRC32C recomputed when the array has one). */
typedef struct { uint64_t v[2 * 1024]; int n; size_t at, bytes; bool crc; } shard_index;

static shard_index load_index(const char *path, const char *key) {
    tz_array *a;
    ts_error err;
    if (tz_array_open(path, &a, &err)) fail_msg("%s", err.message);
    shard_index ix = {.n = (int)tz_shard_inner_count(a), .bytes = tz_shard_index_size(a)};
    ix.crc = ix.bytes > (size_t)ix.n * 16;
    char file[1200];
    snprintf(file, sizeof file, "%s/%s", path, key);
    void *data;
    size_t n;
    assert_int_equal(ts_read_file(file, &data, &n, &err), TS_OK);
    ix.at = tz_array_get_meta(a)->sharding.index_at_start ? 0 : n - ix.bytes;
    memcpy(ix.v, (unsigned char *)data + ix.at, (size_t)ix.n * 16); /* little-endian host */
    free(data);
    tz_array_close(a);
    return ix;
}

static void store_index(const char *path, const char *key, const shard_index *ix) {
    char file[1200];
    snprintf(file, sizeof file, "%s/%s", path, key);
    FILE *f = fopen(file, "r+b");
    assert_non_null(f);
    fseek(f, (long)ix->at, SEEK_SET);
    fwrite(ix->v, 16, (size_t)ix->n, f);
    if (ix->crc) {
        uint32_t c = tz_crc32c(0, ix->v, (size_t)ix->n * 16);
        fwrite(&c, 4, 1, f);
    }
    fclose(f);
}

static void flip_byte(const char *path, const char *key, uint64_t off) {
    char file[1200];
    snprintf(file, sizeof file, "%s/%s", path, key);
    FILE *f = fopen(file, "r+b");
    assert_non_null(f);
    fseek(f, (long)off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)off, SEEK_SET);
    fputc(c ^ 0xff, f);
    fclose(f);
}

static void test_entry_check_boundaries(void **state) {
    (void)state;
    for (int at_start = 0; at_start < 2; at_start++) {
        const char *p = make_sharded(at_start ? "ec1" : "ec0", 16, 16, 16, 8, at_start, true);
        tz_array *a;
        ts_error err;
        assert_int_equal(tz_array_open(p, &a, &err), TS_OK);
        const uint64_t ib = tz_shard_index_size(a), fsize = 1000 + ib;
        assert_int_equal(ib, 4 * 16 + 4);
        const uint64_t lo = at_start ? ib : 0, hi = at_start ? fsize : fsize - ib;
        char why[256];
        assert_int_equal(tz_shard_entry_check(a, fsize, UINT64_MAX, UINT64_MAX, why, sizeof why), 1);
        assert_int_equal(tz_shard_entry_check(a, fsize, lo, hi - lo, why, sizeof why), 0);
        assert_int_equal(tz_shard_entry_check(a, fsize, hi, 0, why, sizeof why), 0);
        assert_int_equal(tz_shard_entry_check(a, fsize, lo, hi - lo + 1, why, sizeof why), -1);
        assert_non_null(strstr(why, at_start ? "past its end" : "over the index"));
        if (at_start) {
            assert_int_equal(tz_shard_entry_check(a, fsize, ib - 1, 10, why, sizeof why), -1);
            assert_non_null(strstr(why, "over the index"));
        }
        assert_int_equal(tz_shard_entry_check(a, fsize, UINT64_MAX - 4, 8, why, sizeof why), -1);
        assert_int_equal(tz_shard_entry_check(a, fsize, UINT64_MAX, 8, why, sizeof why), -1);
        assert_non_null(strstr(why, "sentinel"));
        assert_int_equal(tz_shard_entry_check(a, fsize, 8, UINT64_MAX, why, sizeof why), -1);
        tz_array_close(a);
    }
}

static void test_index_at_start(void **state) {
    (void)state;
    const char *p = make_sharded("start", 40, 56, 32, 8, true, true);
    ts_verify_result r = run(p, 2);
    /* 2 x 2 shards of 16 inner chunks, the first of each empty; the edge
     * shards' inner chunks beyond the array are fill as well */
    int64_t inner_in = 0;
    for (int64_t y = 0; y < 8; y++)
        for (int64_t x = 0; x < 8; x++) inner_in += y * 8 < 40 && x * 8 < 56 && !(y % 4 == 0 && x % 4 == 0);
    assert_int_equal(r.nproblems, 0);
    assert_int_equal(r.arrays, 1);
    assert_int_equal(r.blocks, 4);
    assert_int_equal(r.chunks, inner_in);
    assert_int_equal(r.empty, 4 * 16 - inner_in);
    ts_verify_result_free(&r);

    /* an entry moved into the index (at the start), and an entry past the
     * end, CRC rewritten */
    shard_index ix = load_index(p, "c/0/1");
    ix.v[2 * 1] = 10;
    ix.v[2 * 2] = 1u << 20;
    store_index(p, "c/0/1", &ix);
    r = run(p, 2);
    assert_int_equal(r.nproblems, 2);
    assert_string_equal(r.problems[0].key, "c/0/1");
    assert_int_equal(r.problems[0].inner, 1);
    assert_int_equal(r.problems[0].kind, TS_VERIFY_CORRUPT);
    assert_non_null(strstr(r.problems[0].reason, "over the index"));
    assert_int_equal(r.problems[1].inner, 2);
    assert_non_null(strstr(r.problems[1].reason, "past its end"));
    ts_verify_result_free(&r);

    /* a truncated shard with the index at the start: the index still
     * reads, the chunks that were in the lost tail are past the end */
    shard_index t = load_index(p, "c/1/0");
    uint64_t last = 0, cut = 0;
    int nlost = 0;
    for (int i = 0; i < t.n; i++)
        if (t.v[2 * i] != UINT64_MAX && t.v[2 * i] > last) last = t.v[2 * i];
    cut = last + 1;
    for (int i = 0; i < t.n; i++) nlost += t.v[2 * i] != UINT64_MAX && t.v[2 * i] + t.v[2 * i + 1] > cut;
    char file[1200];
    snprintf(file, sizeof file, "%s/c/1/0", p);
    assert_int_equal(truncate(file, (off_t)cut), 0);
    r = run(p, 1);
    assert_int_equal(r.nproblems, 2 + nlost);
    assert_int_equal(nlost, 1);
    assert_string_equal(r.problems[2].key, "c/1/0");
    assert_non_null(strstr(r.problems[2].reason, "past its end"));
    ts_verify_result_free(&r);
}

static void test_index_without_crc(void **state) {
    (void)state;
    const char *p = make_sharded("nocrc", 32, 32, 32, 8, false, false);
    ts_verify_result r = run(p, 1);
    assert_int_equal(r.nproblems, 0);
    assert_int_equal(r.chunks, 15);
    ts_verify_result_free(&r);
    /* No CRC to catch it: a flipped byte in an offset is caught by the
     * entry's range (or the decode of the bytes it points at). */
    shard_index ix = load_index(p, "c/0/0");
    flip_byte(p, "c/0/0", ix.at + 16 * 5 + 7); /* top byte of inner chunk 5's offset */
    r = run(p, 1);
    assert_int_equal(r.nproblems, 1);
    assert_int_equal(r.problems[0].inner, 5);
    assert_non_null(strstr(r.problems[0].reason, "past its end"));
    ts_verify_result_free(&r);
}

/* One shard of 16 x 16 inner chunks is split into parts on 4 threads: the
 * counts and the problems are those of one thread, none twice. */
static void test_split_shard_same_as_one_thread(void **state) {
    (void)state;
    const char *p = make_sharded("split", 128, 128, 128, 8, false, true);
    ts_verify_result r1 = run(p, 1), r4 = run(p, 4);
    assert_int_equal(r1.nproblems, 0);
    assert_int_equal(r1.chunks, 255);
    assert_int_equal(r4.chunks, r1.chunks);
    assert_int_equal(r4.blocks, 1);
    assert_int_equal(r4.empty, 1);
    assert_int_equal(r4.bytes_read, r1.bytes_read);
    ts_verify_result_free(&r1);
    ts_verify_result_free(&r4);
    shard_index ix = load_index(p, "c/0/0");
    const int bad[] = {3, 77, 200, 254};
    for (int k = 0; k < 4; k++) flip_byte(p, "c/0/0", ix.v[2 * bad[k]]); /* the zstd magic */
    r1 = run(p, 1);
    r4 = run(p, 4);
    assert_int_equal(r1.nproblems, 4);
    assert_int_equal(r4.nproblems, 4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(r1.problems[k].inner, bad[k]);
        assert_int_equal(r4.problems[k].inner, bad[k]);
        assert_string_equal(r4.problems[k].reason, r1.problems[k].reason);
    }
    assert_int_equal(r4.chunks, 251);
    assert_int_equal(r1.chunks, 251);
    ts_verify_result_free(&r1);
    ts_verify_result_free(&r4);
}

/* OME images nested in OME images, 1500 deep (a path of 3000 bytes): the
 * walk stops at its depth cap as it does for plain groups, instead of
 * recursing once per level (it overflowed the stack, a crash). */
static void test_nested_images_depth_capped(void **state) {
    (void)state;
    static const char group[] = "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {}}";
    static const char image[] = "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": "
                                "{\"version\": \"0.5\", \"multiscales\": [{\"datasets\": []}]}}}";
    char path[4096];
    snprintf(path, sizeof path, "%s", tmp_path("nested"));
    const char *root = strdup(path);
    ts_error err;
    size_t n = strlen(path);
    for (int d = 0; d <= 1500; d++) {
        if (d) n += (size_t)snprintf(path + n, sizeof path - n, "/i");
        char file[4200];
        snprintf(file, sizeof file, "%s/zarr.json", path);
        if (ts_mkdirs(path, &err) || ts_write_file_atomic(file, d ? image : group, strlen(d ? image : group), &err))
            fail_msg("%s", err.message);
    }
    ts_verify_result r = run(root, 1);
    assert_true(r.nproblems > 0);   /* the images' metadata (no levels) */
    assert_true(r.nproblems <= 64); /* the walk stopped near the cap */
    ts_verify_result_free(&r);
    free((void *)root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entry_check_boundaries),
        cmocka_unit_test(test_index_at_start),
        cmocka_unit_test(test_index_without_crc),
        cmocka_unit_test(test_split_shard_same_as_one_thread),
        cmocka_unit_test(test_nested_images_depth_capped),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
