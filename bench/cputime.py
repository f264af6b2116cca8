"""Runs a command and writes "WALL USER SYS MAXRSS_KB" to the file named by
its first argument, as /usr/bin/time -f "%e %U %S %M" -o FILE does, but
with the kernel's microsecond CPU times (time(1) prints 10 ms steps: 0.06
ms per pair on register_bench's 256 px plate, a third of the gap between
its default run and the 3x target).
    cputime.py OUT_FILE COMMAND [ARGS...]"""
import os
import resource
import subprocess
import sys
import time

out, cmd = sys.argv[1], sys.argv[2:]
t0 = time.monotonic()
rc = subprocess.call(cmd)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out, "w") as f:
    f.write(f"{wall:.6f} {ru.ru_utime:.6f} {ru.ru_stime:.6f} {ru.ru_maxrss}\n")
sys.exit(rc)
