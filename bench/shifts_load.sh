#!/usr/bin/env bash
# Loading a 167k-tile shifts file (total_translation + confidence + tiles +
# pairs): tessera's libyaml event reader beside PyYAML's CSafeLoader (libyaml
# + Python objects) and pure-Python SafeLoader (the old tool's 30 s), on the
# same file, with peak RSS of each.
#   bash bench/shifts_load.sh [BUILD_DIR] [SIDE]   (default build, 409 -> 167,281 tiles)
#   SKIP_SAFELOADER=1 skips the slow pure-Python run.
BUILD=${1:-build}
SIDE=${2:-409}
source "$(dirname "$0")/lib.sh"

FILE="$WORK/shifts.yaml"
"$BUILD/bench/shifts_load" gen "$FILE" "$SIDE"
echo "file: $(du -h "$FILE" | cut -f1), $(wc -l <"$FILE") lines"

run_py() { # loader name
  "$PY" - "$FILE" "$1" <<'PYEOF'
import resource, sys, time, yaml
path, loader = sys.argv[1], sys.argv[2]
L = getattr(yaml, loader)
t0 = time.perf_counter()
with open(path) as f:
    d = yaml.load(f, Loader=L)
dt = time.perf_counter() - t0
n = len(d["total_translation"]); p = sum(len(v) for v in d["pairs"].values())
print(f"load_s={dt:.3f} tiles={n} pairs={p} peak_rss_mb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.1f}")
PYEOF
}

T=$("$BUILD/bench/shifts_load" load "$FILE")
C=$(run_py CSafeLoader)
echo "tessera      : $T"
echo "CSafeLoader  : $C"
ts=$(sed 's/.*load_s=\([0-9.]*\).*/\1/' <<<"$T")
cs=$(sed 's/.*load_s=\([0-9.]*\).*/\1/' <<<"$C")
echo "ratio CSafeLoader/tessera: $(awk -v a="$cs" -v b="$ts" 'BEGIN{printf "%.1fx", a/b}')"
if [ -z "${SKIP_SAFELOADER:-}" ]; then
  S=$(run_py SafeLoader)
  echo "SafeLoader   : $S"
  ss=$(sed 's/.*load_s=\([0-9.]*\).*/\1/' <<<"$S")
  echo "ratio SafeLoader/tessera: $(awk -v a="$ss" -v b="$ts" 'BEGIN{printf "%.1fx", a/b}')"
fi
