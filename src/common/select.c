/* Order statistics (select.h). */
#include "common/select.h"

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
