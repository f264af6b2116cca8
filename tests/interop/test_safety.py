"""SPEC section 6: nothing half-written. A fuse that fails part-way (a tile
corrupt in a later band) leaves no new store, and an existing store as the
docs say (docs/fuse.md, "Failed and killed runs"); a fuse killed with
SIGKILL mid-run and re-run gives the same tree as a clean run (`diff -r`),
with no temporaries left; a run replacing an existing image (failed, or
killed mid-way) leaves that image as it was; an unwritable output is exit 1 and one line naming
the path; estimate's re-run sweeps a killed run's temporary of its shifts
file, and only that. The plates come from `tessera simulate`; the comparisons are
diff(1) and file hashes, nothing tessera computes about itself."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish, run, tree_digest  # noqa: E402

TMP = tempfile.mkdtemp(prefix="safety_", dir=os.environ.get("TESSERA_TEST_TMP"))
# ts_write_file_atomic's temporaries, and ts_make_temp_dir's directories (a
# replacement image being built): "<name>.tmp.<pid>.<hex salt>.<n>".
TEMP_RE = re.compile(r"\.tmp\.\d+\.[0-9a-f]+\.\d+$")


def path(*p):
    return os.path.join(TMP, *p)


def temps_under(root):
    """Temporary files and directories under root."""
    return [os.path.join(d, f) for d, ds, fs in os.walk(root) for f in fs + ds if TEMP_RE.search(f)]


def diff_r(a, b):
    p = subprocess.run(["diff", "-r", a, b], capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


def dead_pid():
    """A pid that belonged to a process which has exited."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def one_line(stderr):
    return len(stderr.strip().splitlines()) == 1


def corrupt(plate, tile):
    """Overwrites the (only) chunk of a 0.4 tile with bytes no codec accepts."""
    chunk = os.path.join(plate, tile, "0", "0", "0", "0", "0", "0")
    check(os.path.isfile(chunk), f"fixture: {chunk} is not a file")
    with open(chunk, "wb") as f:
        f.write(b"\x13not a zstd frame" * 8)


# ---------------------------------------------------------------- fixtures
# Small plate: 3 x 3 tiles of 128 px, two wells; 32 px chunks make ~11 bands,
# and the corrupt tile (x 1, y 2) is in the bottom row, read only once the
# bands above it have been written.
SMALL = path("small.zarr")
run("simulate", "-o", SMALL, "--wells", "A/1,B/2", "--grid", "3x3", "--tile", "128x128",
    "--overlap", "16", "--format", "0.4", "--seed", "5", "--truth", path("small.yaml"))
BAD = path("bad.zarr")
shutil.copytree(SMALL, BAD)
corrupt(BAD, "A/1/001002")
corrupt(BAD, "B/2/001002")
FUSE = ["--chunk", "32", "--shard", "2", "--threads", "1"]


def fuse(plate, out, *more, ok=True):
    return run("fuse", plate, path("small.yaml"), "-o", out, *FUSE, *more, ok=ok)


# ------------------------------------------------- failed run, new store
out = path("new_parent", "sub", "out.zarr")
p = fuse(BAD, out, ok=False)
check(p.returncode == 1, f"corrupt tile: exit {p.returncode}, want 1")
check(one_line(p.stderr), f"corrupt tile: not one line on stderr: {p.stderr!r}")
check("A/1/001002" in p.stderr and "0/0/0/0/0" in p.stderr,
      f"corrupt tile: message does not name the tile and chunk key: {p.stderr!r}")
check(not os.path.exists(out), "corrupt tile: the new output store was left behind")
check(not os.path.exists(path("new_parent")),
      "corrupt tile: the parent directories the run created were left behind")

# -------------------------------------- failed run into an existing plate
store = path("existing.zarr")
fuse(SMALL, store, "--wells", "A/1")
before = tree_digest(store)
# B/2 is new in this store: the failed run removes it and its row group.
p = fuse(BAD, store, "--wells", "B/2", ok=False)
check(p.returncode == 1 and one_line(p.stderr), f"new well: exit {p.returncode}, {p.stderr!r}")
check("B/2/001002" in p.stderr, f"new well: message does not name the tile: {p.stderr!r}")
after = tree_digest(store)
check(after == before, "new well: the existing store changed: "
      f"added {sorted(set(after) - set(before))[:5]}, removed {sorted(set(before) - set(after))[:5]}, "
      f"changed {sorted(k for k in before if k in after and before[k] != after[k])[:5]}")
check(not os.path.exists(os.path.join(store, "B")), "new well: row group B was left behind")

# A run whose options fail a well's layout check writes nothing: the image
# it would replace stays as it was (it was once removed and reported as
# "replacing is removed", found in review).
p = run("fuse", SMALL, path("small.yaml"), "-o", store, "--wells", "A/1", "--chunk", "50", "--levels", "2",
        "--shard", "3", ok=False)
check(p.returncode == 2 and one_line(p.stderr), f"bad layout: exit {p.returncode}, {p.stderr!r}")
check("replacing" not in p.stderr, f"bad layout: the message speaks of removing an image: {p.stderr!r}")
check(tree_digest(store) == before, "bad layout: the existing store changed")

# A/1 exists: a run replacing it builds the new image in a temporary
# directory beside it and swaps it in only when complete, so a failure leaves
# the store byte-identical to before (the old image as it was, no temporary
# directory) and says so.
p = fuse(BAD, store, "--wells", "A/1", ok=False)
check(p.returncode == 1 and one_line(p.stderr), f"replaced well: exit {p.returncode}, {p.stderr!r}")
image = os.path.join(store, "A", "1", "0")
check("left as it was" in p.stderr and image in p.stderr and "removed" not in p.stderr,
      f"replaced well: the message does not say the image is left as it was: {p.stderr!r}")
after = tree_digest(store)
check(after == before, "replaced well: the store changed: "
      f"added {sorted(set(after) - set(before))[:5]}, removed {sorted(set(before) - set(after))[:5]}, "
      f"changed {sorted(k for k in before if k in after and before[k] != after[k])[:5]}")
check(not temps_under(store), f"replaced well: temporaries left: {temps_under(store)[:5]}")
# Both wells failing: A/1 fails first, B/2 (new) is never begun.
p = fuse(BAD, store, ok=False)
check(p.returncode == 1 and tree_digest(store) == before and not temps_under(store),
      f"replaced well, two wells: exit {p.returncode}, store changed or temporaries left")
# A successful replacement gives the store a fresh run gives.
fuse(SMALL, store, "--wells", "A/1")
check(tree_digest(store) == before, "replaced well: a successful re-run changed the store")
check(not temps_under(store), f"replaced well: temporaries left by a successful run: {temps_under(store)[:5]}")

# --t-out into an existing image cannot be undone: the error says so.
tstore = path("tout.zarr")
fuse(SMALL, tstore, "--wells", "A/1", "--t-out", "1")
p = fuse(BAD, tstore, "--wells", "A/1", "--t-out", "0", ok=False)
check(p.returncode == 1 and one_line(p.stderr), f"--t-out: exit {p.returncode}, {p.stderr!r}")
check("timepoint 0 of the existing image" in p.stderr and "partly overwritten" in p.stderr,
      f"--t-out: the message does not warn about the overwritten timepoint: {p.stderr!r}")
check(os.path.isdir(os.path.join(tstore, "A", "1", "0", "0")), "--t-out: the existing image was removed")

# -------------------------------------------------------- unwritable output
blocker = path("a_file")
open(blocker, "w").close()
for target in [os.path.join(blocker, "out.zarr")] + (
        [] if os.geteuid() == 0 else [os.path.join(path("readonly"), "out.zarr")]):
    if "readonly" in target:
        os.makedirs(path("readonly"), exist_ok=True)
        os.chmod(path("readonly"), 0o555)
    p = fuse(SMALL, target, ok=False)
    check(p.returncode == 1, f"unwritable {target}: exit {p.returncode}, want 1")
    check(one_line(p.stderr) and target in p.stderr,
          f"unwritable {target}: want one line naming the path, got {p.stderr!r}")
    check(not os.path.exists(target), f"unwritable {target}: something was created")

# A dangling symlink in the output path is the user's: a failed run that
# could not create the store through it leaves it in place.
link = path("dangling")
os.symlink(path("nowhere", "x"), link)
p = fuse(SMALL, os.path.join(link, "out.zarr"), ok=False)
check(p.returncode == 1 and one_line(p.stderr), f"dangling symlink: exit {p.returncode}, {p.stderr!r}")
check(os.path.islink(link), "dangling symlink: the failed run removed the user's symlink")

# ------------------------------------------------------ kill -9, then re-run
# 10 x 10 tiles of 256 px, gzip, one thread: about 1-2 s of writing.
BIG = path("big.zarr")
run("simulate", "-o", BIG, "--grid", "10x10", "--tile", "256x256", "--overlap", "32",
    "--format", "0.4", "--seed", "3", "--truth", path("big.yaml"))
BIGFUSE = ["--chunk", "64", "--shard", "2", "--threads", "1", "--codec", "gzip"]


def fuse_big(out, *more, ok=True):
    return run("fuse", BIG, path("big.yaml"), "-o", out, *BIGFUSE, *more, ok=ok)


def killed_run(out, blocks_dir, *more):
    """Starts a fuse, waits until a block file appears under blocks_dir (a
    glob pattern), kills it with SIGKILL. Returns whether it was killed
    mid-run."""
    proc = subprocess.Popen([BIN, "fuse", BIG, path("big.yaml"), "-o", out, *BIGFUSE, *more],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(files for d in glob.glob(blocks_dir) for _, _, files in os.walk(d)):
            break
        time.sleep(0.002)
    alive = proc.poll() is None
    if alive:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return alive


def plant(where, name, pid):
    """A temporary as ts_write_file_atomic names them, left by writer pid."""
    os.makedirs(where, exist_ok=True)
    f = os.path.join(where, f"{name}.tmp.{pid}.5eed.{len(os.listdir(where))}")
    with open(f, "wb") as fh:
        fh.write(b"half")
    return f


# A new store is built in a temporary directory beside the output and
# renamed into place when complete: a killed run leaves no store at all (so
# nothing half-written is ever opened as a plate), only that directory,
# which the re-run sweeps (a stale temporary of the output's own name too;
# another file's, and files that are not temporaries, are never touched).
for fmt, meta in [("0.5", "zarr.json"), ("0.4", ".zattrs")]:
    clean, killed = path(f"clean{fmt}.zarr"), path(f"killed{fmt}.zarr")
    fuse_big(clean, "--format", fmt)
    staging = killed + ".tmp.*"
    was_killed = killed_run(killed, os.path.join(staging, os.path.basename(killed), "A", "1", "0", "0"),
                            "--format", fmt)
    left = glob.glob(staging)
    print(f"{fmt}: killed mid-run: {was_killed}; temporaries left by the kill: {len(left)}")
    check(was_killed, "the run ended before it could be killed: the re-run checks below compare a complete run with itself")
    check(not os.path.exists(killed), f"{fmt}: a killed run left a partial store at the output")
    check(len(left) == 1 and os.path.isdir(left[0]), f"{fmt}: want one temporary directory beside the output: {left}")
    dead = dead_pid()
    stale = [plant(TMP, os.path.basename(killed), dead)]
    others = [plant(TMP, f"other{fmt}.zarr", dead)]
    foreign = killed + ".tmp.txt"
    with open(foreign, "w") as fh:
        fh.write("mine")
    fuse_big(killed, "--format", fmt)
    check(not any(os.path.exists(f) for f in stale + left), f"{fmt}: stale temporaries were not swept")
    check(all(os.path.exists(f) for f in others), f"{fmt}: another output's temporary was removed")
    check(os.path.exists(foreign), f"{fmt}: a file that is not a tessera temporary was removed")
    for f in others + [foreign]:
        os.remove(f)
    rc, text = diff_r(clean, killed)
    check(rc == 0, f"{fmt}: killed + re-run differs from a clean run:\n{text[:2000]}")
    check(not temps_under(killed) and not glob.glob(staging), f"{fmt}: temporaries remain: {temps_under(killed)[:5]}")
    # Inside an existing mosaic, the metadata files a re-run rewrites: a
    # dead writer's temporaries of them are swept.
    stale = [plant(killed, meta, dead), plant(os.path.join(killed, "A", "1"), meta, dead)]
    fuse_big(killed, "--format", fmt)
    check(not any(os.path.exists(f) for f in stale), f"{fmt}: stale temporaries inside the store were not swept")
    rc, text = diff_r(clean, killed)
    check(rc == 0, f"{fmt}: a re-run over the store differs from a clean run:\n{text[:2000]}")

# Killed while replacing an existing image (its new image half-built in the
# temporary directory): the old image is untouched, and the re-run sweeps
# the dead run's directory and gives a clean run's tree. A directory of that
# form whose writer is alive, and one of another form, are left alone.
clean = path("clean0.5.zarr")
replaced = path("replaced.zarr")
shutil.copytree(clean, replaced)
old_image = tree_digest(os.path.join(clean, "A", "1", "0"))
was_killed = killed_run(replaced, os.path.join(replaced, "A", "1", "0.tmp.*", "0", "0"))
staged = glob.glob(os.path.join(replaced, "A", "1", "0.tmp.*"))
print(f"replacement: killed mid-run: {was_killed}; temporary directories left: {len(staged)}")
check(was_killed, "the run ended before it could be killed: the re-run checks below compare a complete run with itself")
check(tree_digest(os.path.join(replaced, "A", "1", "0")) == old_image,
      "replacement: a killed run changed the image it was replacing")
if was_killed:
    check(len(staged) == 1 and os.path.isdir(staged[0]),
          f"replacement: the killed run did not build in one temporary directory: {staged}")
live_dir = os.path.join(replaced, "A", "1", f"0.tmp.{os.getpid()}.5eed.7")
other_dir = os.path.join(replaced, "A", "1", "0.tmp.keep")
for d in (live_dir, other_dir):
    os.makedirs(os.path.join(d, "0"))
fuse_big(replaced)
check(os.path.isdir(live_dir), "replacement: a live writer's temporary directory was removed")
check(os.path.isdir(other_dir), "replacement: a directory that is not a temporary was removed")
for d in (live_dir, other_dir):
    shutil.rmtree(d)
rc, text = diff_r(clean, replaced)
check(rc == 0, f"replacement: killed + re-run differs from a clean run:\n{text[:2000]}")
check(not temps_under(replaced), f"replacement: temporaries remain: {temps_under(replaced)[:5]}")

# --t-out keeps the existing image, so a killed run's temporaries inside its
# arrays must be swept by the re-run (a live writer's are left alone).
base = path("tbase.zarr")
fuse_big(base, "--t-out", "1")
clean, killed = path("tclean.zarr"), path("tkilled.zarr")
shutil.copytree(base, clean)
shutil.copytree(base, killed)
fuse_big(clean, "--t-out", "0")
blocks_t0 = os.path.join(killed, "A", "1", "0", "0", "c", "0")  # v3 keys c/t/c/z/y/x
was_killed = killed_run(killed, blocks_t0, "--t-out", "0")
print(f"--t-out: killed mid-run: {was_killed}; temporaries left by the kill: {len(temps_under(killed))}")
check(was_killed, "the run ended before it could be killed: the re-run checks below compare a complete run with itself")
shard_dir = os.path.join(killed, "A", "1", "0", "0", "c", "1", "0", "0", "0")
stale = plant(shard_dir, "0", dead_pid())
live = plant(shard_dir, "1", os.getpid())  # this test is alive: may still rename it
fuse_big(killed, "--t-out", "0")
check(not os.path.exists(stale), "--t-out: a stale temporary inside the array was not swept")
check(os.path.exists(live), "--t-out: a live writer's temporary was removed")
os.remove(live)
rc, text = diff_r(clean, killed)
check(rc == 0, f"--t-out: killed + re-run differs from a clean run:\n{text[:2000]}")
check(not temps_under(killed), f"--t-out: temporaries remain: {temps_under(killed)[:5]}")

# estimate's shifts file: a killed run's temporary of that file is swept by
# the re-run; temporaries of other files in the user's directory are not.
sdir = path("shifts_dir")
os.makedirs(sdir)
dead = dead_pid()
mine = plant(sdir, "s.yaml", dead)
theirs = plant(sdir, "other.yaml", dead)
run("estimate", SMALL, "-o", os.path.join(sdir, "s.yaml"), "--overlap", "16")
check(not os.path.exists(mine), "estimate: its stale temporary of s.yaml was not swept")
check(os.path.exists(theirs), "estimate: another file's temporary was removed")

shutil.rmtree(TMP, ignore_errors=True)
finish()
