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
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "interop"))
import register_bound as rb  # noqa: E402
import test_register_robust as trr  # noqa: E402

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
    bands = {}
    for name in recipes:
        key, _cols, _rows, tile, _overlap, _jitter, kw = trr.RECIPES[name]
        img = kw.get("gain", 1.0) * trr.specimen(key)
        noise = kw.get("noise", 2.0)
        sigma2 = noise * noise + 1.0 / 12.0
        gy, gx = rb.spectral_gradient(img)
        t_worst, ratios, ratios_t, zs, sds, errs = [], [], [], [], [], []
        bounds = {k: ([], [0.0]) for k in ("gradient", "time_delay", "time_delay_all")}
        for seed in seeds:
            p = trr.make_recipe(name, seed)
            ev, why = trr.run_plate(p, threads=1, binary=args.bin)
            if ev is None:
                raise SystemExit(why)
            infos, content = rb.plate_infos(p, img, gy, gx, tile, sigma2)
            for key, J, e in rb.pair_errors(p, content, infos["gradient"], ev["pairs"]):
                Jt = infos["time_delay"][key]
                ratios.append(float(e @ J @ e) / 2.0)
                ratios_t.append(float(e @ Jt @ e) / 2.0)
                z, sd = rb.errors_in_sd(e, Jt)
                zs.append(z), sds.append(sd), errs.append(e)
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
        bands[name] = rb.rms_by_band(zs, sds, errs)
    # The mean e'Je/2 above weighs every pair alike; most of its excess is
    # from pairs of sharp detail (sd under 0.06 px) whose errors are a few
    # hundredths of a pixel. By the size of the pair's bound:
    print(f"\ntessera's pair errors by the time-delay bound's standard deviation (sd, the larger axis): rms of "
          f"the error per axis in sds (an efficient estimator: 1.00), rms error px")
    print("| recipe | " + " | ".join(f"sd {lo:g}-{hi:g} px" for lo, hi in rb.SD_BANDS).replace("-inf", "+") + " |")
    print("|---|" + "---|" * len(rb.SD_BANDS))
    for name, rows in bands.items():
        cell = {(lo, hi): f"{z:.2f} sd, {e:.3f} px ({n} pairs)" for lo, hi, n, z, e in rows}
        print(f"| {name} | " + " | ".join(cell.get(b, "-") for b in rb.SD_BANDS) + " |")


if __name__ == "__main__":
    main()
