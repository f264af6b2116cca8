#include "solve/laplacian.h"
#include "common/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cholmod.h>

struct ts_laplacian {
    int ntiles, n;          /* tiles, unknowns */
    int nedges;
    const int *a, *b;       /* caller's edge endpoints (tile indices) */
    const unsigned char *usable;
    const int *unknown;     /* caller's tile -> unknown map */
    int *diag_a, *diag_b;   /* per edge: value slot of the endpoint's diagonal, or -1 */
    int *off;               /* per edge: slot of the off-diagonal entry, or -1 */
    cholmod_common c;
    bool started;
    cholmod_sparse *A;      /* upper triangle, sorted columns */
    cholmod_factor *L;
    cholmod_dense *B;
    cholmod_dense *X;       /* the last solution (warm start), NULL before the first */
    double *work;           /* 4 x (n x 2): residual, search direction, A p, scratch */
    double *w_fact;         /* edge weights of the last factorisation */
    /* Large systems: the first factorisation uses AMD (cheap to compute),
     * while nested dissection (less fill, cheaper refactorisations, but
     * 10x the analysis time) is computed on a second thread for the
     * refactorisations IRLS needs; see ts_laplacian_prepare_refactor. */
    bool large;
    cholmod_common c_nd;    /* the nested-dissection analysis' own workspace */
    cholmod_common c_col;   /* the second CG column's (another thread) */
    bool started_nd, started_col;
    cholmod_sparse *A_pattern; /* a pattern-only copy of A for that thread */
    cholmod_factor *L_nd;   /* its result, NULL until joined (or on failure) */
    pthread_t nd_thread;
    bool nd_running, nd_joined;
    /* Large systems: the factorisation split along the elimination tree
     * (see factorize_split), planned for the factor it was computed for. */
    const cholmod_factor *plan_for;
    int nranges[3];         /* row ranges of thread 0, thread 1, then the top */
    int *ranges[3];         /* [lo, hi) pairs, in increasing order */
    bool no_split;          /* tests: cholmod_factorize on one thread */
    int split_factorisations; /* factorisations that took the split path (tests) */
};

/* Conjugate gradients: at most PCG_MAX_ITER steps before refactorising, and
 * converged when the residual is PCG_RTOL of the right-hand side (far below
 * the IRLS tolerance in px; checked against direct solves in the tests). */
#define PCG_MAX_ITER 12
#define PCG_RTOL 1e-12

/* Above this many unknowns: nested dissection for the refactorisations
 * (computed beside the first factorisation), and the two CG columns on two
 * threads. */
#define LARGE_SYSTEM 20000

/* CG is only tried when the new weights are close enough to those of the
 * last factorisation: each edge whose weight ratio leaves [1/PCG_BULK,
 * PCG_BULK] perturbs the preconditioned spectrum. Measured on a 200 x 200
 * grid with 2% wrong pairs: with more than ~3% of the edges changed CG never
 * converged within PCG_MAX_ITER steps (the early IRLS iterations), below ~1%
 * it mostly did; skipping the hopeless attempts saves their triangular
 * solves. */
#define PCG_BULK 1.1
#define PCG_MAX_CHANGED 0.02 /* fraction of the edges */

static void join_nd(ts_laplacian *lap) {
    if (lap->nd_running) pthread_join(lap->nd_thread, NULL);
    lap->nd_running = false;
    lap->nd_joined = true;
}

void ts_laplacian_free(ts_laplacian *lap) {
    if (!lap) return;
    join_nd(lap);
    if (lap->started_nd) {
        cholmod_free_factor(&lap->L_nd, &lap->c_nd);
        cholmod_free_sparse(&lap->A_pattern, &lap->c_nd);
        cholmod_finish(&lap->c_nd);
    }
    if (lap->started_col) cholmod_finish(&lap->c_col);
    for (int t = 0; t < 3; t++) free(lap->ranges[t]);
    if (lap->started) {
        cholmod_free_dense(&lap->B, &lap->c);
        cholmod_free_dense(&lap->X, &lap->c);
        cholmod_free_factor(&lap->L, &lap->c);
        cholmod_free_sparse(&lap->A, &lap->c);
        cholmod_finish(&lap->c);
    }
    free(lap->diag_a);
    free(lap->diag_b);
    free(lap->off);
    free(lap->work);
    free(lap->w_fact);
    free(lap);
}

static void sort_ints(int *v, int n) { /* columns hold a handful of rows */
    for (int i = 1; i < n; i++) {
        int x = v[i], j = i - 1;
        while (j >= 0 && v[j] > x) v[j + 1] = v[j], j--;
        v[j + 1] = x;
    }
}

static int find_row(const int *rows, int lo, int hi, int row) {
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (rows[mid] < row) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

ts_status ts_laplacian_create(int ntiles, const int *unknown, int nedges, const int *a, const int *b,
                              const unsigned char *usable, ts_laplacian **out, ts_error *err) {
    *out = NULL;
    ts_laplacian *lap = calloc(1, sizeof *lap);
    if (!lap) return ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
    lap->ntiles = ntiles;
    lap->nedges = nedges;
    lap->a = a;
    lap->b = b;
    lap->usable = usable;
    lap->unknown = unknown;
    int n = 0;
    for (int i = 0; i < ntiles; i++)
        if (unknown[i] >= 0) n++;
    lap->n = n;
    size_t ne = (size_t)(nedges ? nedges : 1);
    lap->diag_a = malloc(ne * sizeof(int));
    lap->diag_b = malloc(ne * sizeof(int));
    lap->off = malloc(ne * sizeof(int));
    if (!lap->diag_a || !lap->diag_b || !lap->off) goto nomem;
    if (n == 0) { /* nothing to factorise: every tile is fixed */
        for (int e = 0; e < nedges; e++) lap->diag_a[e] = lap->diag_b[e] = lap->off[e] = -1;
        *out = lap;
        return TS_OK;
    }

    /* Column j of the upper triangle holds rows i < j of its neighbours, then
     * the diagonal. Count, fill, sort and deduplicate (parallel pairs share
     * an entry). */
    int *cnt = calloc((size_t)n + 1, sizeof(int));
    if (!cnt) goto nomem;
    for (int e = 0; e < nedges; e++) {
        if (!usable[e]) continue;
        int ra = unknown[a[e]], rb = unknown[b[e]];
        if (ra >= 0 && rb >= 0 && ra != rb) cnt[ra > rb ? ra : rb]++;
    }
    int *start = malloc(((size_t)n + 1) * sizeof(int));
    if (!start) {
        free(cnt);
        goto nomem;
    }
    start[0] = 0;
    for (int j = 0; j < n; j++) start[j + 1] = start[j] + cnt[j] + 1;
    int *rows = malloc((size_t)start[n] * sizeof(int));
    if (!rows) {
        free(cnt);
        free(start);
        goto nomem;
    }
    memset(cnt, 0, (size_t)n * sizeof(int));
    for (int e = 0; e < nedges; e++) {
        if (!usable[e]) continue;
        int ra = unknown[a[e]], rb = unknown[b[e]];
        if (ra >= 0 && rb >= 0 && ra != rb) {
            int i = ra < rb ? ra : rb, j = ra < rb ? rb : ra;
            rows[start[j] + cnt[j]++] = i;
        }
    }
    size_t nnz = 0;
    for (int j = 0; j < n; j++) {
        int *r = rows + start[j];
        sort_ints(r, cnt[j]);
        int k = 0;
        for (int t = 0; t < cnt[j]; t++)
            if (k == 0 || r[k - 1] != r[t]) r[k++] = r[t];
        r[k++] = j;
        cnt[j] = k;
        nnz += (size_t)k;
    }

    cholmod_start(&lap->c);
    lap->started = true;
    lap->c.print = 0; /* the library never prints; errors come back through c.status */
    /* Measured on a 409 x 409 tile grid (167k unknowns): nested dissection
     * (NESDIS) gives the least fill (lnz 4.5M vs 5.7M for AMD, 4.8M for
     * METIS_NodeND) and the cheapest numeric factorisations (0.31 CPU s vs
     * 0.52 with AMD), but takes 0.63 s to compute against 0.05 for AMD. So
     * for IRLS the first factorisation uses AMD, and the nested dissection
     * for the refactorisations is computed meanwhile on a second core
     * (ts_laplacian_prepare_refactor). L2 factorises once, with nested
     * dissection: AMD would be faster (0.5 s for both), but its rounding
     * differs and moved a tile at 267257.5 px (to 1e-7) to the other
     * integer on the benchmark plate. The simplicial
     * factorisation beats the supernodal one with the reference BLAS Debian
     * links CHOLMOD to (0.3-0.45 s vs 0.6-0.85 s per numeric factorisation).
     * Small systems: CHOLMOD's default (AMD), everything on one thread. */
    lap->large = n > LARGE_SYSTEM;
    if (lap->large) {
        lap->c.nmethods = 1;
        lap->c.method[0].ordering = CHOLMOD_AMD;
        lap->c.postorder = 1;
    }
    lap->c.supernodal = CHOLMOD_SIMPLICIAL;
    lap->A = cholmod_allocate_sparse((size_t)n, (size_t)n, nnz, 1, 1, 1, CHOLMOD_REAL, &lap->c);
    lap->B = cholmod_zeros((size_t)n, 2, CHOLMOD_REAL, &lap->c);
    lap->work = calloc((size_t)n * 8, sizeof(double));
    lap->w_fact = malloc((size_t)(nedges ? nedges : 1) * sizeof(double));
    if (!lap->A || !lap->B || !lap->work || !lap->w_fact) {
        free(cnt);
        free(start);
        free(rows);
        goto nomem;
    }
    int *Ap = lap->A->p, *Ai = lap->A->i;
    Ap[0] = 0;
    for (int j = 0; j < n; j++) {
        memcpy(Ai + Ap[j], rows + start[j], (size_t)cnt[j] * sizeof(int));
        Ap[j + 1] = Ap[j] + cnt[j];
    }
    free(cnt);
    free(start);
    free(rows);
    memset(lap->A->x, 0, nnz * sizeof(double));

    for (int e = 0; e < nedges; e++) {
        lap->diag_a[e] = lap->diag_b[e] = lap->off[e] = -1;
        if (!usable[e]) continue;
        int ra = unknown[a[e]], rb = unknown[b[e]];
        if (ra >= 0) lap->diag_a[e] = Ap[ra + 1] - 1;
        if (rb >= 0) lap->diag_b[e] = Ap[rb + 1] - 1;
        if (ra >= 0 && rb >= 0 && ra != rb) {
            int i = ra < rb ? ra : rb, j = ra < rb ? rb : ra;
            lap->off[e] = find_row(Ai, Ap[j], Ap[j + 1] - 1, i);
        }
    }

    /* Symbolic analysis once: ordering and elimination structure. Large
     * systems: at the first solve (nested dissection), or for IRLS in
     * ts_laplacian_prepare_refactor (AMD, and nested dissection beside). */
    if (!lap->large) lap->L = cholmod_analyze(lap->A, &lap->c);
    if (!lap->large && !lap->L) {
        ts_laplacian_free(lap);
        return ts_fail(err, TS_ERR_NUMERIC, "solve: CHOLMOD analysis failed (status %d)", lap->c.status);
    }
    *out = lap;
    return TS_OK;
nomem:
    ts_laplacian_free(lap);
    return ts_fail(err, TS_ERR_NOMEM, "solve: out of memory for the %d-tile system", ntiles);
}

static void *nd_main(void *arg) {
    ts_laplacian *lap = arg;
    lap->L_nd = cholmod_analyze(lap->A_pattern, &lap->c_nd);
    return NULL;
}

void ts_laplacian_set_no_split(ts_laplacian *lap, bool no_split) { lap->no_split = no_split; }
int ts_laplacian_split_factorisations(const ts_laplacian *lap) { return lap->split_factorisations; }

void ts_laplacian_prepare_refactor(ts_laplacian *lap) {
    if (!lap->large || lap->started_nd || lap->nd_joined || lap->L) return;
    lap->L = cholmod_analyze(lap->A, &lap->c); /* AMD (NULL: the first solve analyses and reports) */
    if (!lap->L) return;
    cholmod_start(&lap->c_nd);
    lap->started_nd = true;
    lap->c_nd.print = 0;
    lap->c_nd.nmethods = 1;
    lap->c_nd.method[0].ordering = CHOLMOD_NESDIS;
    lap->c_nd.postorder = 1;
    lap->c_nd.supernodal = CHOLMOD_SIMPLICIAL;
    /* The thread reads its own copy of the pattern: the values of A are
     * refilled meanwhile. */
    lap->A_pattern = cholmod_copy_sparse(lap->A, &lap->c_nd);
    if (!lap->A_pattern) return; /* refactorisations keep the AMD analysis */
    lap->nd_running = pthread_create(&lap->nd_thread, NULL, nd_main, lap) == 0;
    if (!lap->nd_running) nd_main(lap);
}

/* Before a refactorisation: the nested dissection analysis replaces the
 * AMD one once it is there. Which analysis serves which factorisation does
 * not depend on the timing (the first: AMD; every later one: nested
 * dissection, waiting for it), so neither do the results. */
static void take_nd(ts_laplacian *lap) {
    if (!lap->started_nd || lap->nd_joined) return;
    join_nd(lap);
    if (!lap->L_nd) return; /* the analysis failed (memory): keep AMD's */
    cholmod_free_factor(&lap->L, &lap->c);
    lap->L = lap->L_nd;
    lap->L_nd = NULL;
    lap->plan_for = NULL;
}

static bool ensure_col_common(ts_laplacian *lap) {
    if (!lap->started_col) {
        cholmod_start(&lap->c_col);
        lap->c_col.print = 0;
        lap->started_col = true;
    }
    return true;
}

/* y = A x for one column (A symmetric, upper triangle stored). */
static void sym_matvec(const cholmod_sparse *A, const double *x, double *y) {
    int n = (int)A->ncol;
    const int *Ap = A->p, *Ai = A->i;
    const double *Ax = A->x;
    memset(y, 0, (size_t)n * sizeof(double));
    for (int j = 0; j < n; j++) {
        double xj = x[j], yj = 0;
        for (int k = Ap[j]; k < Ap[j + 1]; k++) {
            int i = Ai[k];
            double a = Ax[k];
            yj += a * x[i];
            if (i != j) y[i] += a * xj;
        }
        y[j] += yj;
    }
}

/* Preconditioned CG on column col of the system, from lap->X, with the
 * workspace cm (each thread its own). The columns are independent, so
 * solving them on one thread or two gives the same bytes. Returns true when
 * converged. */
static bool pcg_column(ts_laplacian *lap, int col, cholmod_common *cm) {
    int n = lap->n;
    double *x = (double *)lap->X->x + (size_t)col * n, *b = (double *)lap->B->x + (size_t)col * n;
    double *r = lap->work + (size_t)col * n, *p = r + 2 * (size_t)n, *q = p + 2 * (size_t)n;
    cholmod_dense R = *lap->B; /* a one-column view of r */
    R.ncol = 1;
    R.nzmax = (size_t)n;
    R.x = r;
    sym_matvec(lap->A, x, q);
    double bnorm = 0, rz = 0;
    for (int k = 0; k < n; k++) {
        r[k] = b[k] - q[k];
        bnorm += b[k] * b[k];
    }
    for (int it = 0;; it++) {
        double rr = 0;
        for (int k = 0; k < n; k++) rr += r[k] * r[k];
        if (rr <= PCG_RTOL * PCG_RTOL * bnorm) return true;
        if (it >= PCG_MAX_ITER) return false;
        cholmod_dense *Z = cholmod_solve(CHOLMOD_A, lap->L, &R, cm);
        if (!Z) return false;
        const double *z = Z->x;
        double rz_new = 0;
        for (int k = 0; k < n; k++) rz_new += r[k] * z[k];
        /* The first direction is z itself (p holds nothing yet: never read
         * it, 0 * garbage may be NaN). */
        if (it == 0 || rz == 0) {
            memcpy(p, z, (size_t)n * sizeof *p);
        } else {
            double beta = rz_new / rz;
            for (int k = 0; k < n; k++) p[k] = z[k] + beta * p[k];
        }
        rz = rz_new;
        cholmod_free_dense(&Z, cm);
        sym_matvec(lap->A, p, q);
        double pq = 0;
        for (int k = 0; k < n; k++) pq += p[k] * q[k];
        if (!(pq > 0)) return false;
        double alpha = rz / pq;
        for (int k = 0; k < n; k++) {
            x[k] += alpha * p[k];
            r[k] -= alpha * q[k];
        }
    }
}

typedef struct pcg_job {
    ts_laplacian *lap;
    bool ok;
} pcg_job;

static void *pcg_col1_main(void *arg) {
    pcg_job *j = arg;
    j->ok = pcg_column(j->lap, 1, &j->lap->c_col);
    return NULL;
}

/* CG on both columns (the y and x axes): on two threads for large systems,
 * the second with its own CHOLMOD workspace. Returns true when both
 * converged. */
static bool pcg(ts_laplacian *lap) {
    if (!lap->large) {
        bool ok0 = pcg_column(lap, 0, &lap->c);
        return pcg_column(lap, 1, &lap->c) && ok0;
    }
    ensure_col_common(lap);
    pcg_job j = {.lap = lap};
    pthread_t t;
    bool threaded = pthread_create(&t, NULL, pcg_col1_main, &j) == 0;
    bool ok0 = pcg_column(lap, 0, &lap->c);
    if (threaded) pthread_join(t, NULL);
    else pcg_col1_main(&j);
    return ok0 && j.ok;
}

/* ---- The factorisation on two threads ----
 *
 * CHOLMOD's simplicial factorisation (cholmod_rowfac) computes L one row at
 * a time; row k reads only rows of its descendants in the elimination tree
 * and writes only their columns. Two disjoint subtrees can therefore be
 * factorised at the same time (each thread its own CHOLMOD workspace), and
 * the rows above them (the top separators of the nested dissection) after
 * both. Every row is computed by the same arithmetic as in one
 * cholmod_factorize call, so the factor is the same bytes whatever the
 * threads' timing (test_solve_split checks it against cholmod_factorize). */

static bool push_range(int **v, int *n, int lo, int hi) {
    if (*n > 0 && (*v)[2 * *n - 1] == lo) { /* contiguous: extend */
        (*v)[2 * *n - 1] = hi;
        return true;
    }
    int *nv = realloc(*v, (size_t)(2 * (*n + 1)) * sizeof *nv);
    if (!nv) return false;
    nv[2 * *n] = lo;
    nv[2 * *n + 1] = hi;
    *v = nv;
    ++*n;
    return true;
}

typedef struct weighted {
    double w;
    int k;
} weighted;

static int cmp_weight_desc(const void *x, const void *y) { /* heaviest first, then by row */
    const weighted *a = x, *b = y;
    if (a->w != b->w) return a->w < b->w ? 1 : -1;
    return (a->k > b->k) - (a->k < b->k);
}

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* Deals the subtrees f[0..nf) to two threads, heaviest first to the lighter
 * one; owner[i] for sorted[i]; returns the imbalance (heavier - lighter) /
 * heavier. */
static double deal(const int *f, int nf, const double *work, weighted *sorted, int *owner) {
    for (int i = 0; i < nf; i++) sorted[i] = (weighted){work[f[i]], f[i]};
    qsort(sorted, (size_t)nf, sizeof *sorted, cmp_weight_desc);
    double load[2] = {0, 0};
    for (int i = 0; i < nf; i++) {
        owner[i] = load[0] <= load[1] ? 0 : 1;
        load[owner[i]] += sorted[i].w;
    }
    double hi = load[0] > load[1] ? load[0] : load[1], lo = load[0] + load[1] - hi;
    return hi > 0 ? (hi - lo) / hi : 1.0;
}

/* At most this many subtrees are dealt (a flat tree stops the splitting). */
#define SPLIT_MAX_SUBTREES 256

/* The plan: starting from the roots, the heaviest subtree is split (its
 * root row goes to the top part, computed after both threads) until the
 * subtrees can be dealt to two threads within 10% of each other, or the top
 * part would hold more than a third of the work. Work of row k ~ the
 * squared length of column k of L (ColCount, from the analysis). The
 * elimination tree is postordered (both orderings ask for it), so a subtree
 * is the contiguous rows [k - size + 1, k]. Returns false when out of memory
 * or when there is nothing to split; the factorisation then runs on one
 * thread. */
static bool plan_split(ts_laplacian *lap, const cholmod_sparse *S) {
    int n = lap->n;
    for (int t = 0; t < 3; t++) free(lap->ranges[t]), lap->ranges[t] = NULL, lap->nranges[t] = 0;
    lap->plan_for = NULL;
    size_t nn = (size_t)n;
    int *parent = malloc(nn * sizeof(int)), *size = malloc(nn * sizeof(int));
    int *first_child = malloc(nn * sizeof(int)), *next_sib = malloc(nn * sizeof(int));
    int *frontier = malloc(nn * sizeof(int)), *top = malloc(nn * sizeof(int)), *owner = malloc(nn * sizeof(int));
    double *work = malloc(nn * sizeof(double));
    weighted *sorted = malloc(nn * sizeof(weighted));
    bool ok = parent && size && first_child && next_sib && frontier && top && owner && work && sorted &&
              cholmod_etree((cholmod_sparse *)S, parent, &lap->c);
    const int *colcount = lap->L->ColCount;
    for (int k = 0; ok && k < n; k++) ok = parent[k] == -1 || parent[k] > k;
    if (ok) {
        for (int k = 0; k < n; k++) {
            size[k] = 1;
            work[k] = (double)colcount[k] * (double)colcount[k];
            first_child[k] = next_sib[k] = -1;
        }
        for (int k = 0; k < n; k++)
            if (parent[k] >= 0) size[parent[k]] += size[k], work[parent[k]] += work[k];
        for (int k = n - 1; k >= 0; k--)
            if (parent[k] >= 0) next_sib[k] = first_child[parent[k]], first_child[parent[k]] = k;
        for (int k = 0; ok && k < n; k++) /* postordered: a subtree is contiguous */
            ok = first_child[k] < 0 || first_child[k] - size[first_child[k]] == k - size[k];
    }
    int nf = 0, nt = 0;
    double total = 0, top_work = 0;
    for (int k = 0; ok && k < n; k++)
        if (parent[k] < 0) frontier[nf++] = k, total += work[k];
    while (ok && nf <= SPLIT_MAX_SUBTREES) {
        if (nf > 1 && deal(frontier, nf, work, sorted, owner) <= 0.1) break;
        int h = 0;
        for (int f = 1; f < nf; f++)
            if (work[frontier[f]] > work[frontier[h]]) h = f;
        int r = frontier[h];
        double own = (double)colcount[r] * (double)colcount[r];
        if (first_child[r] < 0 || top_work + own > total / 3) break;
        top[nt++] = r;
        top_work += own;
        frontier[h] = frontier[--nf];
        for (int c = first_child[r]; c >= 0; c = next_sib[c]) frontier[nf++] = c;
    }
    ok = ok && nf > 1;
    if (ok) {
        deal(frontier, nf, work, sorted, owner);
        for (int t = 0; ok && t < 2; t++) { /* each thread's subtrees in row order */
            int m = 0;
            for (int i = 0; i < nf; i++)
                if (owner[i] == t) frontier[m++] = sorted[i].k;
            qsort(frontier, (size_t)m, sizeof(int), cmp_int);
            for (int i = 0; ok && i < m; i++)
                ok = push_range(&lap->ranges[t], &lap->nranges[t], frontier[i] - size[frontier[i]] + 1, frontier[i] + 1);
        }
        qsort(top, (size_t)nt, sizeof(int), cmp_int);
        for (int i = 0; ok && i < nt; i++) ok = push_range(&lap->ranges[2], &lap->nranges[2], top[i], top[i] + 1);
    }
    free(parent);
    free(size);
    free(first_child);
    free(next_sib);
    free(frontier);
    free(top);
    free(owner);
    free(work);
    free(sorted);
    if (ok) lap->plan_for = lap->L;
    return ok;
}

typedef struct rowfac_job {
    ts_laplacian *lap;
    cholmod_sparse *S;
    bool ok;
} rowfac_job;

static bool rowfac_ranges(ts_laplacian *lap, cholmod_sparse *S, int t, cholmod_common *cm) {
    double beta[2] = {0, 0};
    for (int r = 0; r < lap->nranges[t]; r++)
        if (!cholmod_rowfac(S, NULL, beta, (size_t)lap->ranges[t][2 * r], (size_t)lap->ranges[t][2 * r + 1], lap->L,
                            cm))
            return false;
    return true;
}

static void *rowfac_main(void *arg) {
    rowfac_job *j = arg;
    j->ok = rowfac_ranges(j->lap, j->S, 1, &j->lap->c_col);
    return NULL;
}

/* Numeric factorisation of lap->A into lap->L: cholmod_factorize, or for
 * large systems the same rows on two threads. Returns false on failure
 * (lap->c.status, L->minor tell why). */
static bool factorize(ts_laplacian *lap) {
    if (!lap->large) return cholmod_factorize(lap->A, lap->L, &lap->c) && lap->c.status != CHOLMOD_NOT_POSDEF;
    cholmod_common *c = &lap->c;
    /* What cholmod_factorize does for an upper-stored matrix: S = triu(A(p,p)) */
    cholmod_sparse *A1 = cholmod_ptranspose(lap->A, 2, lap->L->Perm, NULL, 0, c);
    cholmod_sparse *S = A1 ? cholmod_transpose(A1, 2, c) : NULL;
    cholmod_free_sparse(&A1, c);
    if (!S) return false;
    ensure_col_common(lap);
    bool split = !lap->no_split && (lap->plan_for == lap->L || plan_split(lap, S));
    bool ok = true;
    if (!split) {
        cholmod_free_sparse(&S, c);
        return cholmod_factorize(lap->A, lap->L, c) && c->status != CHOLMOD_NOT_POSDEF;
    }
    int n = lap->n;
    double beta[2] = {0, 0};
    lap->split_factorisations++;
    if (lap->L->xtype == CHOLMOD_PATTERN) {
        /* As cholmod_factorize: LDL', exactly the space the analysis gives;
         * rows 0..0 only turns the symbolic factor into the identity. */
        lap->L->is_ll = c->final_ll ? 1 : 0;
        size_t grow2 = c->grow2;
        if (c->final_pack) c->grow2 = 0;
        ok = cholmod_rowfac(S, NULL, beta, 0, 0, lap->L, c);
        c->grow2 = grow2;
    } else {
        int *Lnz = lap->L->nz; /* a refactorisation: rows start empty */
        for (int k = 0; k < n; k++) Lnz[k] = 1;
        lap->L->minor = (size_t)n;
    }
    if (ok) {
        c->status = lap->c_col.status = CHOLMOD_OK;
        rowfac_job j = {.lap = lap, .S = S};
        pthread_t t;
        bool threaded = pthread_create(&t, NULL, rowfac_main, &j) == 0;
        bool ok0 = rowfac_ranges(lap, S, 0, c);
        if (threaded) pthread_join(t, NULL);
        else rowfac_main(&j);
        ok = ok0 && j.ok && lap->c_col.status == CHOLMOD_OK;
        if (ok) ok = rowfac_ranges(lap, S, 2, c);
        if (lap->c_col.status == CHOLMOD_NOT_POSDEF) c->status = CHOLMOD_NOT_POSDEF;
        ok = ok && c->status != CHOLMOD_NOT_POSDEF && lap->L->minor == (size_t)n;
    }
    cholmod_free_sparse(&S, c);
    return ok;
}

ts_status ts_laplacian_solve(ts_laplacian *lap, const double *w, const double (*d)[2], const double (*fixed)[2],
                             double (*pos)[2], bool reuse, bool *factorised, ts_error *err) {
    int n = lap->n;
    if (factorised) *factorised = false;
    if (n == 0) {
        for (int i = 0; i < lap->ntiles; i++) pos[i][0] = fixed ? fixed[i][0] : 0, pos[i][1] = fixed ? fixed[i][1] : 0;
        return TS_OK;
    }
    if (!lap->L) { /* a large system solved once (L2): nested dissection only */
        lap->c.method[0].ordering = CHOLMOD_NESDIS;
        lap->L = cholmod_analyze(lap->A, &lap->c);
        if (!lap->L) return ts_fail(err, TS_ERR_NUMERIC, "solve: CHOLMOD analysis failed (status %d)", lap->c.status);
    }
    double *Ax = lap->A->x, *Bx = lap->B->x;
    memset(Ax, 0, (size_t)((int *)lap->A->p)[n] * sizeof(double));
    memset(Bx, 0, (size_t)n * 2 * sizeof(double));
    for (int e = 0; e < lap->nedges; e++) {
        if (!lap->usable[e]) continue;
        double we = w[e];
        int ra = lap->unknown[lap->a[e]], rb = lap->unknown[lap->b[e]];
        /* Normal equations of w (p_b - p_a - d)^2: the Laplacian on the left,
         * +w d at b and -w d at a on the right. */
        if (ra >= 0) {
            Ax[lap->diag_a[e]] += we;
            Bx[ra] -= we * d[e][0];
            Bx[n + ra] -= we * d[e][1];
            if (rb < 0 && fixed) { /* b fixed: its known position moves to the right */
                Bx[ra] += we * fixed[lap->b[e]][0];
                Bx[n + ra] += we * fixed[lap->b[e]][1];
            }
        }
        if (rb >= 0) {
            Ax[lap->diag_b[e]] += we;
            Bx[rb] += we * d[e][0];
            Bx[n + rb] += we * d[e][1];
            if (ra < 0 && fixed) {
                Bx[rb] += we * fixed[lap->a[e]][0];
                Bx[n + rb] += we * fixed[lap->a[e]][1];
            }
        }
        if (lap->off[e] >= 0) Ax[lap->off[e]] -= we;
    }
    if (reuse && lap->X) {
        int outliers = 0, limit = (int)(PCG_MAX_CHANGED * lap->nedges);
        for (int e = 0; e < lap->nedges && outliers <= limit; e++) {
            if (!lap->usable[e] || (lap->unknown[lap->a[e]] < 0 && lap->unknown[lap->b[e]] < 0)) continue;
            double ratio = w[e] / lap->w_fact[e];
            outliers += ratio > PCG_BULK || ratio < 1.0 / PCG_BULK;
        }
        reuse = outliers <= limit;
    }
    if (!(reuse && lap->X && pcg(lap))) {
        if (lap->X) take_nd(lap); /* a refactorisation */
        if (!factorize(lap))
            return ts_fail(err, TS_ERR_NUMERIC,
                           "solve: the tile system is singular (CHOLMOD status %d at column %d of %d)", lap->c.status,
                           (int)lap->L->minor, n);
        if (factorised) *factorised = true;
        memcpy(lap->w_fact, w, (size_t)lap->nedges * sizeof *w);
        cholmod_dense *X = cholmod_solve(CHOLMOD_A, lap->L, lap->B, &lap->c);
        if (!X) return ts_fail(err, TS_ERR_NUMERIC, "solve: CHOLMOD solve failed (status %d)", lap->c.status);
        cholmod_free_dense(&lap->X, &lap->c);
        lap->X = X;
    }
    const double *Xx = lap->X->x;
    for (int i = 0; i < lap->ntiles; i++) {
        int r = lap->unknown[i];
        if (r >= 0) {
            pos[i][0] = Xx[r];
            pos[i][1] = Xx[n + r];
        } else if (fixed) {
            pos[i][0] = fixed[i][0];
            pos[i][1] = fixed[i][1];
        } else {
            pos[i][0] = pos[i][1] = 0.0;
        }
    }
    return TS_OK;
}
