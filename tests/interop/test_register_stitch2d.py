"""Real SEM tiles (adamancer/stitch2d, 2 columns x 3 rows, 512x442 JPEG):
written as an OME-Zarr 0.4 plate with zarr-python, registered with
`tessera estimate`. Checks every pairwise measurement and the solved
positions against the reference origins of shared/testdata (within 2 px
after removing the global offset), and compares the pairwise shifts with
scikit-image's phase_cross_correlation on the same strips."""
import os
import sys

import numpy as np
from PIL import Image
from skimage.registration import phase_cross_correlation

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import register_plates as rp  # noqa: E402
from interop_checks import finish  # noqa: E402

TILES = os.path.join(rp.TESTDATA, "stitch2d", "tests", "tiles")
# Reference origins [y, x] from shared/testdata/README.md; key (column, row).
REFERENCE = {(0, 0): (0.0, 9.73), (0, 1): (395.92, 4.92), (0, 2): (791.53, 0.0),
             (1, 0): (2.28, 389.54), (1, 1): (398.64, 384.71), (1, 2): (794.42, 379.55)}


def name(col, row):
    return f"{col:03d}{row:03d}"


def main():
    failures = []
    tiles = {}
    for (col, row) in REFERENCE:
        path = os.path.join(TILES, f"stitch2d_ex[Grid@{col} {row}].jpg")
        tiles[name(col, row)] = np.array(Image.open(path).convert("L"))
    tmp = os.path.join(rp.TMP, "register_stitch2d")
    os.makedirs(tmp, exist_ok=True)
    plate = os.path.join(tmp, "plate.zarr")
    rp.write_plate(plate, tiles)
    out = os.path.join(tmp, "shifts.yaml")
    # Nominal overlaps from the acquisition (~26% of 512, ~10% of 442).
    summary = rp.run_estimate(plate, out, "--overlap-x", 133, "--overlap-y", 44)
    s = rp.read_shifts(out)
    pairs = rp.pairs_by_names(s)
    if summary["pairs"] != 7 or len(pairs) != 7:
        failures.append(f"expected 7 pairs, got {summary['pairs']}")

    print("pair            tessera dy,dx     reference dy,dx   conf   skimage dy,dx")
    for (col, row), ref in REFERENCE.items():
        for direction, nb in (("right", (col + 1, row)), ("below", (col, row + 1))):
            if nb not in REFERENCE:
                continue
            a, b = name(col, row), name(*nb)
            dy, dx, conf = pairs[(a, b)]
            want = np.subtract(REFERENCE[nb], ref)
            strip_shape = summary["strip_right" if direction == "right" else "strip_below"]
            sa, sb, off = rp.strips(tiles[a], tiles[b], direction, strip_shape)
            sk, _, _ = phase_cross_correlation(sa.astype(float), sb.astype(float), upsample_factor=20)
            sk = np.add(sk, off)
            print(f"{a}->{b}  {dy:8.2f},{dx:8.2f}  {want[0]:8.2f},{want[1]:8.2f}  {conf:.3f}  "
                  f"{sk[0]:8.2f},{sk[1]:8.2f}")
            err = np.hypot(dy - want[0], dx - want[1])
            if err > 2.0:
                failures.append(f"pair {a}->{b}: ({dy:.2f}, {dx:.2f}) is {err:.2f} px from the reference")
            if conf < 0.2:
                failures.append(f"pair {a}->{b}: confidence {conf:.3f} for a correct match")
            sk_err = np.hypot(*(sk - want))
            if sk_err <= 2.0 and np.hypot(dy - sk[0], dx - sk[1]) > 1.5:
                failures.append(f"pair {a}->{b}: tessera and scikit-image differ by more than 1.5 px")

    pos = s["positions"]
    got = np.array([pos[f"A/1/{name(*k)}"] for k in REFERENCE])
    ref = np.array(list(REFERENCE.values()))
    resid = got - ref
    resid -= resid.mean(axis=0)
    worst = np.abs(resid).max()
    print(f"solved positions: max error {worst:.2f} px after removing the global offset")
    if worst > 2.0:
        failures.append(f"solved positions off by up to {worst:.2f} px")
    tt = s["total_translation"]
    mins = np.min([v for v in tt.values()], axis=0)
    if list(mins) != [0, 0]:
        failures.append(f"total_translation minimum is {list(mins)}, not [0, 0]")

    finish(failures)


if __name__ == "__main__":
    main()
