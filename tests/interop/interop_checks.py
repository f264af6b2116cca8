"""Shared by the interop tests: collect failures instead of stopping at the
first (a run reports every broken expectation), run the tessera binary, and
end the test with the right exit status. Not a test itself (CMake runs only
test_*.py)."""
import hashlib
import os
import subprocess
import sys

BIN = os.environ.get("TESSERA_BIN", "tessera")

failures = []


def check(cond, msg):
    """Records msg as a failure when cond is false (and prints it)."""
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def run(*args, ok=True):
    """Runs `tessera ARGS`; with ok, a non-zero exit ends the test."""
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        raise SystemExit(f"tessera {' '.join(args)} failed ({p.returncode}): {p.stderr}")
    return p


def finish(more=()):
    """Exit 1 listing every failure (those of check() and any in `more`, a
    test's own list), or print ok."""
    every = failures + list(more)
    if every:
        print(f"{len(every)} failure(s):\n  " + "\n  ".join(every))
        sys.exit(1)
    print("ok")


def tree_digest(root):
    """{path relative to root: sha256} of every file under root: two trees
    hold the same files with the same bytes iff their digests are equal."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            full = os.path.join(d, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def crc32c(data):
    """Bitwise CRC32C from its definition (numcodecs 0.11 has no CRC32C codec)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
