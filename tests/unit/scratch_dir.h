/* A scratch directory per test program and process, under the build tree
 * (TESSERA_TEST_TMP): made fresh by scratch_setup, removed by
 * scratch_teardown, so parallel ctest runs never share files. */
#ifndef TESSERA_TEST_SCRATCH_DIR_H
#define TESSERA_TEST_SCRATCH_DIR_H

#include <stdio.h>
#include <unistd.h>

#include "common/fs.h"

static char scratch_dir[512];

static int scratch_setup(const char *name) {
    snprintf(scratch_dir, sizeof scratch_dir, "%s/%s.%ld", TESSERA_TEST_TMP, name, (long)getpid());
    ts_remove_tree(scratch_dir, NULL);
    return ts_mkdirs(scratch_dir, NULL) == TS_OK ? 0 : -1;
}

static void scratch_teardown(void) { ts_remove_tree(scratch_dir, NULL); }

/* The cmocka group fixtures of a test program using a scratch directory:
 * SCRATCH_FIXTURES("test_x") defines setup and teardown. */
#define SCRATCH_FIXTURES(name)                                                                               \
    static int setup(void **state) {                                                                         \
        (void)state;                                                                                         \
        return scratch_setup(name);                                                                          \
    }                                                                                                        \
    static int teardown(void **state) {                                                                      \
        (void)state;                                                                                         \
        scratch_teardown();                                                                                  \
        return 0;                                                                                            \
    }

/* scratch_dir/name (a static buffer: valid until the next call). */
static inline const char *tmp_path(const char *name) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", scratch_dir, name);
    return buf;
}

#endif
