/* Common helpers: thread pool, atomic writes, error messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/graph_bridges.h"
#include "common/pages.h"
#include "common/pool.h"
#include "xorshift.h"

static atomic_llong sum;

static int add_index(void *user, int64_t i, int worker) {
    (void)user;
    (void)worker;
    atomic_fetch_add(&sum, i);
    return 0;
}

static int fail_at_7(void *user, int64_t i, int worker) {
    (void)user;
    (void)worker;
    return i == 7 ? 42 : 0;
}

static void test_pool_sums_every_index_once(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        ts_pool *p = ts_pool_create(threads);
        assert_non_null(p);
        for (int rep = 0; rep < 20; rep++) {
            atomic_store(&sum, 0);
            assert_int_equal(ts_pool_for(p, 1000, add_index, NULL), 0);
            assert_int_equal(atomic_load(&sum), 999 * 1000 / 2);
        }
        assert_int_equal(ts_pool_for(p, 100, fail_at_7, NULL), 42);
        ts_pool_destroy(p);
    }
}

/* Items 13, 40 and 77 fail (after a delay that lets later items start
 * first): the message is item 13's whatever the timing and thread count. */
static ts_status fail_some(void *user, int64_t i, int worker, ts_error *err) {
    (void)user, (void)worker;
    if (i == 13) usleep(2000);
    if (i == 13 || i == 40 || i == 77) return ts_fail(err, TS_ERR_IO, "item %lld failed", (long long)i);
    return TS_OK;
}

static void test_pool_run_reports_lowest_failure(void **state) {
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        ts_pool *p = ts_pool_create(threads);
        ts_error err;
        ts_error_clear(&err);
        assert_int_equal(ts_pool_run(p, 100, fail_some, NULL, &err), TS_ERR_IO);
        assert_string_equal(err.message, "item 13 failed");
        assert_int_equal(ts_pool_run(p, 13, fail_some, NULL, NULL), TS_OK);
        ts_pool_destroy(p);
    }
}

static void test_atomic_write_and_read(void **state) {
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/common-%d", TESSERA_TEST_TMP, (int)getpid());
    snprintf(path, sizeof path, "%s/a/b/file.bin", dir);
    ts_error err;
    assert_int_equal(ts_write_file_atomic(path, "hello", 5, &err), TS_OK);
    void *data;
    size_t n;
    assert_int_equal(ts_read_file(path, &data, &n, &err), TS_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(data, "hello", 5);
    free(data);
    /* The same bytes from an fd opened first (shifts_read looks at the
     * size before reading), which ts_read_fd closes; a limit below the size
     * is refused before anything is read. */
    int fd;
    uint64_t fsize;
    bool found;
    for (int limit = 0; limit < 2; limit++) {
        assert_int_equal(ts_open_regular(path, &fd, &fsize, &found, &err), TS_OK);
        assert_true(found);
        assert_int_equal(fsize, 5);
        ts_status st = ts_read_fd(fd, path, fsize, limit ? UINT64_MAX : 4, &data, &n, &err);
        assert_int_equal(fcntl(fd, F_GETFD), -1);
        if (!limit) {
            assert_int_equal(st, TS_ERR_CORRUPT);
            assert_non_null(strstr(err.message, "file.bin"));
            continue;
        }
        assert_int_equal(st, TS_OK);
        assert_int_equal(n, 5);
        assert_string_equal(data, "hello");
        free(data);
    }
    assert_int_equal(ts_read_file("/nonexistent/x", &data, &n, &err), TS_ERR_IO);
    assert_non_null(strstr(err.message, "/nonexistent/x"));
    assert_int_equal(ts_remove_tree(dir, &err), TS_OK);
    assert_false(ts_path_exists(dir));
}

/* Another writer's temporary files next to the target (a process with the
 * same pid on another host of a shared file system, or a stale file of a
 * killed run) are neither truncated nor renamed into place. */
/* Temporaries already taken (by another thread or process of the same
 * pid and salt: a fork, a crashed run) at the names the writer would try
 * next are skipped (O_EXCL) and left as they are. The names are learnt from
 * ts_make_temp_dir, which shares the writer's name sequence. */
static void test_atomic_write_leaves_foreign_temporaries(void **state) {
    (void)state;
    char dir[512], path[600], probe[700], foreign[800];
    snprintf(dir, sizeof dir, "%s/common-foreign-%d", TESSERA_TEST_TMP, (int)getpid());
    snprintf(path, sizeof path, "%s/file.bin", dir);
    ts_error err;
    assert_int_equal(ts_mkdirs(dir, &err), TS_OK);
    assert_int_equal(ts_make_temp_dir(path, probe, sizeof probe, &err), TS_OK);
    assert_int_equal(ts_remove_tree(probe, &err), TS_OK);
    char *dot = strrchr(probe, '.');
    unsigned long next = strtoul(dot + 1, NULL, 10) + 1;
    *dot = '\0'; /* probe = path.tmp.<pid>.<salt> */
    enum { TAKEN = 40 }; /* fewer than the writer's 64 attempts */
    for (int k = 0; k < TAKEN; k++) {
        snprintf(foreign, sizeof foreign, "%s.%lu", probe, next + (unsigned long)k);
        FILE *f = fopen(foreign, "w");
        assert_non_null(f);
        fputs("foreign", f);
        fclose(f);
    }
    assert_int_equal(ts_write_file_atomic(path, "mine", 4, &err), TS_OK);
    void *data;
    size_t n;
    assert_int_equal(ts_read_file(path, &data, &n, &err), TS_OK);
    assert_int_equal(n, 4);
    assert_memory_equal(data, "mine", 4);
    free(data);
    for (int k = 0; k < TAKEN; k++) {
        snprintf(foreign, sizeof foreign, "%s.%lu", probe, next + (unsigned long)k);
        assert_int_equal(ts_read_file(foreign, &data, &n, &err), TS_OK);
        assert_int_equal(n, 7);
        assert_memory_equal(data, "foreign", 7);
        free(data);
    }
    assert_int_equal(ts_remove_tree(dir, &err), TS_OK);
}

/* A pid that is not alive: a child that has exited and been reaped. */
static long dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return (long)pid;
}

/* ts_make_temp_dir makes a directory of the temporaries' name form; the
 * sweep removes such a directory (with what it holds) only when its
 * writer is dead, and never one of another form. */
static void test_temp_dirs_and_their_sweep(void **state) {
    (void)state;
    char dir[512], img[600], tmp[700], dead[800], keep[700], inner[900];
    snprintf(dir, sizeof dir, "%s/common-tmpdir-%d", TESSERA_TEST_TMP, (int)getpid());
    snprintf(img, sizeof img, "%s/0", dir);
    ts_error err;
    assert_int_equal(ts_mkdirs(dir, &err), TS_OK);
    assert_int_equal(ts_make_temp_dir(img, tmp, sizeof tmp, &err), TS_OK);
    assert_true(ts_is_dir(tmp));
    const char *base = strrchr(tmp, '/') + 1;
    assert_true(ts_is_temp_name(base));
    /* the same name with a dead writer's pid, holding a file */
    char pidtext[32];
    snprintf(pidtext, sizeof pidtext, ".tmp.%ld.", (long)getpid());
    const char *at = strstr(tmp, pidtext);
    assert_non_null(at);
    snprintf(dead, sizeof dead, "%.*s.tmp.%ld.%s", (int)(at - tmp), tmp, dead_pid(), at + strlen(pidtext));
    assert_int_equal(ts_mkdirs(dead, &err), TS_OK);
    snprintf(inner, sizeof inner, "%s/zarr.json", dead);
    assert_int_equal(ts_write_file_atomic(inner, "{}", 2, &err), TS_OK);
    snprintf(keep, sizeof keep, "%s/0.tmp.keep", dir);
    assert_int_equal(ts_mkdirs(keep, &err), TS_OK);
    size_t removed = 0;
    assert_int_equal(ts_sweep_temp_files(dir, false, &removed, &err), TS_OK);
    assert_false(ts_path_exists(dead));   /* dead writer: gone, contents too */
    assert_true(ts_is_dir(tmp));          /* this (live) process's: kept */
    assert_true(ts_is_dir(keep));         /* not tessera's form: kept */
    assert_true(removed >= 1);
    assert_int_equal(ts_remove_tree(dir, &err), TS_OK);
}

static void test_error_context(void **state) {
    (void)state;
    ts_error err;
    ts_fail(&err, TS_ERR_CORRUPT, "bad crc in '%s'", "c/0/0");
    assert_int_equal(ts_fail_context(&err, TS_ERR_CORRUPT, "reading %s", "plate.zarr"), TS_ERR_CORRUPT);
    assert_int_equal(ts_fail_context(NULL, TS_ERR_IO, "no error struct"), TS_ERR_IO);
    assert_string_equal(err.message, "reading plate.zarr: bad crc in 'c/0/0'");
    assert_int_equal(err.code, TS_ERR_CORRUPT);
}

/* Components of the used edges but one (skip), by repeated relaxation
 * (brute force: the reference). */
static int groups_without(int nv, int ne, const int64_t (*ends)[2], const unsigned char *use, int skip, int *label) {
    for (int v = 0; v < nv; v++) label[v] = v;
    for (bool moved = true; moved;) {
        moved = false;
        for (int e = 0; e < ne; e++) {
            if (!use[e] || e == skip) continue;
            int a = (int)ends[e][0], b = (int)ends[e][1], m = label[a] < label[b] ? label[a] : label[b];
            if (label[a] != m || label[b] != m) label[a] = label[b] = m, moved = true;
        }
    }
    int n = 0;
    for (int v = 0; v < nv; v++) n += label[v] == v;
    return n;
}

/* Every buffer of a page set 64-byte aligned, writable over its whole size
 * and apart from the others (one block carved in turn: an offset rounded
 * the wrong way would overlap two planes), from the heap and from huge
 * pages. */
static void check_page_set(const size_t *sizes, int n, bool huge) {
    void *out[TS_PAGE_SET_MAX];
    ts_page_set set;
    assert_true(ts_page_set_alloc(&set, n, sizes, out));
#ifndef TS_ASAN
    /* the path the total chose: a mapping of whole huge pages, or one heap block */
    assert_int_equal(set.map != NULL, huge);
    assert_int_equal(set.own[0] != NULL, !huge);
    if (huge) assert_int_equal(set.bytes % ((size_t)2 << 20), 0);
#else
    (void)huge;
#endif
    for (int k = 0; k < n; k++) {
        assert_int_equal((uintptr_t)out[k] % 64, 0);
        memset(out[k], 0xA0 + k, sizes[k]);
    }
    for (int k = 0; k < n; k++) {
        const unsigned char *p = out[k];
        for (size_t i = 0; i < sizes[k]; i++) assert_int_equal(p[i], 0xA0 + k);
        for (int j = 0; j < n; j++) {
            if (j == k || !sizes[j] || !sizes[k]) continue;
            const uintptr_t a0 = (uintptr_t)out[k], a1 = a0 + sizes[k], b0 = (uintptr_t)out[j], b1 = b0 + sizes[j];
            assert_true(a1 <= b0 || b1 <= a0);
        }
    }
    ts_page_set_free(&set);
    ts_page_set_free(&set); /* freed twice: the first left it empty */
}

static void test_page_set_carves_apart(void **state) {
    (void)state;
    const size_t huge[] = {3, (size_t)5 << 20, 0, 100, ((size_t)2 << 20) + 1, 64}; /* whole huge pages */
    const size_t small[] = {3, 0, 100, 64, 4000, 65};                                 /* one heap block */
    check_page_set(huge, 6, true);
    check_page_set(small, 6, false);
    const size_t edge[] = {((size_t)1 << 20) - 64, 64}; /* exactly 1 MiB: the mapping */
    check_page_set(edge, 2, true);
    void *more[TS_PAGE_SET_MAX + 1];
    size_t many[TS_PAGE_SET_MAX + 1] = {0};
    ts_page_set set;
    assert_false(ts_page_set_alloc(&set, TS_PAGE_SET_MAX + 1, many, more));
}

/* ts_graph_bridges against brute force (an edge is a bridge when taking it
 * out adds a group) on random sparse graphs with parallel edges, self
 * loops and unused edges. */
static void test_graph_bridges_brute_force(void **state) {
    (void)state;
    uint64_t rng = 20261202;
    int64_t ends[40][2];
    unsigned char use[40], bridge[40];
    int label[16];
    long bridges = 0;
    for (int g = 0; g < 2000; g++) {
        const int nv = 2 + (int)(xorshift64(&rng) % 15), ne = (int)(xorshift64(&rng) % 40);
        for (int e = 0; e < ne; e++) {
            ends[e][0] = (int64_t)(xorshift64(&rng) % (uint64_t)nv);
            ends[e][1] = (int64_t)(xorshift64(&rng) % (uint64_t)nv);
            use[e] = xorshift64(&rng) % 5 != 0;
        }
        assert_true(ts_graph_bridges(nv, ne, (const int64_t(*)[2])ends, use, bridge));
        const int base = groups_without(nv, ne, (const int64_t(*)[2])ends, use, -1, label);
        for (int e = 0; e < ne; e++) {
            const bool want = use[e] && groups_without(nv, ne, (const int64_t(*)[2])ends, use, e, label) > base;
            assert_int_equal(bridge[e], want);
            bridges += want;
        }
    }
    assert_true(bridges > 1000); /* not vacuous */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_sums_every_index_once),
        cmocka_unit_test(test_pool_run_reports_lowest_failure),
        cmocka_unit_test(test_atomic_write_and_read),
        cmocka_unit_test(test_atomic_write_leaves_foreign_temporaries),
        cmocka_unit_test(test_temp_dirs_and_their_sweep),
        cmocka_unit_test(test_error_context),
        cmocka_unit_test(test_graph_bridges_brute_force),
        cmocka_unit_test(test_page_set_carves_apart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
