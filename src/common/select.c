/* Order statistics (select.h). */
#include "common/select.h"

#include <stddef.h>
#include <stdlib.h>

static int cmp_float(const void *x, const void *y) {
    float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

static void swap_float(float *a, float *b) {
    float t = *a;
    *a = *b, *b = t;
}

/* Quickselect with median-of-three pivots and a three-way partition (runs of
 * equal values, as blended integers give, stay linear); an input that
 * defeats the pivots for 64 rounds is finished with qsort. */
void ts_select_rank(float *s, size_t lo, size_t hi, size_t k) {
    for (int rounds = 0; hi - lo > 1; rounds++) {
        if (rounds == 64) {
            qsort(s + lo, hi - lo, sizeof *s, cmp_float);
            return;
        }
        float a = s[lo], b = s[lo + (hi - lo) / 2], c = s[hi - 1];
        float p = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        /* [lo, lt) < p, [lt, gt) == p, [gt, hi) > p */
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (s[i] < p) swap_float(&s[lt++], &s[i++]);
            else if (s[i] > p) swap_float(&s[i], &s[--gt]);
            else i++;
        }
        if (k < lt) hi = lt;
        else if (k >= gt) lo = gt;
        else return;
    }
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* ts_select_rank on doubles over v[0, n): Hoare partitions, median-of-three
 * pivots, qsort of what is left after 64 rounds of bad pivots. */
static void select_rank_double(double *v, size_t n, size_t k) {
    size_t lo = 0, hi = n - 1;
    for (int rounds = 0; hi > lo; rounds++) {
        if (rounds == 64) {
            qsort(v + lo, hi - lo + 1, sizeof *v, cmp_double);
            return;
        }
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        /* [lo, j] <= pivot <= [i, hi]; signed, as j can end at lo - 1. */
        ptrdiff_t i = (ptrdiff_t)lo, j = (ptrdiff_t)hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if ((ptrdiff_t)k <= j) hi = (size_t)j;
        else if ((ptrdiff_t)k >= i) lo = (size_t)i;
        else return; /* j < k < i: v[k] == pivot */
    }
}

double ts_median_double(double *v, size_t n) {
    select_rank_double(v, n, n / 2);
    if (n % 2) return v[n / 2];
    double below = v[0]; /* rank n/2 - 1: the largest of v[0, n/2) */
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > below) below = v[i];
    return 0.5 * (below + v[n / 2]);
}
