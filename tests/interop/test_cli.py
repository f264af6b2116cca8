"""The command-line contract (SPEC section 7) across every subcommand: --help
exits 0 on stdout, an unknown option exits 2 with one line on stderr, a
failure exits 1 with one line, nothing is drawn on stderr when it is not a
terminal, and every --json summary is valid JSON (json.loads), also when the
paths it names hold quotes and backslashes. Plates come from
`tessera simulate`."""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interop_checks import check, finish  # noqa: E402
import interop_checks  # noqa: E402

TMP = tempfile.mkdtemp(prefix="cli_", dir=os.environ.get("TESSERA_TEST_TMP"))
COMMANDS = ["simulate", "estimate", "solve", "fuse", "stitch", "info", "preview"]


def run(*args):
    return interop_checks.run(*map(str, args), ok=False)


def one_line(p):
    return len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1


def main():
    for c in COMMANDS:
        p = run(c, "--help")
        check(p.returncode == 0 and "usage" in p.stdout and not p.stderr, f"{c} --help: {p.returncode} {p.stderr!r}")
        p = run(c, "--no-such-flag")
        check(p.returncode == 2 and one_line(p) and "--no-such-flag" in p.stderr,
              f"{c} --no-such-flag: exit {p.returncode}, stderr {p.stderr!r}")

    plate = os.path.join(TMP, "p.zarr")
    truth = os.path.join(TMP, "truth.yaml")
    p = run("simulate", "-o", plate, "--grid", "3x2", "--tile", "40x48", "--overlap", "10", "--seed", "2",
            "--format", "0.4", "--truth", truth)
    if p.returncode != 0:
        sys.exit(f"FAIL: simulate: {p.stderr}")
    check(not p.stderr, f"simulate is not quiet off a terminal: {p.stderr!r}")

    # Paths a shell user can make: quotes and backslashes must be escaped in --json.
    odd = os.path.join(TMP, 'we"ird\\dir')
    os.makedirs(odd)
    out = os.path.join(odd, "st.zarr")
    p = run("stitch", plate, "-o", out, "--overlap", "10", "--chunk", "16", "--json")
    check(p.returncode == 0, f"stitch: exit {p.returncode} {p.stderr!r}")
    # Most pairs of these tiny tiles do not match: stitch warns as estimate does.
    e = run("estimate", plate, "-o", os.path.join(TMP, "w.yaml"), "--overlap", "10")
    # ... and then says what it wrote, as fuse does.
    est_lines, fuse_line = p.stderr.rsplit("\n", 2)[0] + "\n", p.stderr.rsplit("\n", 2)[1]
    check("warning" in e.stderr and e.stderr.replace("estimate", "stitch") == est_lines,
          f"stitch and estimate warn differently: {p.stderr!r} vs {e.stderr!r}")
    check(fuse_line.startswith(f"tessera stitch: wrote {out}: 1 well, 6 tiles, canvas ") and " chunk 16," in fuse_line,
          f"stitch's last stderr line is not the fuse summary: {fuse_line!r}")
    try:
        s = json.loads(p.stdout)
        check(s["shifts"] == out + ".shifts.yaml", f"stitch --json shifts {s['shifts']!r}")
        check(s["fuse"]["wells"] == 1 and s["estimate"]["tiles"] == 6, f"stitch --json {s}")
    except (ValueError, KeyError) as e:
        check(False, f"stitch --json is not valid JSON ({e}): {p.stdout!r}")

    solved = os.path.join(odd, "re\"solved.yaml")
    p = run("solve", out + ".shifts.yaml", "-o", solved, "--json")
    try:
        check(p.returncode == 0 and json.loads(p.stdout)["output"] == solved, f"solve --json {p.stdout!r}")
    except ValueError as e:
        check(False, f"solve --json is not valid JSON ({e}): {p.stdout!r}")

    for args in (["estimate", plate, "-o", os.path.join(TMP, "e.yaml"), "--overlap", "10"],
                 ["fuse", plate, truth, "-o", os.path.join(TMP, "f.zarr"), "--chunk", "16"],
                 ["info", out]):
        p = run(*args, "--json")
        try:
            json.loads(p.stdout)
        except ValueError as e:
            check(False, f"{args[0]} --json is not valid JSON ({e}): {p.stdout!r}")
        check(p.returncode == 0, f"{args[0]}: exit {p.returncode} {p.stderr!r}")

    # fuse and solve say what they wrote, in one line on stderr (also off a
    # terminal, also with --json); -q/--quiet leaves only warnings and errors.
    f_out, s_out = os.path.join(TMP, "said.zarr"), os.path.join(TMP, "said.yaml")
    p = run("fuse", plate, truth, "-o", f_out, "--chunk", "16", "--json")
    check(p.returncode == 0 and one_line(p) and p.stderr.startswith(f"tessera fuse: wrote {f_out}: 1 well, 6 tiles")
          and "chunk 16" in p.stderr and "blocks written" in p.stderr, f"fuse summary: {p.stderr!r}")
    p = run("solve", out + ".shifts.yaml", "-o", s_out)
    check(p.returncode == 0 and one_line(p) and p.stderr.startswith(f"tessera solve: wrote {s_out}: 1 well, 6 tiles")
          and "outliers" in p.stderr, f"solve summary: {p.stderr!r}")
    for args in (["fuse", plate, truth, "-o", os.path.join(TMP, "quiet.zarr"), "--chunk", "16"],
                 ["solve", out + ".shifts.yaml", "-o", os.path.join(TMP, "quiet.yaml")],
                 ["stitch", plate, "-o", os.path.join(TMP, "quiet_st.zarr"), "--overlap", "10", "--chunk", "16"]):
        p = run(*args, "--quiet")
        lines = [ln for ln in p.stderr.splitlines() if ln.strip() and "warning" not in ln]
        check(p.returncode == 0 and not lines, f"{args[0]} --quiet still prints {lines!r}")

    # The solver tuning flags of `solve` mean the same in estimate and stitch.
    for c, extra in (("estimate", ["-o", os.path.join(TMP, "e2.yaml")]),
                     ("stitch", ["-o", os.path.join(TMP, "s2.zarr"), "--chunk", "16"])):
        p = run(c, plate, *extra, "--overlap", "10", "--max-iterations", "7", "--tolerance", "1e-4",
                "--weight-floor", "0.01", "--outlier-px", "3", "--cost-tolerance", "0", "--solver", "l2")
        check(p.returncode == 0, f"{c} with solver tuning flags: exit {p.returncode} {p.stderr!r}")
        p = run(c, plate, *extra, "--overlap", "10", "--max-iterations", "0")
        check(p.returncode == 2 and one_line(p) and "--max-iterations" in p.stderr,
              f"{c} --max-iterations 0: exit {p.returncode} {p.stderr!r}")
        p = run(c, plate, *extra, "--overlap", "10", "--cost-tolerance", "-1")
        check(p.returncode == 2 and one_line(p) and "--cost-tolerance" in p.stderr,
              f"{c} --cost-tolerance -1: exit {p.returncode} {p.stderr!r}")

    # --opt=value is --opt value, for every command; a flag without a value refuses one.
    eq = os.path.join(TMP, "eq.zarr")
    p = run("simulate", f"--output={eq}", "--grid=3x2", "--tile=40x48", "--overlap=10", "--seed=2", "--format=0.4")
    check(p.returncode == 0 and interop_checks.tree_digest(eq) == interop_checks.tree_digest(plate),
          f"simulate --opt=value: exit {p.returncode} {p.stderr!r}, or another plate than --opt value")
    e_eq = os.path.join(TMP, "e_eq.yaml")
    p = run("estimate", plate, f"--output={e_eq}", "--overlap=10", "--solver=l2")
    run("estimate", plate, "-o", os.path.join(TMP, "e_sp.yaml"), "--overlap", "10", "--solver", "l2")
    check(p.returncode == 0 and open(e_eq).read() == open(os.path.join(TMP, "e_sp.yaml")).read(),
          f"estimate --opt=value: exit {p.returncode} {p.stderr!r}, or other shifts than --opt value")
    for c in COMMANDS:
        p = run(c, "--json=1")
        check(p.returncode == 2 and one_line(p) and "--json takes no value" in p.stderr,
              f"{c} --json=1: exit {p.returncode} {p.stderr!r}")

    # A size is refused unless it is 1 byte to 8 EiB: (size_t)1e30 was undefined (0 here).
    for c, flag, extra in (("fuse", "--memory", [truth, "-o", os.path.join(TMP, "m.zarr")]),
                           ("estimate", "--cache", ["-o", os.path.join(TMP, "m.yaml"), "--overlap", "10"])):
        for v in ("1e30", "inf", "0.5", "1e19"):
            p = run(c, plate, *extra, flag, v)
            check(p.returncode == 2 and one_line(p) and flag in p.stderr and v in p.stderr,
                  f"{c} {flag} {v}: exit {p.returncode} {p.stderr!r}")

    # A percentage overlap of a tile declared 5e10 px wide: refused in px (it was cast to int, 705032704 px).
    big = os.path.join(TMP, "big.zarr")
    shutil.copytree(plate, big)
    meta = os.path.join(big, "A", "1", "000000", "0", ".zarray")
    with open(meta) as f:
        z = json.load(f)
    z["shape"][-1] = 50000000000
    with open(meta, "w") as f:
        json.dump(z, f)
    p = run("estimate", big, "-o", os.path.join(TMP, "big.yaml"), "--overlap", "10%")
    check(p.returncode == 2 and one_line(p) and "10%" in p.stderr and "50000000000" in p.stderr
          and "705032704" not in p.stderr, f"estimate --overlap 10% of a 5e10 px tile: {p.returncode} {p.stderr!r}")

    # A failure that is not a usage error: exit 1, one line naming the file.
    p = run("fuse", plate, os.path.join(TMP, "missing.yaml"), "-o", os.path.join(TMP, "g.zarr"))
    check(p.returncode == 1 and one_line(p) and "missing.yaml" in p.stderr, f"fuse missing shifts: {p.returncode} {p.stderr!r}")

    shutil.rmtree(TMP, ignore_errors=True)
    finish()


if __name__ == "__main__":
    main()
