/* A trimmed tile plane (blend.c, kept_trim) gives its pages back outside
 * the lock; a load that finds the plane stale in that window must not free
 * it, or the next strip mapped at its address loses rows to the madvise.
 * The window is widened here (fuse_test_trim_window sleeps), on a plate
 * that makes such stale planes: one column of tall tiles, blocks wider
 * than the canvas (one block per band, so the read-ahead runs bands
 * ahead), fliplr (strips are copies, released as soon as read). The store
 * of 4 threads must be byte for byte that of 1 thread without the sleep. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuse/fuse_internal.h"
#include "tessera/tessera.h"

/* Windows widened: a plate that no longer trims any plane would pass
 * without testing anything. */
static int widened;

static void widen(void) {
    __atomic_fetch_add(&widened, 1, __ATOMIC_RELAXED);
    const struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static char root_a[600], root_b[600];
static int files, mismatches;

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len > 0 ? (size_t)len : 1);
    *n = b && len > 0 ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

/* Each file of tree a has a counterpart of the same bytes in tree b. */
static int compare_one(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)ftw;
    if (type != FTW_F) return 0;
    char other[1400];
    snprintf(other, sizeof other, "%s%s", root_b, path + strlen(root_a));
    size_t na = 0, nb = 0;
    char *a = slurp(path, &na), *b = slurp(other, &nb);
    files++;
    if (!a || !b || na != nb || memcmp(a, b, na) != 0) {
        if (mismatches++ < 5) fprintf(stderr, "differs: %s\n", other);
    }
    free(a), free(b);
    return 0;
}

static int same_tree(const char *a, const char *b) {
    files = mismatches = 0;
    snprintf(root_a, sizeof root_a, "%s", a);
    snprintf(root_b, sizeof root_b, "%s", b);
    assert_int_equal(nftw(a, compare_one, 16, FTW_PHYS), 0);
    int n = files, bad = mismatches;
    /* and b has no file a lacks */
    snprintf(root_a, sizeof root_a, "%s", b);
    snprintf(root_b, sizeof root_b, "%s", a);
    files = mismatches = 0;
    assert_int_equal(nftw(b, compare_one, 16, FTW_PHYS), 0);
    assert_int_equal(files, n);
    return bad + mismatches;
}

static void fuse_to(const char *plate, const char *shifts, const char *out, int threads) {
    ts_fuse_options o;
    ts_fuse_options_init(&o);
    o.input = plate;
    o.shifts = shifts;
    o.output = out;
    o.chunk = 32;
    o.shard = 7; /* 224 px blocks: wider than the canvas (203 px) */
    o.levels = 0;
    o.memory = (size_t)64 << 20;
    o.threads = threads;
    o.orientation = (ts_orientation){.fliplr = true};
    o.orientation_given = true;
    ts_error err;
    ts_status st = ts_fuse(&o, &err);
    if (st) fprintf(stderr, "fuse: %s\n", err.message);
    assert_int_equal(st, TS_OK);
}

static void test_trim_window_keeps_strips(void **state) {
    (void)state;
    char plate[512], truth[512], ref[512], got[512];
    snprintf(plate, sizeof plate, "%s/test_fuse_trim_plate", TESSERA_TEST_TMP);
    snprintf(truth, sizeof truth, "%s/test_fuse_trim_truth.yaml", TESSERA_TEST_TMP);
    snprintf(ref, sizeof ref, "%s/test_fuse_trim_ref", TESSERA_TEST_TMP);
    snprintf(got, sizeof got, "%s/test_fuse_trim_got", TESSERA_TEST_TMP);
    ts_simulate_options so;
    ts_simulate_options_init(&so);
    so.output = plate;
    so.grid_cols = 1, so.grid_rows = 8;
    so.tile_h = 1024, so.tile_w = 200;
    so.overlap = 40;
    so.jitter = 2;
    so.seed = 12;
    so.truth = truth;
    ts_error err;
    assert_int_equal(ts_simulate(&so, &err), TS_OK);
    fuse_to(plate, truth, ref, 1);
    for (int run = 0; run < 2; run++) {
        char out[600];
        snprintf(out, sizeof out, "%s%d", got, run);
        fuse_test_trim_window = widen;
        widened = 0;
        fuse_to(plate, truth, out, run == 0 ? 4 : 2);
        fuse_test_trim_window = NULL;
        if (widened == 0) fail_msg("run %d trimmed no plane: the window was never widened", run);
        assert_int_equal(same_tree(ref, out), 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim_window_keeps_strips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
