"""Progress where users run it (issue 9): off a terminal (a pipe, as in
SLURM, CI or nohup) a long stage logs a line every interval and at its end
(`--progress log:SECONDS`; the default interval is 15 s, so short runs stay
quiet); on a terminal (a pty here) a bar with done/total, rate and ETA, and
'well k of N' for fuse; `--progress none` prints nothing; a bad mode is a
usage error. Checked for fuse, estimate and import."""
import os
import pty
import re
import subprocess
import sys
import tempfile

import numpy as np
import tifffile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="progress_", dir=os.environ.get("TESSERA_TEST_TMP"))


def path(*p):
    return os.path.join(TMP, *p)


PLATE = path("plate.zarr")
run("simulate", "-o", PLATE, "--grid", "14x14", "--tile", "256x256", "--overlap", "32", "--seed", "2",
    "--truth", path("truth.yaml"), "--wells", "A/1,A/2")
SLOW = ["--chunk", "64", "--codec", "gzip", "--threads", "1"]
LOG_LINE = re.compile(r"^tessera (\w+): (.+): (\d+)/(\d+) \((\d+)%\), [\d.]+/s, (ETA|took) [\d:?]+$")


def log_lines(stderr):
    return [m for m in (LOG_LINE.match(line) for line in stderr.splitlines()) if m]


# Off a terminal: periodic lines and a last line per stage.
p = run("fuse", PLATE, path("truth.yaml"), "-o", path("m.zarr"), *SLOW, "--progress", "log:0.05")
lines = log_lines(p.stderr)
check(len(lines) >= 4, f"fuse, log: want lines through the run, got {p.stderr!r}")
wells = {m.group(2) for m in lines}
check(wells == {"fuse A/1 (well 1 of 2)", "fuse A/2 (well 2 of 2)"}, f"fuse, log: stages {wells}")
ends = [m for m in lines if m.group(6) == "took"]
check(len(ends) == 2 and all(m.group(3) == m.group(4) for m in ends), f"fuse, log: one end line per well: {ends}")
check(all(m.group(1) == "fuse" for m in lines), "fuse, log: the command is named")
done = [int(m.group(3)) for m in lines if m.group(2).startswith("fuse A/1")]
check(done == sorted(done), f"fuse, log: counts go down: {done}")

# The default interval (15 s) keeps a short run's batch log to its result.
p = run("fuse", PLATE, path("truth.yaml"), "-o", path("m2.zarr"), "--wells", "A/1")
summary = re.compile(r"^tessera fuse: wrote \S+: 1 well, \d+ tiles, canvas \d+x\d+ px, .* blocks written, .*$")
check(len(p.stderr.splitlines()) == 1 and summary.match(p.stderr.strip()),
      f"fuse, default off a terminal: a short run prints its summary and nothing else, got {p.stderr!r}")

p = run("estimate", PLATE, "-o", path("s.yaml"), "--overlap", "32", "--threads", "1", "--progress", "log:0.01")
check(any(m.group(1) == "estimate" for m in log_lines(p.stderr)), f"estimate, log: {p.stderr!r}")

tiles = path("tiles")
os.makedirs(tiles)
for i in range(40):
    tifffile.imwrite(os.path.join(tiles, f"{i}.tif"), np.full((128, 128), i, np.uint16))
p = run("import", tiles, "-o", path("imp.zarr"), "--pattern", "{index}.tif", "--grid", "8x5", "--threads", "1",
        "--progress", "log:0.001")
check(any(m.group(1) == "import" for m in log_lines(p.stderr)), f"import, log: {p.stderr!r}")

p = run("fuse", PLATE, path("truth.yaml"), "-o", path("m3.zarr"), *SLOW, "--progress", "none")
check(not log_lines(p.stderr) and len(p.stderr.splitlines()) == 1 and p.stderr.startswith("tessera fuse: wrote "),
      f"fuse, none: no progress, only the summary: {p.stderr!r}")
p = run("fuse", PLATE, path("truth.yaml"), "-o", path("m4.zarr"), "--progress", "sometimes", ok=False)
check(p.returncode == 2 and "--progress" in p.stderr, f"bad --progress: exit {p.returncode} {p.stderr!r}")

# On a terminal: the bar, redrawn in place.
pid, fd = pty.fork()
if pid == 0:
    os.execv(BIN, [BIN, "fuse", PLATE, path("truth.yaml"), "-o", path("m5.zarr"), *SLOW])
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
text = out.decode(errors="replace")
check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"fuse on a terminal failed: {text[-500:]}")
check("\r" in text and "ETA" in text and "[#" in text and "(well 2 of 2)" in text and "took" in text,
      f"fuse on a terminal: no bar with ETA: {text[-500:]!r}")

finish()
