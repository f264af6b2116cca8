/* The output lock (common/lock.h), the output path rules (common/outpath.h)
 * and the staged swap (common/staged.h). Other holders are real processes
 * (fork): a live child, a dead one, a pid whose start time is not the
 * recorded one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/lock.h"
#include "common/outpath.h"
#include "common/staged.h"
#include "scratch_dir.h"

SCRATCH_FIXTURES("test_lock")

static char *read_text(const char *path) {
    void *data = NULL;
    size_t n = 0;
    ts_error err;
    if (ts_read_file(path, &data, &n, &err) != TS_OK) return NULL;
    return data;
}

/* A lock file as another run writes it. */
static void plant_lock(const char *path, const char *host, long pid, unsigned long long start) {
    char boot[64] = "";
    FILE *b = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (b) {
        if (fgets(boot, sizeof boot, b)) boot[strcspn(boot, "\n")] = '\0';
        fclose(b);
    }
    char text[512];
    snprintf(text, sizeof text,
             "tessera output lock\nhost: %s\nboot: %s\npid: %ld\nstart: %llu\ncommand: fuse\nsince: 2026-01-01T00:00:00Z\n",
             host, boot, pid, start);
    ts_error err;
    assert_int_equal(ts_write_file_atomic(path, text, strlen(text), &err), TS_OK);
}

static void my_host(char *h, size_t n) {
    if (gethostname(h, n) != 0) snprintf(h, n, "unknown");
}

static unsigned long long start_of(long pid) {
    unsigned long long start = 0;
    return ts_process_stat(pid, NULL, &start) ? start : 0;
}

static void test_lock_taken_and_released(void **state) {
    (void)state;
    char out[600], lockp[700];
    snprintf(out, sizeof out, "%s/new/dirs/out.zarr", scratch_dir);
    snprintf(lockp, sizeof lockp, "%s.lock", out);
    ts_output_lock a, b;
    ts_error err;
    assert_int_equal(ts_output_lock_acquire(&a, out, "fuse", &err), TS_OK);
    char *text = read_text(lockp);
    assert_non_null(text);
    char want[64];
    snprintf(want, sizeof want, "pid: %ld\n", (long)getpid());
    assert_non_null(strstr(text, want));
    assert_non_null(strstr(text, "command: fuse"));
    free(text);
    /* The same process again (stitch, then its fuse step): nested. */
    assert_int_equal(ts_output_lock_acquire(&b, out, "fuse", &err), TS_OK);
    ts_output_lock_release(&b);
    assert_true(ts_path_exists(lockp));
    ts_output_lock_release(&a);
    assert_false(ts_path_exists(lockp));
    /* The directories made for it go with it, when empty. */
    char made[600];
    snprintf(made, sizeof made, "%s/new", scratch_dir);
    assert_false(ts_path_exists(made));
}

static void test_live_holder_refused(void **state) {
    (void)state;
    char out[600], lockp[700], host[256];
    snprintf(out, sizeof out, "%s/live.zarr", scratch_dir);
    snprintf(lockp, sizeof lockp, "%s.lock", out);
    my_host(host, sizeof host);
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    assert_true(child > 0);
    plant_lock(lockp, host, child, start_of(child));
    ts_output_lock l;
    ts_error err;
    assert_int_equal(ts_output_lock_acquire(&l, out, "simulate", &err), TS_ERR_BUSY);
    char want[320];
    snprintf(want, sizeof want, "pid %ld on host %s", (long)child, host);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, lockp));
    assert_true(ts_path_exists(lockp)); /* never removed */
    /* Another host's: its processes cannot be seen from here, so live. */
    plant_lock(lockp, "some-other-node", 1, 0);
    assert_int_equal(ts_output_lock_acquire(&l, out, "simulate", &err), TS_ERR_BUSY);
    assert_non_null(strstr(err.message, "some-other-node"));
    /* A file that is no tessera lock is left alone, and refused. */
    ts_write_file_atomic(lockp, "user data", 9, &err);
    assert_int_equal(ts_output_lock_acquire(&l, out, "simulate", &err), TS_ERR_BUSY);
    assert_non_null(strstr(err.message, "not a tessera lock"));
    char *text = read_text(lockp);
    assert_string_equal(text, "user data");
    free(text);
    /* Nor a large one (read no further than a lock can be long). */
    char *big = malloc(1 << 20);
    assert_non_null(big);
    memset(big, 'x', 1 << 20);
    assert_int_equal(ts_write_file_atomic(lockp, big, 1 << 20, &err), TS_OK);
    free(big);
    assert_int_equal(ts_output_lock_acquire(&l, out, "simulate", &err), TS_ERR_BUSY);
    assert_non_null(strstr(err.message, "not a tessera lock"));
    struct stat sb;
    assert_int_equal(stat(lockp, &sb), 0);
    assert_int_equal(sb.st_size, 1 << 20);
    unlink(lockp);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

static void test_stale_holder_taken_over(void **state) {
    (void)state;
    char out[600], lockp[700], host[256];
    snprintf(out, sizeof out, "%s/stale.zarr", scratch_dir);
    snprintf(lockp, sizeof lockp, "%s.lock", out);
    my_host(host, sizeof host);
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    ts_output_lock l;
    ts_error err;
    /* A dead pid. */
    plant_lock(lockp, host, child, 12345);
    assert_int_equal(ts_output_lock_acquire(&l, out, "fuse", &err), TS_OK);
    char want[64];
    snprintf(want, sizeof want, "pid: %ld\n", (long)getpid());
    char *text = read_text(lockp);
    assert_non_null(strstr(text, want));
    free(text);
    ts_output_lock_release(&l);
    /* A live pid that started after the lock was written: reused. */
    pid_t live = fork();
    if (live == 0) {
        pause();
        _exit(0);
    }
    plant_lock(lockp, host, live, start_of(live) + 1000);
    assert_int_equal(ts_output_lock_acquire(&l, out, "fuse", &err), TS_OK);
    ts_output_lock_release(&l);
    assert_false(ts_path_exists(lockp));
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
}

/* Two processes racing for one lock many times: never both hold it. */
static void test_one_holder_at_a_time(void **state) {
    (void)state;
    char out[600], mark[700];
    snprintf(out, sizeof out, "%s/race.zarr", scratch_dir);
    snprintf(mark, sizeof mark, "%s/inside", scratch_dir);
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            int overlaps = 0;
            for (int round = 0; round < 300; round++) {
                ts_output_lock l;
                ts_error err;
                if (ts_output_lock_acquire(&l, out, "fuse", &err) != TS_OK) continue;
                /* While held, the mark must not exist: create it, remove it. */
                if (mkdir(mark, 0777) != 0) overlaps++;
                else rmdir(mark);
                ts_output_lock_release(&l);
            }
            _exit(overlaps ? 1 : 0);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        waitpid(kids[k], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

static void test_output_path_rules(void **state) {
    (void)state;
    char plate[600], inside[700], store[600], within[700], sub[700], link[600], vialink[700];
    ts_error err;
    snprintf(plate, sizeof plate, "%s/plate.zarr", scratch_dir);
    snprintf(inside, sizeof inside, "%s/A/1/x", plate);
    assert_int_equal(ts_mkdirs(plate, &err), TS_OK);
    const char *inputs[2] = {plate, NULL};
    assert_int_equal(ts_check_output_path("output", plate, inputs, 2, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "is the input"));
    assert_int_equal(ts_check_output_path("output", inside, inputs, 2, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "inside the input"));
    assert_int_equal(ts_check_output_path("output", scratch_dir, inputs, 2, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "holds the input"));
    /* Another spelling of the same place: "..", a symlink. */
    snprintf(sub, sizeof sub, "%s/../%s/plate.zarr/y", scratch_dir, strrchr(scratch_dir, '/') + 1);
    assert_int_equal(ts_check_output_path("output", sub, inputs, 2, &err), TS_ERR_ARG);
    snprintf(link, sizeof link, "%s/link", scratch_dir);
    assert_int_equal(symlink(plate, link), 0);
    snprintf(vialink, sizeof vialink, "%s/zarr.json", link);
    assert_int_equal(ts_check_output_path("output", vialink, inputs, 2, &err), TS_ERR_ARG);
    /* Inside some other zarr store (not an input): refused too. */
    snprintf(store, sizeof store, "%s/other.zarr", scratch_dir);
    snprintf(within, sizeof within, "%s/.zgroup", store);
    assert_int_equal(ts_write_file_atomic(within, "{}", 2, &err), TS_OK);
    snprintf(within, sizeof within, "%s/new/s.yaml", store);
    assert_int_equal(ts_check_output_path("output", within, NULL, 0, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "inside the zarr store"));
    /* Beside them: fine. */
    snprintf(within, sizeof within, "%s/shifts.yaml", scratch_dir);
    assert_int_equal(ts_check_output_path("output", within, inputs, 2, &err), TS_OK);
}

static void test_staged_swap(void **state) {
    (void)state;
    char final[600], file[8800];
    ts_error err;
    snprintf(final, sizeof final, "%s/swap.zarr", scratch_dir);
    snprintf(file, sizeof file, "%s/old", final);
    assert_int_equal(ts_write_file_atomic(file, "old", 3, &err), TS_OK);
    /* Aborted: the old tree stays, no temporary remains. */
    ts_staged s;
    assert_int_equal(ts_staged_begin(&s, final, &err), TS_OK);
    snprintf(file, sizeof file, "%s/new", s.build);
    assert_int_equal(ts_write_file_atomic(file, "new", 3, &err), TS_OK);
    char dir[4300];
    snprintf(dir, sizeof dir, "%s", s.dir);
    ts_staged_abort(&s, &err);
    assert_false(ts_path_exists(dir));
    snprintf(file, sizeof file, "%s/old", final);
    assert_true(ts_path_exists(file));
    /* Committed: the new tree alone. */
    assert_int_equal(ts_staged_begin(&s, final, &err), TS_OK);
    snprintf(file, sizeof file, "%s/new", s.build);
    assert_int_equal(ts_write_file_atomic(file, "new", 3, &err), TS_OK);
    snprintf(dir, sizeof dir, "%s", s.dir);
    assert_int_equal(ts_staged_commit(&s, &err), TS_OK);
    assert_false(ts_path_exists(dir));
    snprintf(file, sizeof file, "%s/new", final);
    assert_true(ts_path_exists(file));
    snprintf(file, sizeof file, "%s/old", final);
    assert_false(ts_path_exists(file));
    /* A new path: renamed; something that appeared meanwhile is not
     * replaced. */
    snprintf(final, sizeof final, "%s/fresh.zarr", scratch_dir);
    assert_int_equal(ts_staged_begin(&s, final, &err), TS_OK);
    snprintf(file, sizeof file, "%s/new", s.build);
    assert_int_equal(ts_write_file_atomic(file, "new", 3, &err), TS_OK);
    snprintf(file, sizeof file, "%s/theirs", final);
    assert_int_equal(ts_write_file_atomic(file, "theirs", 6, &err), TS_OK);
    assert_int_equal(ts_staged_commit(&s, &err), TS_ERR_IO);
    assert_true(ts_path_exists(file));
    ts_staged_abort(&s, NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_taken_and_released),
        cmocka_unit_test(test_live_holder_refused),
        cmocka_unit_test(test_stale_holder_taken_over),
        cmocka_unit_test(test_one_holder_at_a_time),
        cmocka_unit_test(test_output_path_rules),
        cmocka_unit_test(test_staged_swap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
