"""Fused plates open in vizarr (issue 11). A 0.4 plate (zarr v2 chunks,
one level) and a 0.5 plate (zarr v3 shards, a pyramid) of three wells (A/1,
A/2, B/1 of a 2 x 2 layout; stage jitter gives each its own mosaic size),
fused by tessera with its defaults, are served from a localhost server
together with vizarr's built viewer (npm @galaxyproject/vizarr, its Galaxy
entry point: the page's data-incoming names a dataset, the server's
/api/datasets/ID points it at the plate) and opened in Debian's chromium
by playwright-core (js/vizarr_shot.mjs). The screenshot must show the three
wells, coloured (two channels: green and magenta), in their places of the
plate grid, the empty B/2 place blank, and the page must log no error (the
plate view is blank with "Grid data is not same shape" when the wells'
smallest levels differ in shape).

Offline: vizarr's bundle imports a JPEG-2000 decoder from a CDN at load
time (answered by a stub module in vizarr_shot.mjs) and preloads codec
chunks the package lacks (its bundle has the code; the server answers
those names with an empty module)."""
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="vizarr_", dir=os.environ.get("TESSERA_TEST_TMP"))
SRC = os.environ.get("TESSERA_SOURCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
JS = os.path.join(SRC, "tests", "interop", "js")
STATIC = os.path.join(JS, "node_modules", "@galaxyproject", "vizarr", "static")


def path(*p):
    return os.path.join(TMP, *p)


PLATES = {}  # dataset id -> plate directory


class Handler(http.server.BaseHTTPRequestHandler):
    """The viewer page, vizarr's bundle, a Galaxy-like dataset API, and the
    plates' files (with Range requests: zarrita reads shard indexes by
    suffix ranges)."""

    def log_message(self, *a):
        pass

    def reply(self, code, body, ctype, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        p = urllib.parse.urlparse(self.path)
        parts = p.path.strip("/").split("/")
        if p.path == "/":
            ds = urllib.parse.parse_qs(p.query).get("dataset", [""])[0]
            incoming = json.dumps({"visualization_config": {"dataset_id": ds}, "root": "/"})
            page = ("<!doctype html><html><head><meta charset='utf-8'>"
                    "<script type='module' src='/index.js'></script></head><body style='margin:0'>"
                    f"<div id='app' data-incoming='{incoming}' style='width:100vw;height:100vh'></div>"
                    "</body></html>")
            return self.reply(200, page.encode(), "text/html")
        if p.path == "/index.js":
            with open(os.path.join(STATIC, "index.js"), "rb") as fh:
                return self.reply(200, fh.read(), "text/javascript")
        if parts[:2] == ["api", "datasets"] and len(parts) == 3 and parts[2] in PLATES:
            port = self.server.server_address[1]
            ds = {"id": parts[2], "name": parts[2], "state": "deferred",
                  "sources": [{"source_uri": f"http://127.0.0.1:{port}/data/{parts[2]}"}]}
            return self.reply(200, json.dumps(ds).encode(), "application/json")
        if parts[0] == "data" and len(parts) >= 2 and parts[1] in PLATES and ".." not in parts:
            f = os.path.join(PLATES[parts[1]], *parts[2:])
            if not os.path.isfile(f):
                return self.reply(404, b"", "text/plain")
            with open(f, "rb") as fh:
                body = fh.read()
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes="):
                a, _, b = rng[6:].partition("-")
                n = len(body)
                start, end = (max(0, n - int(b)), n) if a == "" else (int(a), min(n, int(b) + 1) if b else n)
                return self.reply(206, body[start:end], "application/octet-stream",
                                  [("Content-Range", f"bytes {start}-{end - 1}/{n}")])
            return self.reply(200, body, "application/octet-stream")
        if len(parts) == 1 and parts[0].endswith(".js"):
            # codec chunks vite's preload list names but the package lacks
            return self.reply(200, b"export default {};\n", "text/javascript")
        return self.reply(404, b"", "text/plain")


def coloured(im):
    """Pixels of the two channels' colours (green, magenta) or their mix."""
    r, g, b = im[..., 0], im[..., 1], im[..., 2]
    green = (g > 90) & (g > r + 40) & (g > b + 40)
    magenta = (r > 90) & (b > 90) & (g + 40 < np.minimum(r, b))
    return green | magenta


def check_shot(name, shot):
    im = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    H, W = im.shape[:2]
    # The plate grid: rows and columns mostly not page background (white).
    # vizarr's layer panel (top left, under 250 x 250 px) stays below the
    # threshold along most of the height and width.
    content = ~(im >= 245).all(axis=2)
    rows = np.where(content.mean(axis=1) > 0.3)[0]
    cols = np.where(content.mean(axis=0) > 0.3)[0]
    if rows.size < 100 or cols.size < 100:
        check(False, f"{name}: no plate on the screenshot ({rows.size} x {cols.size} px of content)")
        return
    y0, y1, x0, x1 = rows[0], rows[-1] + 1, cols[0], cols[-1] + 1
    ym, xm = (y0 + y1) // 2, (x0 + x1) // 2
    col = coloured(im)
    quads = {"A/1": (y0, ym, x0, xm), "A/2": (y0, ym, xm, x1), "B/1": (ym, y1, x0, xm), "B/2": (ym, y1, xm, x1)}
    frac = {w: float(col[a:b, c:d].mean()) for w, (a, b, c, d) in quads.items()}
    print(f"{name}: plate at rows {y0}-{y1}, columns {x0}-{x1} of {H}x{W}; coloured fraction per well {frac}")
    for w in ("A/1", "A/2", "B/1"):
        check(frac[w] > 0.05, f"{name}: well {w} shows no content on the screenshot ({frac[w]:.3f} coloured)")
    check(frac["B/2"] < 0.005, f"{name}: the empty place B/2 has content ({frac['B/2']:.3f} coloured)")
    check((x1 - x0) > 300 and (y1 - y0) > 300, f"{name}: plate drawn at {x1 - x0} x {y1 - y0} px only")


check(os.path.exists("/usr/bin/chromium"), "chromium is not installed (make test installs Debian's chromium)")
check(os.path.isfile(os.path.join(STATIC, "index.js")), f"vizarr is not installed at {STATIC} (make deps: npm install)")
check(os.path.isdir(os.path.join(JS, "node_modules", "playwright-core")), "playwright-core is not installed (make deps)")
common = ["--wells", "A/1,A/2,B/1", "--tile", "256x256", "--overlap", "32", "--jitter", "6", "--channels", "2"]
cases = [("p04", "0.4", "3x3", "5"), ("p05", "0.5", "5x5", "6")]
for ds, fmt, grid, seed in cases:
    plate = path(f"{ds}_in.zarr")
    run("simulate", "-o", plate, *common, "--grid", grid, "--seed", seed, "--format", fmt,
        "--truth", path(f"{ds}.yaml"))
    out = path(f"{ds}.zarr")
    run("fuse", plate, path(f"{ds}.yaml"), "-o", out, "--format", fmt)
    PLATES[ds] = out
levels05 = sorted(d for d in os.listdir(path("p05.zarr", "A/1/0")) if d.isdigit())
check(len(levels05) >= 2, f"the 0.5 plate has no pyramid to read ({levels05})")

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]
try:
    for ds, fmt, _, _ in cases:
        shot = path(f"{ds}.png")
        p = subprocess.run(["node", os.path.join(JS, "vizarr_shot.mjs"), f"http://127.0.0.1:{port}/?dataset={ds}",
                            shot, "90000"], capture_output=True, text=True, cwd=JS, timeout=300)
        line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        res = json.loads(line) if line.startswith("{") else {"ok": False, "error": p.stderr[-2000:], "log": []}
        name = f"vizarr {fmt} plate"
        check(res["ok"], f"{name}: the browser run failed: {res.get('error')}")
        log = res.get("log", [])
        errors = [e["text"] for e in log if e["type"] == "pageerror" or
                  (e["type"] == "error" and "Failed to load resource" not in e["text"])]
        shape = [t for t in (e["text"] for e in log) if "not same shape" in t]
        check(not shape, f"{name}: {shape[:1]}")
        check(not errors, f"{name}: errors on the page: {errors[:3]}")
        # 404s only for the probes of other layouts (zarr.json / .zattrs at the root)
        missing = [e["text"] for e in log if e["type"] == "requestfailed" and "ERR_ABORTED" not in e["text"]]
        check(not missing, f"{name}: failed requests {missing[:3]}")
        if res["ok"] and os.path.exists(shot):
            check_shot(name, shot)
finally:
    server.shutdown()

shutil.rmtree(TMP, ignore_errors=True)
finish()
