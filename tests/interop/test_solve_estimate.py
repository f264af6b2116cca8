"""`tessera solve` on estimate's output, with estimate's options, gives
estimate's positions exactly, also on a plate whose blank tiles split it
into disconnected groups (issue 9: solve guessed the pitch from the median
pair instead of the nominal overlap, so the groups landed elsewhere). The
shifts file records the pitch estimate solved with (nominal_pitch); a file
without it (older tessera) still solves, with the median-pair pitch, and
its groups then keep their inner layout but move."""
import json
import os
import re
import subprocess
import sys

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_plates as rp  # noqa: E402
from interop_checks import finish  # noqa: E402

TMP = os.path.join(rp.TMP, "solve_estimate")
failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)
        print("FAIL:", msg)


def run(*args):
    p = subprocess.run([rp.BIN, *map(str, args)], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"FAIL: tessera {' '.join(map(str, args))}: {p.stderr}")
    return p


def section(path, key):
    """The text of a top-level key's block, as written."""
    text = open(path).read()
    m = re.search(r"^%s:.*?(?=^\S)" % key, text, re.S | re.M)
    return m.group(0) if m else None


def main():
    os.makedirs(TMP, exist_ok=True)
    plate = os.path.join(TMP, "p.zarr")
    # 25% blank tiles cut the 6x5 grid into groups; the nominal overlap (28)
    # differs from the true one (32) by less than the check's tolerance, so
    # the median pair's pitch (96) is not the nominal one (100).
    run("simulate", "-o", plate, "--grid", "6x5", "--tile", "128x128", "--overlap", 32, "--jitter", 3,
        "--blank", 0.25, "--seed", 1)
    for opts in ([], ["--solver", "l2"], ["--edge-weights", "linear"]):
        label = " ".join(opts) or "defaults"
        est = os.path.join(TMP, "est.yaml")
        again = os.path.join(TMP, "again.yaml")
        run("estimate", plate, "-o", est, "--overlap", 28, *opts)
        s = yaml.safe_load(open(est))
        check(s.get("nominal_pitch") == [100, 100], f"{label}: nominal_pitch {s.get('nominal_pitch')}")
        run("solve", est, "-o", again, *opts)
        for key in ("total_translation", "positions", "nominal_pitch"):
            a, b = section(est, key), section(again, key)
            check(a is not None and a == b, f"{label}: solve's {key} differs from estimate's")

    # The plate has several groups: else this would show nothing.
    p = run("estimate", plate, "-o", os.path.join(TMP, "j.yaml"), "--overlap", 28, "--json")
    j = json.loads(p.stdout)
    check(j["max_components"] >= 3, f"only {j['max_components']} groups: the plate does not test group placement")

    # A file without nominal_pitch (older tessera) still solves.
    est = os.path.join(TMP, "est.yaml")
    run("estimate", plate, "-o", est, "--overlap", 28)
    old = os.path.join(TMP, "old.yaml")
    with open(est) as f, open(old, "w") as g:
        g.writelines(ln for ln in f if not ln.startswith("nominal_pitch:"))
    solved = os.path.join(TMP, "old_solved.yaml")
    run("solve", old, "-o", solved)
    s = yaml.safe_load(open(solved))
    check("nominal_pitch" not in s and len(s["total_translation"]) == 30, "solve of a file without nominal_pitch")
    finish(failures)


if __name__ == "__main__":
    main()
