#!/usr/bin/env python3
"""Registration accuracy against its limit: the Cramer-Rao bound
(tests/interop/register_bound.py says how it is computed).

For the real-image plates of tests/interop/test_register_robust.py (the same
recipes, any seeds) this prints, per recipe, tessera's worst tile per plate
beside what an *efficient* estimator would give on the same plates: one whose
pair errors are Gaussian with the bound's covariance and whose solve is the
exact weighted least squares. No unbiased estimator does better on average;
where the bound itself leaves a tile over 0.3 px, a 0.3 px target is beyond
what the pixels hold.

Three bounds: the gradient bound over tessera's pairs (grid neighbours with
content), the time-delay bound over the same pairs (which also charges for
learning a faint scene from noisy views: the reachable one), and the
time-delay bound over every overlap (diagonal neighbours too: the limit of
any method on these pixels). Also printed, per pair with content on both
sides: tessera's squared error in units of the bound, e^T J e / 2 (mean 1,
median 0.69 for an efficient estimator).

Meaningful for the phase-contrast recipes (smooth texture under read
noise), hence the default; on the others (galaxies, IHC, SEM) the bound
is 10-20x below what interpolating the pixels can give (register_bound.py).

    /usr/bin/python3 bench/register_crb.py [--bin build/tessera]
        [--seeds 101-160] [--recipes cell16_blank,cell24] [--draws 1000]
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
import register_bound as rb  # noqa: E402
import test_register_robust as trr  # noqa: E402

# name: (image, cols, rows, tile, overlap, jitter, make() keywords), as in
# test_register_robust.plates().
RECIPES = {
    "cell24": ("cell", 6, 9, (160, 200), 24, 7, dict(noise=1.5)),
    "cell16_blank": ("cell", 6, 9, (160, 200), 16, 5, dict(blank=0.1, noise=1.5)),
    "ihc16_blank": ("ihc", 8, 8, 128, 16, 5, dict(blank=0.1)),
    "hubble5pct": ("hubble", 5, 4, 200, 10, 3, dict(noise=3.0)),
    "sem_rot": ("sem", 5, 7, 160, 24, 7, dict(rot90=1, fliplr=True)),
}


def images(names):
    out = {}
    if "cell" in names:
        out["cell"] = trr.zoom(trr.gray("cell.png"), 1.5)
    if "ihc" in names:
        out["ihc"] = trr.zoom(trr.gray("ihc.png"))
    if "hubble" in names:
        out["hubble"] = trr.gray("hubble_deep_field.jpg")
    if "sem" in names:
        out["sem"] = trr.sem_mosaic()
    return out


def run_tessera(binary, p):
    out = os.path.join(trr.TMP, p["name"] + ".yaml")
    cmd = [binary, "estimate", p["plate"], "-o", out, "--json", "--threads", "1", "--accept-poor",
           *map(str, p["args"])]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}: {r.stderr.strip()}")
    ev = trr.evaluate(p, out, json.loads(r.stdout))
    with open(out) as f:
        pairs = yaml.safe_load(f)["pairs"]["A/1"]
    return ev, {(a.split("/")[-1], b.split("/")[-1]): (dy, dx) for a, b, dy, dx, *_ in pairs}


def parse_seeds(s):
    out = []
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("TESSERA_BIN", "build/tessera"))
    ap.add_argument("--seeds", default="101-160")
    ap.add_argument("--recipes", default="cell16_blank,cell24")
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--limit", type=float, default=0.3, help="the float target, px")
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    recipes = args.recipes.split(",")
    imgs = images({RECIPES[r][0] for r in recipes})
    rng = np.random.default_rng(12345)
    lim = args.limit
    print(f"worst tile per plate (float px, median offset removed), {len(seeds)} seeds; "
          f"bound: an efficient estimator on the same plates ({args.draws} draws per plate)")
    print(f"| recipe | plates | tessera: mean worst | plates > {lim} | "
          f"gradient bound: mean worst | expected plates > {lim} | "
          f"time-delay bound: mean worst | expected plates > {lim} | "
          f"time-delay bound, every overlap: mean worst | expected plates > {lim} | "
          f"tessera's pair error / gradient bound: mean (median) of e'Je/2 | the same / time-delay bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in recipes:
        key, cols, rows, tile, overlap, jitter, kw = RECIPES[name]
        img = imgs[key]
        gain, noise = kw.get("gain", 1.0), kw.get("noise", 2.0)
        sigma2 = noise * noise + 1.0 / 12.0
        gy, gx = rb.spectral_gradient(gain * img)
        th, tw = (tile, tile) if np.isscalar(tile) else tile
        t_worst, ratios, ratios_t = [], [], []
        bounds = {k: ([], [0.0]) for k in ("det", "tde", "tde_all")}
        for seed in seeds:
            p = trr.make(f"{name}_s{seed}", img, cols, rows, tile, overlap, jitter, seed=seed, **kw)
            ev, measured = run_tessera(args.bin, p)
            content = [n for n in sorted(p["origins"]) if n not in p["blank"]]
            at = {n: i for i, n in enumerate(content)}
            infos = {k: {} for k in bounds}
            for a in content:
                for b in content:
                    if a >= b:
                        continue
                    oa, ob = p["origins"][a], p["origins"][b]
                    Jt = rb.pair_information_tde(gain * img, gy, gx, oa, ob, th, tw, sigma2)
                    if Jt is None:
                        continue
                    dc, dr = abs(int(a[:3]) - int(b[:3])), abs(int(a[3:]) - int(b[3:]))
                    infos["tde_all"][(at[a], at[b])] = Jt
                    if dc + dr != 1:
                        continue
                    J = rb.pair_information(gy, gx, oa, ob, th, tw, sigma2)
                    infos["det"][(at[a], at[b])] = J
                    infos["tde"][(at[a], at[b])] = Jt
                    if (a, b) in measured:
                        e = np.subtract(measured[(a, b)], np.subtract(ob, oa))
                        ratios.append(float(e @ J @ e) / 2.0)
                        ratios_t.append(float(e @ Jt @ e) / 2.0)
            t_worst.append(ev["max"])
            for k, (worst, over) in bounds.items():
                w = rb.worst_tile_draws(len(content), infos[k], rng, args.draws)
                worst.append(w.mean())
                over[0] += float((w > lim).mean())
        t_worst = np.array(t_worst)
        cells = " | ".join(f"{np.mean(w):.3f} | {o[0]:.1f}" for w, o in bounds.values())
        print(f"| {name} | {len(seeds)} | {t_worst.mean():.3f} | {(t_worst > lim).sum()} | {cells} | "
              f"{np.mean(ratios):.2f} ({np.median(ratios):.2f}) | {np.mean(ratios_t):.2f} ({np.median(ratios_t):.2f}) |",
              flush=True)


if __name__ == "__main__":
    main()
