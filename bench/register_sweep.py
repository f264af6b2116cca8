#!/usr/bin/env python3
"""Registration trust over many simulated plates with blank tiles.

`tessera simulate --truth` plates (nine layouts: 6x6 tiles of 256^2 with a
32 px overlap and 8 px jitter, 7x7 of 128^2 / 24 / 6, 8x8 of 128^2 / 16 / 5,
each with 20%, 30% and 40% blank tiles) at every seed given, estimated with
--accept-poor. Blank tiles leave bare background in many overlaps, where a
wrong pair is easy to take; the figures say how far that carries:

- per block of plates: the worst tile with content per plate (its error
  after the plate's median offset is removed: mean, plates over 8 px and
  over 20 px), written pairs more than 3 px off the truth (wrong) and
  within it (right), refused pairs and the plates whose verdict is not ok;
  the tiles in no pair of the file, how many of them have content, and how
  many the run named stranded (docs/qc.md: they should be those);
- the same for the baseline, in the same run on the same plates: --base (a
  second binary), else this binary with --no-stage-model (the first pass
  alone); and the plates that got better or worse by more than 1 px.

The figures of docs/register.md ("Refused pairs", "Weak pairs") come from

    /usr/bin/python3 bench/register_sweep.py --bin build/tessera \
        [--base OLD/tessera] [--seeds 1-20] [--jobs 2] [--list]

--list prints each plate whose worst tile differs by more than 1 px between
the two runs, and each wrong written pair with its confidence.

--half runs, instead of the nine layouts, 10x10 tiles of 160 px with a
20 px overlap and a jitter of +-10 px (half the overlap: true overlaps
0-40 px), with no blank tiles and with 20% (docs/register.md, "Known
limits").

--real runs the real-image recipes of tests/interop/test_register_robust.py
instead (cell24, cell16_blank, ihc16_blank, hubble5pct, sem_rot; --seeds
101-160 there): per recipe the worst tile with content per plate (float,
mean and max), the plates over 0.3 px and with a tile over 1 px (rounded),
the tiles in no pair, with content and named stranded as above, and with
--base the plates whose worst tile or written pairs differ.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
import register_plates as rp  # noqa: E402

LAYOUTS = [(grid, tile, ov, jit, blank)
           for grid, tile, ov, jit in (("6x6", 256, 32, 8), ("7x7", 128, 24, 6), ("8x8", 128, 16, 5))
           for blank in (0.2, 0.3, 0.4)]
# --half: a stage that moves each tile by up to half the overlap (true
# overlaps 0-40 px for the nominal 20: beyond issue 10's test set, which
# goes down to 40% of the nominal), with no blank tiles and a fifth blank.
HALF_LAYOUTS = [("10x10", 160, 20, 10, blank) for blank in (0.0, 0.2)]


def parse_seeds(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def plate_name(layout, seed):
    grid, tile, ov, jit, blank = layout
    return f"g{grid}_t{tile}_o{ov}_j{jit}_b{blank}_s{seed}"


def simulate(tmp, layout, seed):
    """The plate, its truth and its tiles with content (std > 60: blank
    tiles show only noise and vignetting)."""
    grid, tile, ov, jit, blank = layout
    name = plate_name(layout, seed)
    plate, truth = os.path.join(tmp, name + ".zarr"), os.path.join(tmp, name + ".truth.yaml")
    subprocess.run([BIN, "simulate", "-o", plate, "--grid", grid, "--tile", f"{tile}x{tile}", "--overlap", str(ov),
                    "--jitter", str(jit), "--blank", str(blank), "--seed", str(seed), "--format", "0.4", "-q",
                    "--truth", truth], check=True, capture_output=True)
    t = load(truth)["positions"]
    return plate, t, rp.content_tiles(plate, t)


def measure(run, tmp, tag, plate, ov, t, content):
    binary, extra = run
    out = os.path.join(tmp, os.path.basename(plate) + f".{tag}.yaml")
    p = subprocess.run([binary, "estimate", plate, "-o", out, "--overlap", str(ov), "--accept-poor", "--json", *extra],
                       capture_output=True, text=True)
    if p.returncode:
        return {"failed": p.stderr.strip()[-300:]}
    j, s = json.loads(p.stdout), load(out)
    worst_tile, worst = rp.worst_tile(s["positions"], t, content)
    wrong, right = [], 0
    for a, b, dy, dx, c in s["pairs"]["A/1"]:
        e = float(np.hypot(dy - (t[b][0] - t[a][0]), dx - (t[b][1] - t[a][1])))
        if e > 3:
            wrong.append((a.split("/")[-1], b.split("/")[-1], round(e, 1), round(float(c), 2)))
        else:
            right += 1
    alone, with_content = tiles_alone(s, content)
    return {"worst": worst, "worst_tile": worst_tile,
            "wrong": wrong, "right": right, "refused": j.get("refused_pairs", 0),
            "verdict": j["well_qc"][0].get("verdict"), "alone": alone, "alone_content": with_content,
            "stranded": j["well_qc"][0].get("stranded_tiles", 0)}


def tiles_alone(s, content):
    """Of the shifts file s: the tiles in no pair (they land on their stage
    positions), and how many of them have content (names in content)."""
    paired = {t for pairs in s["pairs"].values() for a, b, *_ in pairs for t in (a, b)}
    alone = [n for n in s["positions"] if n not in paired]
    return len(alone), sum(n in content for n in alone)


def one(layout, seed, bins):
    with tempfile.TemporaryDirectory(prefix="tsweep") as tmp:
        plate, t, content = simulate(tmp, layout, seed)
        return {tag: measure(run, tmp, tag, plate, layout[2], t, content) for tag, run in bins.items()}


def block(results, tag):
    ok = [r[tag] for r in results if "failed" not in r[tag]]
    w = np.array([r["worst"] for r in ok])
    return (f"{tag}: {len(ok)} plates ({len(results) - len(ok)} failed): worst tile with content mean {w.mean():.2f} px, "
            f"> 8 px {int((w > 8).sum())}, > 20 px {int((w > 20).sum())}; written pairs wrong (> 3 px) "
            f"{sum(len(r['wrong']) for r in ok)}, right {sum(r['right'] for r in ok)}; refused "
            f"{sum(r['refused'] for r in ok)}; verdict not ok {sum(r['verdict'] != 'ok' for r in ok)}; "
            f"tiles in no pair {sum(r['alone'] for r in ok)}, with content {sum(r['alone_content'] for r in ok)}, "
            f"named stranded {sum(r['stranded'] for r in ok)} (plates where the two differ: "
            f"{sum(r['alone_content'] != r['stranded'] for r in ok)})")


def real(args, bins):
    import test_register_robust as trr
    seeds = parse_seeds(args.seeds)
    for recipe in trr.RECIPES:
        cases = [trr.make_recipe(recipe, s) for s in seeds]
        res = {}
        for tag, (b, extra) in bins.items():
            with cf.ThreadPoolExecutor(args.jobs) as ex:
                res[tag] = list(ex.map(lambda p: trr.run_plate(p, extra, threads=1, binary=b), cases))
        for tag in bins:
            ok = [r for r, e in res[tag] if r]
            w = np.array([r["max"] for r in ok])
            print(f"{recipe} {tag}: {len(ok)} plates, worst tile mean {w.mean():.3f} max {w.max():.3f} px, "
                  f"over 0.3 px {int((w > 0.3).sum())}, a tile over 1 px {sum(r['over1'] > 0 for r in ok)}; "
                  f"tiles in no pair {sum(r['alone'] for r in ok)}, with content "
                  f"{sum(r['alone_content'] for r in ok)}, named stranded {sum(r['stranded'][0] or 0 for r in ok)}")
        for s, (a, _), (b, _) in zip(seeds, res["new"], res["base"]):
            if a and b and (abs(a["max"] - b["max"]) > 1e-6 or a["pairs"] != b["pairs"]):
                print(f"  seed {s}: {b['max']:.3f} -> {a['max']:.3f} px"
                      f"{'' if a['pairs'] == b['pairs'] else ', pairs differ'}")
    return 0


def main():
    global BIN
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/tessera")
    ap.add_argument("--base", help="the baseline binary (default: --bin with --no-stage-model)")
    ap.add_argument("--seeds", default="1-20")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--real", action="store_true", help="the real-image recipes instead")
    ap.add_argument("--half", action="store_true",
                    help="10x10 tiles of 160 px, overlap 20, jitter +-10 (half the overlap), 0%% and 20%% blank")
    args = ap.parse_args()
    BIN = os.path.abspath(args.bin)
    bins = {"new": (BIN, []),
            "base": (os.path.abspath(args.base), []) if args.base else (BIN, ["--no-stage-model"])}
    print(f"new: {BIN}; base: {' '.join([bins['base'][0], *bins['base'][1]])}")
    if args.real:
        return real(args, bins)
    cases = [(lay, s) for s in parse_seeds(args.seeds) for lay in (HALF_LAYOUTS if args.half else LAYOUTS)]
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda c: one(c[0], c[1], bins), cases))
    for tag in bins:
        print(block(results, tag))
    both = [(c, r) for c, r in zip(cases, results) if "failed" not in r["new"] and "failed" not in r["base"]]
    better = sum(r["new"]["worst"] < r["base"]["worst"] - 1 for _, r in both)
    worse = sum(r["new"]["worst"] > r["base"]["worst"] + 1 for _, r in both)
    print(f"plates better by > 1 px: {better}, worse by > 1 px: {worse}")
    if args.list:
        for (lay, s), r in zip(cases, results):
            n = r["new"]
            if "failed" in n:
                print(f"{plate_name(lay, s)}: failed: {n['failed']}")
                continue
            line = f"{plate_name(lay, s)}: worst {n['worst']:.1f} ({n['worst_tile']})"
            if "failed" not in r["base"]:
                line += f", base {r['base']['worst']:.1f}"
                if abs(r["base"]["worst"] - n["worst"]) <= 1 and not n["wrong"]:
                    continue
            elif not n["wrong"]:  # (the baseline failed)
                continue
            print(line + (f"; wrong pairs {n['wrong']}" if n["wrong"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
