"""tessera fuse --resume (issue 8): a run killed while writing a new store is
continued by --resume, and the store equals an uninterrupted run's (diff
-r), for 0.4 and 0.5 with a pyramid level; blocks it left are kept only
when they check out (a flipped byte or a truncated piece is written again);
a resume with other options or another shifts file is refused naming what
differs and keeps the interrupted store for a right resume; a resume with
nothing to resume, or into an existing store, is refused."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="resume_", dir=os.environ.get("TESSERA_TEST_TMP"))


def path(*p):
    return os.path.join(TMP, *p)


def diff_r(a, b):
    p = subprocess.run(["diff", "-r", a, b], capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


PLATE = path("plate.zarr")
run("simulate", "-o", PLATE, "--grid", "16x16", "--tile", "256x256", "--overlap", "32", "--format", "0.4",
    "--seed", "3", "--truth", path("truth.yaml"))
FUSE = ["--chunk", "64", "--shard", "2", "--threads", "1", "--codec", "gzip", "--levels", "1"]


def pieces(staging):
    """Stored pieces (shards or chunks) of level 0 written so far."""
    return [f for f in glob.glob(os.path.join(staging, "*", "A", "1", "0", "0", "**", "*"), recursive=True)
            if os.path.isfile(f) and ".tmp." not in os.path.basename(f)]


def killed_run(out, fmt, at_least):
    """A fuse into the new store out, killed with SIGKILL once it wrote
    at_least pieces; returns the interrupted run's temporary directory."""
    proc = subprocess.Popen([BIN, "fuse", PLATE, path("truth.yaml"), "-o", out, "--format", fmt, *FUSE],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        dirs = glob.glob(out + ".tmp.*")
        if dirs and len(pieces(dirs[0])) >= at_least:
            break
        time.sleep(0.005)
    alive = proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    check(alive, f"{out}: the run ended before it could be killed")
    dirs = glob.glob(out + ".tmp.*")
    check(len(dirs) == 1, f"{out}: want one interrupted run beside the output: {dirs}")
    return dirs[0] if dirs else None


def resume(out, fmt, *more, ok=True):
    return run("fuse", PLATE, path("truth.yaml"), "-o", out, "--format", fmt, *FUSE, "--resume", "--json", *more,
               ok=ok)


for fmt in ["0.5", "0.4"]:
    clean = path(f"clean{fmt}.zarr")
    run("fuse", PLATE, path("truth.yaml"), "-o", clean, "--format", fmt, *FUSE)
    out = path(f"resumed{fmt}.zarr")
    staging = killed_run(out, fmt, 40)
    if not staging:
        continue
    done = sorted(pieces(staging))
    check(not os.path.exists(out), f"{fmt}: a killed run left a store at the output")

    # Another codec, another shifts file: refused, the interrupted store kept.
    p = run("fuse", PLATE, path("truth.yaml"), "-o", out, "--format", fmt, *FUSE, "--codec", "zstd", "--resume",
            ok=False)
    check(p.returncode == 2 and "codec: gzip" in p.stderr and "codec: zstd" in p.stderr,
          f"{fmt}: a resume with another codec: exit {p.returncode} {p.stderr!r}")
    with open(path("truth.yaml")) as fh:
        text = fh.read()
    other = path("other.yaml")
    with open(other, "w") as fh:
        fh.write(text.replace("A/1/000000: [0, 0]", "A/1/000000: [0, 1]") if "A/1/000000: [0, 0]" in text
                 else text + "\n# edited\n")
    p = run("fuse", PLATE, other, "-o", out, "--format", fmt, *FUSE, "--resume", ok=False)
    check(p.returncode == 2 and "shifts:" in p.stderr, f"{fmt}: a resume with another shifts file: {p.stderr!r}")
    check(sorted(pieces(staging)) == done, f"{fmt}: a refused resume changed the interrupted store")

    # Damage two pieces the interrupted run completed: checked, not assumed.
    if len(done) >= 4:
        with open(done[1], "r+b") as fh:
            data = bytearray(fh.read())
            data[len(data) // 2] ^= 0xFF
            fh.seek(0)
            fh.write(data)
        with open(done[2], "r+b") as fh:
            fh.truncate(max(1, os.path.getsize(done[2]) // 2))

    # Killed again during the resume, then resumed to the end.
    proc = subprocess.Popen([BIN, "fuse", PLATE, path("truth.yaml"), "-o", out, "--format", fmt, *FUSE, "--resume"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    p = resume(out, fmt)
    summary = json.loads(p.stdout)
    check(summary["blocks_resumed"] > 0, f"{fmt}: nothing was kept from the interrupted run: {summary}")
    check(summary["blocks_written"] > 0, f"{fmt}: nothing was left to write (the kill came too late): {summary}")
    rc, text = diff_r(clean, out)
    check(rc == 0, f"{fmt}: resumed store differs from an uninterrupted run:\n{text[:2000]}")
    check(not glob.glob(out + ".tmp.*") and not os.path.exists(out + ".lock"),
          f"{fmt}: temporaries left: {glob.glob(out + '.tmp.*')}")
    print(f"{fmt}: kept {summary['blocks_resumed']} blocks, wrote {summary['blocks_written']}")

    # Nothing to resume now: the store exists.
    p = resume(out, fmt, ok=False)
    check(p.returncode == 2 and "exists" in p.stderr, f"{fmt}: --resume over a complete store: {p.stderr!r}")

p = run("fuse", PLATE, path("truth.yaml"), "-o", path("never.zarr"), "--resume", ok=False)
check(p.returncode == 2 and "no interrupted run" in p.stderr, f"--resume with nothing to resume: {p.stderr!r}")
check(not os.path.exists(path("never.zarr")), "--resume with nothing to resume created the output")
p = run("fuse", PLATE, path("truth.yaml"), "-o", path("never.zarr"), "--resume", "--t-out", "0", ok=False)
check(p.returncode == 2 and "--t-out" in p.stderr, f"--resume --t-out: {p.stderr!r}")

# Long input paths (a manifest of over 2 KiB, once refused as "run manifest
# longer than 2304 bytes"): the manifest grows with what it holds.
deep = path(*(["d" * 240] * 5))
os.makedirs(deep)
run("simulate", "-o", os.path.join(deep, "plate.zarr"), "--grid", "2x2", "--tile", "64x64", "--overlap", "16",
    "--seed", "3", "--truth", os.path.join(deep, "truth.yaml"))
p = run("fuse", os.path.join(deep, "plate.zarr"), os.path.join(deep, "truth.yaml"), "-o", path("deep.zarr"),
        "--threads", "1", ok=False)
check(p.returncode == 0 and os.path.isdir(path("deep.zarr")), f"fuse from {len(deep)}-char paths: {p.stderr!r}")

shutil.rmtree(TMP, ignore_errors=True)
finish()
