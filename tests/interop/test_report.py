"""The QC report (issue 9): `tessera estimate --report FILE.html` (and
stitch) writes one self-contained HTML file. Read back with Python's HTML
parser: per well one SVG with a tile per position at its origin, a seam per
measured pair, the tiles without a usable pair marked as fallback (as many
as --json counts isolated), the per-direction figures equal to --json's,
the worst seams sorted by residual; no script, no external resource. Then
opened in headless Chromium (Debian's chromium): the screenshot shows the
seams (green), the fallback tiles and the tables. A report inside an input
is refused; a failed check writes none."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

import numpy as np
import yaml
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="report_", dir=os.environ.get("TESSERA_TEST_TMP"))


def path(*p):
    return os.path.join(TMP, *p)


class Report(HTMLParser):
    def __init__(self):
        super().__init__()
        self.wells = {}            # well -> {"tiles": [...], "seams": [...], "fallback": n}
        self.well = None
        self.tags = set()
        self.external = []
        self.cell = None
        self.rows = []             # table rows (lists of cell texts), in order
        self.row = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        for k in ("src", "href"):
            if k in a:
                self.external.append(a[k])
        if tag == "section" and a.get("class") == "well":
            self.well = a["id"][len("well-"):]
            self.wells[self.well] = {"tiles": [], "seams": [], "fallback": 0}
        if tag == "rect" and "tile" in a.get("class", "").split():
            w = self.wells[self.well]
            w["tiles"].append((int(a["y"]), int(a["x"])))
            w["fallback"] += "fallback" in a["class"].split()
        if tag == "line" and "seam" in a.get("class", "").split():
            self.wells[self.well]["seams"].append(a)
        if tag == "tr":
            self.row = []
        if tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.row is not None:
            self.row.append(self.cell.strip())
            self.cell = None
        if tag == "tr":
            self.rows.append((self.well, self.row))
            self.row = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


plate = path("plate.zarr")
run("simulate", "-o", plate, "--grid", "6x5", "--tile", "200x240", "--overlap", "40", "--jitter", "6",
    "--blank", "0.15", "--seed", "4", "--wells", "A/1,B/2")
html = path("qc.html")
p = run("estimate", plate, "-o", path("s.yaml"), "--overlap", "40", "--report", html, "--json", "-q")
summary = json.loads(p.stdout)
rep = Report()
with open(html, encoding="utf-8") as fh:
    rep.feed(fh.read())
with open(path("s.yaml")) as fh:
    shifts = yaml.safe_load(fh)

check(not rep.external and "script" not in rep.tags, f"not self-contained: {rep.external} {rep.tags}")
check(set(rep.wells) == {"A/1", "B/2"}, f"wells in the report: {list(rep.wells)}")
for qc in summary["well_qc"]:
    w = qc["well"]
    got = rep.wells.get(w)
    if not got:
        continue
    origins = sorted(tuple(v) for k, v in shifts["total_translation"].items() if k.startswith(w + "/"))
    check(sorted(got["tiles"]) == origins, f"{w}: tiles are not at the shifts file's origins")
    check(len(got["seams"]) == len(shifts["pairs"][w]), f"{w}: {len(got['seams'])} seams for {len(shifts['pairs'][w])} pairs")
    check(got["fallback"] == qc["isolated_tiles"], f"{w}: {got['fallback']} fallback tiles, --json says {qc['isolated_tiles']} isolated")
    # the per-direction table of the well equals --json's figures
    for d in ("x", "y"):
        rows = [r for ww, r in rep.rows if ww == w and r and r[0] == d]
        check(rows and rows[0][1:5] == [str(qc[d][k]) for k in ("pairs", "measured", "trusted", "outliers")],
              f"{w} {d}: table {rows[:1]} != --json {qc[d]}")
        check(rows and rows[0][6] == f"{qc[d]['overlap']:.2f} px", f"{w} {d}: measured overlap {rows[:1]} vs {qc[d]['overlap']}")
    worst = [float(r[3].split()[0]) for ww, r in rep.rows if ww == w and r and r[0].isdigit() and len(r) >= 4]
    check(worst and worst == sorted(worst, reverse=True), f"{w}: worst seams not sorted by residual: {worst}")
check(sum(r["fallback"] for r in rep.wells.values()) > 0, "the plate has blank tiles but no fallback tile is marked")

# In a browser: the picture is drawn (green seams, the fallback colour) and
# the text laid out (dark pixels on white).
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
check(chromium is not None, "chromium is not installed (make test installs Debian's chromium)")
if chromium:
    shot = path("shot.png")
    subprocess.run([chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                    f"--user-data-dir={path('profile')}", "--window-size=1100,1600", f"--screenshot={shot}",
                    "file://" + html], capture_output=True, timeout=120)
    check(os.path.exists(shot), "chromium wrote no screenshot")
    if os.path.exists(shot):
        im = np.asarray(Image.open(shot).convert("RGB")).astype(int)
        green = (im[..., 1] > 200) & (im[..., 0] < 80) & (im[..., 2] < 80)
        fallback = (abs(im[..., 0] - 0x55) < 8) & (abs(im[..., 1] - 0x33) < 8) & (im[..., 2] < 8)
        white = (im > 245).all(axis=2)
        dark = (im < 60).all(axis=2)
        print(f"screenshot: {green.sum()} seam pixels, {fallback.sum()} fallback pixels, "
              f"{white.mean():.2f} white, {dark.sum()} dark")
        check(green.sum() > 500, f"no seams on the screenshot ({green.sum()} green pixels)")
        check(fallback.sum() > 500, f"no fallback tile on the screenshot ({fallback.sum()} pixels)")
        check(white.mean() > 0.3 and dark.sum() > 2000, "the page is not laid out (no white page or no text)")

# stitch writes it too
p = run("stitch", plate, "-o", path("m.zarr"), "--overlap", "40", "--report", path("st.html"), "-q")
check(os.path.getsize(path("st.html")) > 1000, "stitch --report wrote no report")
# refused inside an input; none written when the check fails
p = run("estimate", plate, "-o", path("s2.yaml"), "--overlap", "40", "--report", os.path.join(plate, "qc.html"),
        ok=False)
check(p.returncode == 2 and "--report" in p.stderr and not os.path.exists(os.path.join(plate, "qc.html")),
      f"--report inside the plate: exit {p.returncode} {p.stderr!r}")
p = run("estimate", plate, "-o", path("s3.yaml"), "--overlap", "100", "--report", path("bad.html"), ok=False)
check(p.returncode == 1 and not os.path.exists(path("bad.html")), f"failed check: exit {p.returncode}, report written")



def report_of(name, overlap, *sim):
    """A `tessera simulate` plate (sim: its flags) estimated with --report:
    (the well's --json well_qc, the report's HTML)."""
    run("simulate", "-o", path(name + ".zarr"), "--overlap", overlap, *sim, "--format", "0.4", "-q")
    p = run("estimate", path(name + ".zarr"), "-o", path(name + ".yaml"), "--overlap", overlap, "--accept-poor",
            "--json", "--report", path(name + ".html"))
    with open(path(name + ".html")) as f:
        return json.loads(p.stdout)["well_qc"][0], f.read()


# The tiles the summary names are named in the report too: a simulated plate
# with a quarter of the tiles blank has a group of two tiles cut off and a
# tile placed through its diagonal neighbours (as --json says).
wq, html = report_of("cut", "24", "--grid", "7x7", "--tile", "128x128", "--jitter", "6", "--blank", "0.25",
                     "--seed", "1")
for key, what in (("cut_off", "in groups no pair joins to the rest"), ("bridged", "placed by diagonal neighbours only"),
                  ("hanging", "hanging on one weak pair in no loop, or on outliers")):
    n, first = wq[key + "_tiles"], wq["first_" + key + "_tile"]
    check(n > 0 and f"{n} tile{'s' if n > 1 else ''} {what}" in html and f"(first: {first})" in html,
          f"report: {key} tiles ({n}, {first}) not named")

# ... and the pairs refused by the stage pass: on this plate (30% blank) a
# corner tile's only pair, 84 px off the stage model (docs/register.md).
wq, html = report_of("ref", "32", "--grid", "6x6", "--tile", "256x256", "--jitter", "8", "--blank", "0.3",
                     "--seed", "6")
n, first = wq["refused_pairs"], wq["first_refused_pair"]
check(n > 0 and f"{n} pair{'s' if n > 1 else ''} refused by the stage model" in html and first
      and f"(first: {first[0]} &ndash; {first[1]})" in html, f"report: refused pairs ({n}, {first}) not named")

# ... and a disputed outlier (docs/qc.md, "The verdict"): on this plate the
# solve puts a right pair 54 px off its measurement, which the stage model
# holds (the well is implausible; --accept-poor writes the report).
wq, html = report_of("disp", "24", "--grid", "7x7", "--tile", "128x128", "--jitter", "6", "--blank", "0.2",
                     "--seed", "51")
n, worst = wq["disputed_pairs"], wq["worst_disputed_pair"]
check(n > 0 and f"{n} outlier{'s' if n > 1 else ''} disputed by the stage model" in html and worst
      and f"The worst: {worst[0]} &ndash; {worst[1]}, solved {wq['disputed_px']:.1f} px off" in html
      and wq["verdict"] == "implausible", f"report: disputed pairs ({n}, {worst}) not named")

shutil.rmtree(TMP, ignore_errors=True)
finish()
