"""tessera solve against an independent least-squares solve.

Writes a pairs file with PyYAML (keys sorted, as PyYAML does), runs
`tessera solve --solver l2`, and solves the same weighted system with
scipy.sparse.linalg.lsqr, anchored the same way (each connected group
translated so its mean position is its mean grid position, the well then
shifted so the minimum is 0): positions must agree within 1e-3 px. Also
checks that PyYAML reads tessera's output (types, keys), the integer origins,
residuals and outliers, and the CLI's errors.
"""
import json
import os
import subprocess
import sys

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import lsqr
import yaml

BIN = os.environ["TESSERA_BIN"]
TMP = os.environ.get("TESSERA_TEST_TMP", "/tmp")
FLOOR = 1e-3


def make_well(rng, cols, rows, pitch, wrong=0.05, cut_col=None, drop=()):
    """Tiles on a grid, pairs = true differences + noise, some wrong."""
    names, truth = [], {}
    for y in range(rows):
        for x in range(cols):
            n = f"{x:03d}{y:03d}"
            names.append(n)
            truth[n] = (y * pitch[0] + rng.uniform(-20, 20), x * pitch[1] + rng.uniform(-20, 20))
    pairs = []
    for y in range(rows):
        for x in range(cols):
            a = f"{x:03d}{y:03d}"
            for dx, dy in ((1, 0), (0, 1)):
                if x + dx >= cols or y + dy >= rows:
                    continue
                if cut_col is not None and dx == 1 and x == cut_col:
                    continue
                b = f"{x + dx:03d}{y + dy:03d}"
                if a in drop or b in drop:
                    continue
                d = np.subtract(truth[b], truth[a]) + rng.normal(0, 0.3, 2)
                c = float(rng.uniform(0.6, 1.0))
                if rng.uniform() < wrong:
                    d = d + rng.uniform(50, 150, 2) * rng.choice([-1, 1], 2)
                    c = float(rng.uniform(0.01, 0.1))
                pairs.append((a, b, float(d[0]), float(d[1]), c))
    return names, pairs


def reference(names, pairs, weights):
    """Independent solve: lsqr on sqrt(w) (p_b - p_a) = sqrt(w) d, per axis."""
    idx = {n: i for i, n in enumerate(names)}
    n, m = len(names), len(pairs)
    a = np.array([idx[p[0]] for p in pairs])
    b = np.array([idx[p[1]] for p in pairs])
    d = np.array([[p[2], p[3]] for p in pairs])
    c = np.array([p[4] for p in pairs])
    if weights == "none":
        w = np.ones(m)
    elif weights == "linear":
        w = np.maximum(c, FLOOR)
    else:
        raise ValueError(weights)
    sw = np.sqrt(w)
    rows = np.concatenate([np.arange(m), np.arange(m)])
    A = sp.csr_matrix((np.concatenate([sw, -sw]), (rows, np.concatenate([b, a]))), shape=(m, n))
    pos = np.zeros((n, 2))
    for k in range(2):
        pos[:, k] = lsqr(A, sw * d[:, k], atol=1e-15, btol=1e-15, conlim=1e14, iter_lim=200000)[0]
    # Nominal pitch as tessera derives it: median measured dx of left/right
    # pairs, dy of top/bottom pairs.
    grid = np.array([[int(s[3:]), int(s[:3])] for s in names])  # (gy, gx)
    ga, gb = grid[a], grid[b]
    lr = (ga[:, 0] == gb[:, 0]) & (np.abs(gb[:, 1] - ga[:, 1]) == 1)
    tb = (ga[:, 1] == gb[:, 1]) & (np.abs(gb[:, 0] - ga[:, 0]) == 1)
    pitch = (np.median(d[tb, 0] * (gb[tb, 0] - ga[tb, 0])), np.median(d[lr, 1] * (gb[lr, 1] - ga[lr, 1])))
    target = grid * np.array(pitch)
    graph = sp.coo_matrix((np.ones(m), (a, b)), shape=(n, n))
    ncomp, label = connected_components(graph, directed=False)
    for g in range(ncomp):
        sel = label == g
        pos[sel] += (target[sel] - pos[sel]).mean(axis=0)
    pos -= pos.min(axis=0)
    res = pos[b] - pos[a] - d
    return pos, res, ncomp


def write_pairs(path, wells, tile_shape=(1024, 1280)):
    doc = {
        "total_translation": {},
        "tile_shape": list(tile_shape),
        "orientation": {"flipud": False, "fliplr": True, "rot90": 0},
        "tiles": {w: list(names) for w, (names, _) in wells.items()},
        "pairs": {w: [[f"{w}/{p[0]}", f"{w}/{p[1]}", p[2], p[3], p[4]] for p in pairs] for w, (_, pairs) in wells.items()},
    }
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)  # sorted keys: pairs and tiles before total_translation


def run(*args, expect=0):
    r = subprocess.run([BIN, "solve", *args], capture_output=True, text=True)
    if r.returncode != expect:
        sys.exit(f"tessera solve {' '.join(args)}: exit {r.returncode}, expected {expect}\n{r.stderr}")
    return r


def check_against_reference(wells, out, weights):
    with open(out) as f:
        doc = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert doc["tile_shape"] == [1024, 1280], doc["tile_shape"]
    assert doc["orientation"] == {"flipud": False, "fliplr": True, "rot90": 0}, doc["orientation"]
    worst = 0.0
    for w, (names, pairs) in wells.items():
        assert doc["tiles"][w] == names, "tile names must stay strings in order"
        ref, res, ncomp = reference(names, pairs, weights)
        got = np.array([doc["positions"][f"{w}/{n}"] for n in names], dtype=float)
        err = np.abs(got - ref).max()
        worst = max(worst, err)
        assert err < 1e-3, f"{w} ({weights}): max |tessera - lsqr| = {err:.2e} px"
        origins = np.array([doc["total_translation"][f"{w}/{n}"] for n in names])
        assert origins.dtype.kind == "i", "total_translation must hold integers"
        assert (origins == np.round(got)).all() and origins.min(axis=0).tolist() == [0, 0]
        got_res = np.array(doc["residuals"][w], dtype=float)
        assert np.abs(got_res - res).max() < 1e-3
        outliers = np.flatnonzero(np.hypot(res[:, 0], res[:, 1]) > 5.0).tolist()
        assert sorted(doc["outliers"][w]) == outliers, (doc["outliers"][w], outliers)
        assert len(doc["confidence"][w]) == len(pairs)
        e0 = doc["confidence"][w]["0"]
        a, b = pairs[0][0], pairs[0][1]
        assert e0[0] == [int(a[:3]), int(a[3:])] and e0[1] == [int(b[:3]), int(b[3:])] and e0[2] == pairs[0][4]
    return worst


def main():
    rng = np.random.default_rng(7)
    wells = {
        "A/1": make_well(rng, 15, 10, (900.0, 1100.0)),
        # two groups (no pair across column 3 -> 4) and an isolated tile
        "B/12": make_well(rng, 9, 6, (950.0, 1150.0), cut_col=3, drop={"008005"}),
    }
    src = os.path.join(TMP, "solve_scipy_pairs.yaml")
    out = os.path.join(TMP, "solve_scipy_out.yaml")
    write_pairs(src, wells)
    # The reference is the weighted system as given: without the loop check
    # (test_solve_loops.py compares that with scipy).
    for weights in ("linear", "none"):
        r = run(src, "-o", out, "--solver", "l2", "--edge-weights", weights, "--loop-check", "off", "--json")
        summary = json.loads(r.stdout)
        assert summary["wells"] == 2 and summary["isolated_tiles"] == 1 and summary["components"] == 4, summary
        worst = check_against_reference(wells, out, weights)
        print(f"l2 {weights}: max |tessera - scipy lsqr| = {worst:.2e} px")

    # L1 (default): runs, and its result on the good edges is closer to the truth than plain L2's.
    run(src, "-o", out, "--json")
    # The output is itself a valid input: solving it again gives the same positions.
    out2 = os.path.join(TMP, "solve_scipy_out2.yaml")
    run(out, "-o", out2)
    with open(out) as f1, open(out2) as f2:
        p1 = yaml.safe_load(f1)["positions"]
        p2 = yaml.safe_load(f2)["positions"]
    assert max(abs(p1[k][i] - p2[k][i]) for k in p1 for i in range(2)) < 2e-6  # written to 1e-6 px

    # A file without tile_shape whose pairs only run left/right: the y pitch
    # of the tile in another row comes from --tile; without it, an error.
    row = os.path.join(TMP, "solve_scipy_row.yaml")
    with open(row, "w") as f:
        f.write("total_translation: {}\ntiles:\n  C/2: ['000000', '001000', '002000', '000003']\npairs:\n  C/2:\n"
                "  - [C/2/000000, C/2/001000, 1.5, 900.0, 0.9]\n"
                "  - [C/2/001000, C/2/002000, -0.5, 902.0, 0.8]\n")
    r = run(row, "-o", out, expect=2)  # a usage error: the tile shape is needed
    assert "pitch" in r.stderr and "--tile" in r.stderr, r.stderr
    run(row, "-o", out, "--tile", "1000x1100")
    with open(out) as f:
        doc = yaml.safe_load(f)
    assert doc["tile_shape"] == [1000, 1100]
    p = doc["positions"]
    # The row's mean sits at its grid mean (x pitch 901 = median of the pairs);
    # the lone tile at grid (0, 3) with y pitch 1000 (the tile height).
    row_mean_y = np.mean([p[f"C/2/{n}"][0] for n in ("000000", "001000", "002000")])
    assert abs(p["C/2/000003"][0] - row_mean_y - 3000.0) < 1e-5, p  # positions: 1e-6 px
    row_mean_x = np.mean([p[f"C/2/{n}"][1] for n in ("000000", "001000", "002000")])
    assert abs(p["C/2/000003"][1] - (row_mean_x - 901.0)) < 1e-5, p

    # Errors: a NaN shift names the well and tiles; bad usage exits 2.
    bad = os.path.join(TMP, "solve_scipy_bad.yaml")
    with open(bad, "w") as f:
        f.write("total_translation: {}\ntile_shape: [100, 100]\npairs:\n  A/1:\n"
                "  - [A/1/000000, A/1/001000, 0.5, 90.0, 0.9]\n"
                "  - [A/1/000000, A/1/000001, .nan, 1.0, 0.9]\n")
    r = run(bad, "-o", out, expect=1)
    assert "NaN" in r.stderr and "000001" in r.stderr and bad in r.stderr, r.stderr
    run(src, "-o", out, "--solver", "l3", expect=2)
    run(src, expect=2)
    r = run(os.path.join(TMP, "does_not_exist.yaml"), "-o", out, expect=1)
    assert "does_not_exist.yaml" in r.stderr
    print("ok")


if __name__ == "__main__":
    main()
