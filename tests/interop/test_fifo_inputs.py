"""Inputs that are not regular files, or claim absurd sizes, are refused at
once (issue 8, item 11): a FIFO given as the shifts file of solve, fuse,
preview and estimate's --guess (a plain fopen waited for a writer for
ever), a FIFO or a 1 GiB sparse file as an OME group's .zattrs (read whole,
without the 64 MiB cap of zarr metadata). Each run must end within 20 s with
exit 1 and one line naming the file."""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import BIN, check, finish, run  # noqa: E402

TMP = tempfile.mkdtemp(prefix="fifo_", dir=os.environ.get("TESSERA_TEST_TMP"))
plate = os.path.join(TMP, "p.zarr")
run("simulate", "-o", plate, "--grid", "2x2", "--tile", "64x64", "--overlap", "12", "--format", "0.4",
    "--truth", os.path.join(TMP, "t.yaml"))
mosaic = os.path.join(TMP, "m.zarr")
run("fuse", plate, os.path.join(TMP, "t.yaml"), "-o", mosaic)
fifo = os.path.join(TMP, "fifo.yaml")
os.mkfifo(fifo)


def refused(label, args, needle):
    try:
        p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        check(False, f"{label}: hung (killed after 20 s)")
        return
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and needle in p.stderr,
          f"{label}: exit {p.returncode}, want 1 and one line naming {needle}: {p.stderr!r}")


refused("solve, FIFO shifts", ["solve", fifo, "-o", os.path.join(TMP, "o.yaml")], "a FIFO, not a regular file")
refused("fuse, FIFO shifts", ["fuse", plate, fifo, "-o", os.path.join(TMP, "o.zarr")], "a FIFO")
refused("preview, FIFO shifts", ["preview", mosaic, "-o", os.path.join(TMP, "o.png"), "--shifts", fifo], "a FIFO")
refused("estimate, FIFO guess", ["estimate", plate, "-o", os.path.join(TMP, "e.yaml"), "--overlap", "12",
                                 "--guess", fifo], "a FIFO")

zattrs = os.path.join(plate, "A", "1", "000000", ".zattrs")
saved = open(zattrs, "rb").read()
os.remove(zattrs)
os.mkfifo(zattrs)
refused("estimate, FIFO .zattrs", ["estimate", plate, "-o", os.path.join(TMP, "e.yaml"), "--overlap", "12"],
        ".zattrs")
os.remove(zattrs)
with open(zattrs, "wb") as fh:
    fh.write(saved)
    fh.truncate(1 << 30)
refused("estimate, 1 GiB .zattrs", ["estimate", plate, "-o", os.path.join(TMP, "e.yaml"), "--overlap", "12"],
        "more than the 67108864 bytes")
finish()
