"""Outputs are never lost or overwritten by a run that should not touch them
(issue 8, items 1-5), for every command that writes a store or a file:

1. one writer per output: a second fuse or simulate into an output another
   run is writing fails at once naming that process (pid, host), and the
   first run's result equals a run alone; a killed run's lock is taken over;
2. import and simulate over an existing plate that fail or are killed leave
   it as it was (file digests), and their re-run equals a clean run;
3. an output directory that is not a plate of the command's kind, or holds a
   file tessera did not write, is refused and left byte for byte as it was;
4. an output at, inside or holding an input, or inside another zarr store,
   is refused for fuse, estimate, solve, preview, stitch, import, simulate;
5. a killed simulate leaves no partial store and its re-run is a clean run.
Plates come from `tessera simulate` and TIFFs from tifffile; comparisons are
file digests and diff -r."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import tifffile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish, run, tree_digest  # noqa: E402

TMP = tempfile.mkdtemp(prefix="outsafe_", dir=os.environ.get("TESSERA_TEST_TMP"))


def path(*p):
    return os.path.join(TMP, *p)


def digest(p):
    """Files and bytes under p (or of the file p); None when absent."""
    if os.path.isdir(p):
        return tree_digest(p)
    if os.path.exists(p):
        with open(p, "rb") as fh:
            return fh.read()
    return None


def one_line(stderr):
    return len(stderr.strip().splitlines()) == 1


def diff_r(a, b):
    p = subprocess.run(["diff", "-r", a, b], capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def leftovers(d):
    """tessera temporaries and locks directly in d."""
    return [f for f in os.listdir(d) if ".tmp." in f or f.endswith(".lock")]


def refused(name, args, words, protect, code=None):
    """tessera ARGS fails with one line holding every word; protect (paths)
    is unchanged."""
    before = {p: digest(p) for p in protect}
    p = run(*args, ok=False)
    check(p.returncode != 0 and (code is None or p.returncode == code),
          f"{name}: exit {p.returncode}, want {code or 'non-zero'}: {p.stderr!r}")
    check(one_line(p.stderr), f"{name}: not one line on stderr: {p.stderr!r}")
    for w in words:
        check(w in p.stderr, f"{name}: {w!r} not in {p.stderr!r}")
    for q, d in before.items():
        check(digest(q) == d, f"{name}: {q} was changed")
    return p


def start(args, ready):
    """Starts tessera ARGS and waits until ready() or it ends."""
    proc = subprocess.Popen([BIN, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not ready():
        time.sleep(0.002)
    return proc


# A plate that takes a second or two to fuse on one thread (gzip).
BIG = path("big.zarr")
run("simulate", "-o", BIG, "--grid", "10x10", "--tile", "256x256", "--overlap", "32", "--format", "0.4",
    "--seed", "3", "--truth", path("big.yaml"))
SLOW = ["--chunk", "64", "--shard", "2", "--threads", "1", "--codec", "gzip"]
SMALL = path("small.zarr")
run("simulate", "-o", SMALL, "--grid", "3x2", "--tile", "96x96", "--overlap", "16", "--seed", "1",
    "--truth", path("small.yaml"))
SMALL04 = path("small04.zarr")
run("simulate", "-o", SMALL04, "--grid", "3x2", "--tile", "96x96", "--overlap", "16", "--seed", "1",
    "--format", "0.4")

# TIFF tiles (tifffile, deflate) for import.
tiles = path("tiles")
os.makedirs(tiles)
rng = np.random.default_rng(1)
for r in range(2):
    for c in range(3):
        tifffile.imwrite(os.path.join(tiles, f"r{r}_c{c}.tif"),
                         rng.integers(0, 60000, (64, 64), dtype=np.uint16), compression="zlib")

# ------------------------------------------------------- 1. one writer
clean = path("clean.zarr")
run("fuse", BIG, path("big.yaml"), "-o", clean, *SLOW)
out = path("shared.zarr")
first = start(["fuse", BIG, path("big.yaml"), "-o", out, *SLOW],
              lambda: glob.glob(out + ".tmp.*/*/A/1/0/0/*"))
check(first.poll() is None, "lock: the first run ended before the second started (the check needs it running)")
second = run("fuse", SMALL, path("small.yaml"), "-o", out, ok=False)
check(second.returncode == 1 and one_line(second.stderr), f"lock: second fuse: exit {second.returncode} {second.stderr!r}")
check(f"pid {first.pid}" in second.stderr and "being written by another run" in second.stderr,
      f"lock: the message does not name the other run (pid {first.pid}): {second.stderr!r}")
sim = run("simulate", "-o", out, ok=False)
check(sim.returncode == 1 and f"pid {first.pid}" in sim.stderr, f"lock: simulate into it: {sim.stderr!r}")
imp = run("import", tiles, "-o", out, "--pattern", "r{row}_c{col}.tif", ok=False)
check(imp.returncode != 0 and f"pid {first.pid}" in imp.stderr, f"lock: import into it: {imp.stderr!r}")
first.wait()
check(first.returncode == 0, f"lock: the first run failed: {first.stderr.read()}")
rc, text = diff_r(clean, out)
check(rc == 0, f"lock: the first run's output differs from a run alone:\n{text[:1500]}")
check(not leftovers(TMP), f"lock: left behind: {leftovers(TMP)}")

# stitch holds the lock from the start (its estimate included).
st_out = path("stitched.zarr")
first = start(["fuse", BIG, path("big.yaml"), "-o", st_out, *SLOW], lambda: os.path.exists(st_out + ".lock"))
p = run("stitch", SMALL, "-o", st_out, "--overlap", "16", "--shifts-out", path("st.yaml"), ok=False)
check(p.returncode == 1 and f"pid {first.pid}" in p.stderr, f"lock: stitch into a locked output: {p.stderr!r}")
check(not os.path.exists(path("st.yaml")), "lock: stitch ran its estimate before finding the output locked")
first.wait()

# A killed writer's lock (dead pid) is taken over; the re-run is a clean run.
killed = path("killed.zarr")
proc = start(["fuse", BIG, path("big.yaml"), "-o", killed, *SLOW],
             lambda: glob.glob(killed + ".tmp.*/*/A/1/0/0/*"))
was_running = proc.poll() is None
os.kill(proc.pid, signal.SIGKILL)
proc.wait()
check(was_running, "lock: the run ended before it could be killed")
check(os.path.exists(killed + ".lock"), "lock: a killed run left no lock (the takeover is not tested)")
run("fuse", BIG, path("big.yaml"), "-o", killed, *SLOW)
rc, text = diff_r(clean, killed)
check(rc == 0, f"lock: the re-run after a kill differs from a clean run:\n{text[:1500]}")
check(not leftovers(TMP), f"lock: left behind after the re-run: {leftovers(TMP)}")

# ------------------------------- 2 + 5. import/simulate replace safely
plate = path("plate.zarr")
run("simulate", "-o", plate, "--grid", "3x2", "--tile", "64x64", "--overlap", "8", "--seed", "7")
old = digest(plate)
# killed mid-way while replacing: the old plate stays; the re-run is clean.
ref = path("ref.zarr")
SIM = ["--grid", "20x20", "--tile", "256x256", "--overlap", "32", "--seed", "9", "--threads", "1"]
run("simulate", "-o", ref, *SIM)
proc = start(["simulate", "-o", plate, *SIM], lambda: glob.glob(plate + ".tmp.*/*/A/1/*/0/*"))
was_running = proc.poll() is None
os.kill(proc.pid, signal.SIGKILL)
proc.wait()
check(was_running, "simulate: the run ended before it could be killed")
check(digest(plate) == old, "simulate: a killed replacement changed the existing plate")
run("simulate", "-o", plate, *SIM)
rc, text = diff_r(ref, plate)
check(rc == 0, f"simulate: killed + re-run differs from a clean run:\n{text[:1500]}")
check(not leftovers(TMP), f"simulate: left behind: {leftovers(TMP)}")
# killed while writing a new plate: nothing at the output, the re-run works.
fresh = path("fresh.zarr")
proc = start(["simulate", "-o", fresh, *SIM], lambda: glob.glob(fresh + ".tmp.*/*/A/1/*/0/*"))
os.kill(proc.pid, signal.SIGKILL)
proc.wait()
check(not os.path.exists(fresh), "simulate: a killed run left a partial store at the output")
run("simulate", "-o", fresh, *SIM)
rc, text = diff_r(ref, fresh)
check(rc == 0, f"simulate: a new plate's re-run after a kill differs from a clean run:\n{text[:1500]}")

# import over an existing plate, failing on a tile's data (after other tiles
# were written): the old plate stays, nothing is left behind.
imported = path("imported.zarr")
run("import", tiles, "-o", imported, "--pattern", "r{row}_c{col}.tif", "--threads", "1")
old = digest(imported)
bad = os.path.join(tiles, "r1_c2.tif")
with tifffile.TiffFile(bad) as tf:
    off = tf.pages[0].dataoffsets[0]
with open(bad, "r+b") as fh:
    fh.seek(off)
    fh.write(b"\xff" * 64)
p = run("import", tiles, "-o", imported, "--pattern", "r{row}_c{col}.tif", "--threads", "1", "--format", "0.4",
        ok=False)
check(p.returncode == 1 and "r1_c2.tif" in p.stderr, f"import: corrupt tile: exit {p.returncode} {p.stderr!r}")
check(digest(imported) == old, "import: a failed replacement changed the existing plate")
check(not leftovers(TMP), f"import: left behind: {leftovers(TMP)}")

# --------------------------------------------- 3. not ours: refused
user = path("user_dir")
os.makedirs(user)
with open(os.path.join(user, ".zgroup"), "w") as fh:
    fh.write('{"zarr_format": 2}')
with open(os.path.join(user, "thesis.txt"), "w") as fh:
    fh.write("months of work")
refused("simulate into a non-plate", ["simulate", "-o", user], [user], [user], code=1)
refused("import into a non-plate", ["import", tiles, "-o", user, "--pattern", "r{row}_c{col}.tif"], [user],
        [user], code=1)
refused("fuse into a non-plate", ["fuse", SMALL, path("small.yaml"), "-o", user], [user], [user], code=1)
# a plate of tiles holding a user file: not replaced.
mine = os.path.join(plate, "A", "1", "notes.txt")
with open(mine, "w") as fh:
    fh.write("mine")
refused("simulate over a plate holding a user file", ["simulate", "-o", plate], ["notes.txt"], [plate], code=1)
os.remove(mine)
# a group whose attributes merely mention "node_type", "array" and "data_type"
# is still a group: a file "7" there is the user's, not a chunk.
well_meta = os.path.join(plate, "A", "1", "zarr.json")
with open(well_meta) as fh:
    meta_text = fh.read()
doc = json.loads(meta_text)
doc["attributes"]["lab"] = {"node_type": "array", "data_type": "uint8"}
with open(well_meta, "w") as fh:
    json.dump(doc, fh)
mine = os.path.join(plate, "A", "1", "7")
with open(mine, "w") as fh:
    fh.write("mine")
refused("simulate over a plate holding a digit-named user file", ["simulate", "-o", plate], ["A/1/7"], [plate],
        code=1)
if os.path.exists(mine):
    os.remove(mine)
with open(well_meta, "w") as fh:
    fh.write(meta_text)
# a plain file at the output
afile = path("a_file.zarr")
with open(afile, "w") as fh:
    fh.write("x")
refused("simulate over a file", ["simulate", "-o", afile], ["not a zarr store"], [afile], code=1)
# kinds: a mosaic is not a plate of tiles, and the other way round.
mosaic = path("mosaic.zarr")
run("fuse", SMALL, path("small.yaml"), "-o", mosaic)
refused("simulate over a mosaic", ["simulate", "-o", mosaic], ["mosaic"], [mosaic], code=1)
refused("fuse into a plate of tiles", ["fuse", SMALL, path("small.yaml"), "-o", plate], ["plate of tiles"],
        [plate], code=1)
# a 0.5 mosaic is not written into a 0.4 one (v3 metadata beside v2 files)
m04 = path("mosaic04.zarr")
run("fuse", SMALL, path("small.yaml"), "-o", m04, "--format", "0.4")
refused("fuse 0.5 into a 0.4 mosaic", ["fuse", SMALL, path("small.yaml"), "-o", m04], ["0.4", "--format"],
        [m04], code=1)
run("fuse", SMALL, path("small.yaml"), "-o", m04, "--format", "0.4")  # its own format: replaced
# an image to replace that holds a user file: refused, the store unchanged.
mine = os.path.join(mosaic, "A", "1", "0", "mine.txt")
with open(mine, "w") as fh:
    fh.write("mine")
refused("fuse replacing an image holding a user file", ["fuse", SMALL, path("small.yaml"), "-o", mosaic],
        ["mine.txt"], [mosaic], code=1)
os.remove(mine)
# an empty directory made for the output is written into
empty = path("made_by_mkdir")
os.makedirs(empty)
run("fuse", SMALL, path("small.yaml"), "-o", empty)
check(os.path.exists(os.path.join(empty, "zarr.json")), "an empty output directory was not written into")

# ------------------------------------------ 4. outputs and inputs apart
everything = [SMALL, path("small.yaml"), mosaic]
cases = [
    ("fuse -o inside the input", ["fuse", SMALL, path("small.yaml"), "-o", os.path.join(SMALL, "A", "1", "x")],
     ["inside the input"]),
    ("fuse -o the input", ["fuse", SMALL, path("small.yaml"), "-o", SMALL], ["is the input"]),
    ("fuse -o holding its shifts file", ["fuse", SMALL, path("small.yaml"), "-o", TMP], ["holds the input"]),
    ("estimate -o the plate's metadata", ["estimate", SMALL, "-o", os.path.join(SMALL, "zarr.json"),
                                          "--overlap", "16"], ["inside the input"]),
    ("estimate -o inside another store", ["estimate", SMALL, "-o", os.path.join(mosaic, "s.yaml"),
                                          "--overlap", "16"], ["inside the zarr store"]),
    ("preview -o the mosaic's metadata", ["preview", mosaic, "-o", os.path.join(mosaic, "zarr.json")],
     ["inside the input"]),
    ("solve -o its input", ["solve", path("small.yaml"), "-o", path("small.yaml")], ["is the input"]),
    ("stitch --shifts-out inside the output", ["stitch", SMALL, "-o", path("st2.zarr"), "--overlap", "16",
                                               "--shifts-out", path("st2.zarr", "s.yaml")], ["s.yaml"]),
    ("simulate --truth inside the output", ["simulate", "-o", path("sim2.zarr"), "--truth",
                                            path("sim2.zarr", "t.yaml")], ["--truth"]),
    ("import -o inside the input folder", ["import", tiles, "-o", os.path.join(tiles, "p.zarr"),
                                           "--pattern", "r{row}_c{col}.tif"], ["inside the input"]),
]
for name, args, words in cases:
    refused(name, args, words, everything + [tiles])
check(not os.path.exists(path("st2.zarr")) and not os.path.exists(path("sim2.zarr")),
      "a refused run created its output")
# A symlinked spelling of the input is the input too.
os.symlink(SMALL, path("alias.zarr"))
refused("fuse -o inside the input through a symlink",
        ["fuse", SMALL, path("small.yaml"), "-o", path("alias.zarr", "A", "out")], ["inside the input"], everything)

shutil.rmtree(TMP, ignore_errors=True)
finish()
