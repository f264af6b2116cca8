/* Writing a shard holds its encoded inner chunks once: the file is written
 * from their own buffers (tz_shard_write), not from a joined copy of the
 * whole encoded shard, which was a second copy per shard being written
 * (~4 MB of heap for each 2048 px uint16 shard of a fuse, two at a time at
 * 2 threads: part of the peak RSS, issue 12). Measured as the peak RSS of
 * the write (VmHWM, reset through /proc/self/clear_refs) over the RSS
 * before it, for a shard that does not compress (codec none): one encoded
 * copy is the shard's size, two are twice it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch_dir.h"
#include "zarr/zarr.h"

SCRATCH_FIXTURES("test_zarr_shard_memory")

/* A field of /proc/self/status in kB; -1 when absent. */
static long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    const size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') v = atol(line + n + 1);
    if (f) fclose(f);
    return v;
}

/* Resets VmHWM to the current RSS (clear_refs 5); false where the kernel
 * does not let it. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void test_shard_write_holds_one_encoded_copy(void **state) {
    (void)state;
    enum { SIDE = 2048, INNER = 512 };
    const size_t bytes = (size_t)SIDE * SIDE * sizeof(uint16_t);
    tz_array_meta m;
    tz_array_meta_init(&m, 3);
    m.ndim = 2;
    m.shape[0] = m.shape[1] = SIDE;
    m.chunk[0] = m.chunk[1] = SIDE;
    m.dtype = TS_UINT16;
    m.sharded = true;
    m.sharding.inner_chunk[0] = m.sharding.inner_chunk[1] = INNER;
    tz_meta_set_codec(&m, TS_CODEC_NONE);
    tz_array *a;
    ts_error err;
    if (tz_array_create(tmp_path("shard"), &m, &a, &err)) fail_msg("%s", err.message);
    uint16_t *blk = malloc(bytes);
    assert_non_null(blk);
    for (size_t i = 0; i < (size_t)SIDE * SIDE; i++) blk[i] = (uint16_t)(1 + i % 65521);
    const int64_t idx[2] = {0, 0};
    /* A first write, so that what the codecs and the file layer set up
     * once is not counted below. */
    assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
    if (!reset_peak() || status_kb("VmHWM") < 0) {
        free(blk);
        tz_array_close(a);
        skip(); /* no peak RSS to read */
    }
    const long before = status_kb("VmRSS");
    assert_int_equal(tz_array_write_block(a, idx, blk, &err), TS_OK);
    const long extra_kb = status_kb("VmHWM") - before;
    fprintf(stderr, "shard of %zu kB: peak RSS of its write +%ld kB\n", bytes >> 10, extra_kb);
    /* One encoded copy (the shard's size) and a few inner chunks' worth of
     * scratch; a joined copy would be a second shard's size. */
    assert_true(extra_kb * 1024L < (long)(bytes + bytes / 2));
    /* and the file is the shard: its chunks, then the index */
    void *file;
    size_t n;
    char path[1100];
    snprintf(path, sizeof path, "%s/c/0/0", tmp_path("shard"));
    assert_int_equal(ts_read_file(path, &file, &n, &err), TS_OK);
    assert_true(n > bytes);
    assert_memory_equal(file, blk, (size_t)INNER * sizeof(uint16_t)); /* inner chunk 0's first row */
    free(file);
    uint16_t *back = malloc(bytes);
    const int64_t start[2] = {0, 0}, count[2] = {SIDE, SIDE};
    assert_int_equal(tz_array_read(a, start, count, back, &err), TS_OK);
    assert_memory_equal(back, blk, bytes);
    free(back);
    free(blk);
    tz_array_close(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_write_holds_one_encoded_copy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
