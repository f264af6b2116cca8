/* The stage model of the loop check (loop_model.h): per direction and grid
 * line the median offset of the edges a closing loop vouches for, as the
 * stage model of estimate does from its trusted pairs
 * (src/register/stage_model.c). Per line, so that a slipped row, whose
 * right pairs agree with each other, has a model that follows it; the
 * direction's median where a line has too few edges to say. */
#include "solve/loop_model.h"
#include "common/select.h"

#include <math.h>
#include <stdlib.h>

/* A line of fewer vouched edges predicts with its direction's median (as
 * MODEL_MIN_LINE of stage_model.c). */
#define LINE_MIN_EDGES 3

typedef struct line_key {
    int64_t key; /* dir, then line */
    int edge;
} line_key;

static int cmp_key(const void *p, const void *q) {
    const line_key *a = p, *b = q;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->edge > b->edge) - (a->edge < b->edge);
}

int ts_loop_model_fit(int ne, const unsigned char *dir, const int64_t *line, const double (*dn)[2],
                      const unsigned char *vouched, double (*pred)[2], double spread[2][2]) {
    line_key *k = malloc((size_t)(ne ? ne : 1) * sizeof *k);
    double *v = malloc((size_t)(ne ? ne : 1) * sizeof *v);
    if (!k || !v) {
        free(k), free(v);
        return -1;
    }
    double whole[2][2];
    for (int d = 0; d < 2; d++)
        for (int x = 0; x < 2; x++) {
            int nv = 0;
            for (int i = 0; i < ne; i++)
                if (dir[i] == d && vouched[i]) v[nv++] = dn[i][x];
            whole[d][x] = nv ? ts_median_double(v, (size_t)nv) : NAN;
        }
    for (int i = 0; i < ne; i++) {
        /* Lines are grid coordinates (< 2^31 apart, loops.c's key). */
        k[i].key = (int64_t)dir[i] * ((int64_t)1 << 32) + line[i];
        k[i].edge = i;
    }
    qsort(k, (size_t)ne, sizeof *k, cmp_key);
    for (int s = 0; s < ne;) {
        int e = s;
        while (e < ne && k[e].key == k[s].key) e++;
        int d = dir[k[s].edge];
        double med[2];
        for (int x = 0; x < 2; x++) {
            int nv = 0;
            for (int j = s; j < e; j++)
                if (vouched[k[j].edge]) v[nv++] = dn[k[j].edge][x];
            med[x] = nv >= LINE_MIN_EDGES ? ts_median_double(v, (size_t)nv) : whole[d][x];
        }
        for (int j = s; j < e; j++) pred[k[j].edge][0] = med[0], pred[k[j].edge][1] = med[1];
        s = e;
    }
    for (int d = 0; d < 2; d++)
        for (int x = 0; x < 2; x++) {
            int nv = 0;
            for (int i = 0; i < ne; i++)
                if (dir[i] == d && vouched[i]) v[nv++] = fabs(dn[i][x] - pred[i][x]);
            spread[d][x] = nv ? 1.4826 * ts_median_double(v, (size_t)nv) : 0;
        }
    free(k);
    free(v);
    return 0;
}
