"""tessera solve on the pairs of a real estimate run (simulate -> estimate ->
solve): re-solving reproduces estimate's own solution, every solver and
weighting lands within a pixel of the simulated truth, and the old tool's
reader (PyYAML, total_translation only) reads the result."""
import os
import subprocess
import sys

import numpy as np
import yaml

BIN = os.environ["TESSERA_BIN"]
TMP = os.path.join(os.environ.get("TESSERA_TEST_TMP", "/tmp"), "solve_pipeline")
os.makedirs(TMP, exist_ok=True)


def tessera(*args):
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tessera {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def origins(doc, key="total_translation"):
    t = {k: np.array(v, dtype=float) for k, v in doc[key].items()}
    m = np.min(np.stack(list(t.values())), axis=0)
    return {k: v - m for k, v in t.items()}


def main():
    plate, truth = os.path.join(TMP, "plate.zarr"), os.path.join(TMP, "truth.yaml")
    est = os.path.join(TMP, "est.yaml")
    tessera("simulate", "-o", plate, "--grid", "7x5", "--tile", "192x224", "--overlap", "36",
            "--jitter", "5", "--truth", truth, "--seed", "11")
    tessera("estimate", plate, "-o", est, "--overlap", "36", "--solver", "l2")
    want = origins(load(truth))
    e = load(est)
    assert len(e["pairs"]["A/1"]) == 6 * 5 + 7 * 4, "all neighbour pairs measured"

    # Re-solving with the same options reproduces estimate's positions (one
    # group: the gauge translation cancels in the well frame).
    out = os.path.join(TMP, "re_l2.yaml")
    tessera("solve", est, "-o", out, "--solver", "l2")
    r = load(out)
    for k, v in e["positions"].items():
        assert np.abs(np.array(r["positions"][k]) - v).max() < 2e-6, k  # written to 1e-6 px
    assert r["total_translation"] == e["total_translation"]

    for solver, weights in (("l2", "none"), ("l1", "none"), ("l1", "linear"), ("l2", "squared"),
                            ("l2", "threshold:0.3")):
        out = os.path.join(TMP, f"re_{solver}_{weights.replace(':', '_')}.yaml")
        tessera("solve", est, "-o", out, "--solver", solver, "--edge-weights", weights)
        got = origins(load(out))
        assert set(got) == set(want)
        err = max(np.abs(got[k] - want[k]).max() for k in want)
        print(f"{solver} {weights}: max |origin - truth| = {err:.0f} px")
        assert err <= 1, (solver, weights, err)
    print("ok")


if __name__ == "__main__":
    main()
