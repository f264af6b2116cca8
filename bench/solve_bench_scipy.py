"""The scipy baseline of bench/solve_bench.sh: the same weighted system as
tessera's solve, L2 by scipy.sparse.linalg.lsmr (per axis), L1 by IRLS with
lsmr (warm-started, weights w0 / max(|r|, 0.5) from the 2-D residual, as
tessera), anchored the same way (group mean at the grid mean).

usage: solve_bench_scipy.py PREFIX L1_ITERATIONS [MAX_SCIPY_ITERATIONS]
"""
import resource
import sys
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import lsmr

EPS = 0.5


def load(prefix):
    raw = open(prefix + ".bin", "rb").read()
    n, m = np.frombuffer(raw, np.int32, 2)
    o = 8
    def take(dtype, count, shape=None):
        nonlocal o
        a = np.frombuffer(raw, dtype, count, o)
        o += a.nbytes
        return a.reshape(shape) if shape else a
    gx, gy = take(np.int32, n), take(np.int32, n)
    truth = take(np.float64, 2 * n, (n, 2))
    a, b = take(np.int32, m), take(np.int32, m)
    d = take(np.float64, 2 * m, (m, 2))
    c = take(np.float64, m)
    return n, m, gx, gy, truth, a, b, d, c


def solve(A0, w, d, x0=None):
    sw = np.sqrt(w)
    A = sp.diags(sw) @ A0
    x = np.zeros((A0.shape[1], 2))
    for k in range(2):
        x[:, k] = lsmr(A, sw * d[:, k], atol=1e-10, btol=1e-10, maxiter=100000,
                       x0=None if x0 is None else x0[:, k])[0]
    return x


def seams(x, truth, a, b):
    """Neighbour pairs whose solved offset is off the true one by > 2 px."""
    off = (x[b] - x[a]) - (truth[b] - truth[a])
    return int((np.hypot(off[:, 0], off[:, 1]) > 2.0).sum())


def gauge(x, target):
    x = x + (target - x).mean(axis=0)
    return x - x.min(axis=0)


def main():
    prefix, l1_iters = sys.argv[1], int(sys.argv[2])
    cap = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    n, m, gx, gy, truth, a, b, d, c = load(prefix)
    target = np.stack([gy * 1843.0, gx * 1843.0], axis=1)
    rows = np.concatenate([np.arange(m), np.arange(m)])
    A0 = sp.csr_matrix((np.concatenate([np.ones(m), -np.ones(m)]), (rows, np.concatenate([b, a]))), shape=(m, n))

    t0 = time.perf_counter()
    x2 = solve(A0, np.ones(m), d)
    t_l2 = time.perf_counter() - t0
    p2 = gauge(x2, target)
    tess = np.fromfile(prefix + ".l2.pos", np.float64).reshape(n, 2)
    print(f"scipy lsmr l2: seconds={t_l2:.3f} max|tessera-scipy|_px={np.abs(tess - p2).max():.2e}"
          f" seams_over_2px={seams(x2, truth, a, b)}")

    k = min(l1_iters, cap)
    x = x2
    t0 = time.perf_counter()
    for it in range(1, k):
        r = np.hypot(*(x[b] - x[a] - d).T)
        x = solve(A0, 1.0 / np.maximum(r, EPS), d, x0=x)
    t_l1 = time.perf_counter() - t0 + t_l2
    per = t_l1 / k
    print(f"scipy lsmr l1 (IRLS): seconds={t_l1:.3f} for {k} iterations ({per:.3f} s/iteration); "
          f"{l1_iters} iterations as tessera -> ~{per * l1_iters:.1f} s"
          f" seams_over_2px={seams(x, truth, a, b)} (after {k} iterations)"
          f" peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")


if __name__ == "__main__":
    main()
