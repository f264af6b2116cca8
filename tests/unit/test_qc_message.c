/* estimate's verdict message (src/register/qc.c, ts_estimate_qc_message)
 * for wells made implausible by a disputed outlier (docs/qc.md, "The
 * verdict"): it names the well, the pair and how far the solution is from
 * it; where disputes are the only reason it gives no overlap advice (the
 * overlap is not in question, and estimate runs no overlap probe:
 * ts_qc_disputes_only), where another well has too many outliers it does;
 * a dispute in a well after the first failing one says "in this well";
 * names of the longest kind still leave the message its last words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "register/estimate_internal.h"

enum { CAP = sizeof(((ts_estimate_result *)0)->verdict_message) };

static const ts_overlap_qc measured_24 = {.pairs = 42, .measured = 30, .trusted = 28, .outliers = 1, .nominal = 24,
                                          .overlap = 24.3, .spread = 3.1};

/* A well of 42 + 42 pairs, 30 + 30 measured, `outliers` of them outliers. */
static ts_estimate_well_qc well(const char *name, int outliers) {
    ts_estimate_well_qc w;
    memset(&w, 0, sizeof w);
    snprintf(w.well, sizeof w.well, "%s", name);
    for (int d = 0; d < 2; d++) {
        w.dir[d] = measured_24;
        w.dir[d].outliers = d == 0 ? outliers : 0;
    }
    return w;
}

static void dispute(ts_estimate_well_qc *w, const char *a, const char *b, double px, int64_t n) {
    w->disputed = n;
    w->disputed_px = px;
    snprintf(w->worst_disputed[0], sizeof w->worst_disputed[0], "%s", a);
    snprintf(w->worst_disputed[1], sizeof w->worst_disputed[1], "%s", b);
    w->verdict = TS_VERDICT_IMPLAUSIBLE;
}

static ts_estimate_result result(ts_estimate_well_qc *wells, int n) {
    ts_estimate_result r;
    memset(&r, 0, sizeof r);
    r.overlap[0] = r.overlap[1] = measured_24;
    r.well_qc = wells;
    r.nwell_qc = n;
    r.verdict = TS_VERDICT_IMPLAUSIBLE;
    return r;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

static void test_dispute_only(void **state) {
    (void)state;
    ts_estimate_well_qc w[2] = {well("A/1", 0), well("A/2", 0)};
    dispute(&w[0], "A/1/001004", "A/1/001005", 54.36, 1);
    ts_estimate_result r = result(w, 2);
    char msg[CAP];
    ts_estimate_qc_message(&r, true, msg, sizeof msg);
    assert_true(ts_qc_disputes_only(&r));
    assert_non_null(strstr(msg, "in A/1 the solution is 54.4 px off pair A/1/001004 A/1/001005, which fits the "
                                "stage's rows and columns"));
    assert_non_null(strstr(msg, "(1 such pair): check the tiles around it"));
    assert_null(strstr(msg, "in this well"));
    /* no overlap advice: neither "looks wrong" nor the orientation flags */
    assert_null(strstr(msg, "looks wrong"));
    assert_null(strstr(msg, "orientation"));
    assert_true(ends_with(msg, " (--accept-poor writes it anyway)"));
}

static void test_dispute_beside_outliers(void **state) {
    (void)state;
    /* A/1: 13 of 60 measured pairs outliers (more than a fifth, 12, is implausible) */
    ts_estimate_well_qc w[2] = {well("A/1", 13), well("B/2", 0)};
    w[0].verdict = TS_VERDICT_IMPLAUSIBLE;
    dispute(&w[1], "B/2/000003", "B/2/000004", 41.2, 2);
    ts_estimate_result r = result(w, 2);
    char msg[CAP];
    ts_estimate_qc_message(&r, true, msg, sizeof msg);
    assert_false(ts_qc_disputes_only(&r));
    assert_non_null(strstr(msg, "implausible solution in 2 wells (A/1, ...)"));
    assert_non_null(strstr(msg, "in B/2 the solution is 41.2 px off pair B/2/000003 B/2/000004"));
    assert_non_null(strstr(msg, "(2 such pairs in this well)"));
    /* the outliers' well keeps the advice of an implausible solution */
    assert_non_null(strstr(msg, "check the orientation flags and the tiles"));
    /* and without the disputed well, the first alone is not "disputes only" */
    r.nwell_qc = 1;
    assert_false(ts_qc_disputes_only(&r));
}

static void test_long_names(void **state) {
    (void)state;
    char name[32], a[96], b[96];
    memset(name, 'W', sizeof name - 1), name[sizeof name - 1] = '\0';
    memset(a, 'a', sizeof a - 1), a[sizeof a - 1] = '\0';
    memset(b, 'b', sizeof b - 1), b[sizeof b - 1] = '\0';
    ts_estimate_well_qc w[2] = {well(name, 13), well(name, 0)};
    w[0].verdict = TS_VERDICT_IMPLAUSIBLE;
    dispute(&w[1], a, b, 1234.5, 1000);
    ts_estimate_result r = result(w, 2);
    r.overlap[0].probed = r.overlap[1].probed = true;
    char msg[CAP];
    ts_estimate_qc_message(&r, false, msg, sizeof msg);
    assert_true(strlen(msg) < sizeof msg - 1);
    assert_true(ends_with(msg, " (--accept-poor writes it anyway)"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispute_only),
        cmocka_unit_test(test_dispute_beside_outliers),
        cmocka_unit_test(test_long_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
