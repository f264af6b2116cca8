#!/usr/bin/env bash
# Pairwise registration, in one run on the same simulated plate (known truth):
#   - tessera estimate, 1 thread: ms per pair (CPU time of the whole run:
#     decode, registration, solve, YAML, over all pairs registered; the
#     kernel's microsecond figure, bench/cputime.py) and peak
#     RSS; THREADS threads: pairs/s end to end;
#   - the floor (bench/register_floor.c): decoding every tile (the faster
#     of two reads, into buffers already faulted in, not converted to
#     float) plus, per pair, the FFTW r2c of both strips and one c2r at
#     estimate's strip
#     shapes, CPU ms per pair; the ratio tessera / floor (target <= 3) of
#     the default run (with the stage model's pass) and, where estimate has
#     --no-stage-model, of the first pass alone; and what one pair more
#     costs: the run less a 3x3 plate's (its fixed costs: start-up, FFTW
#     plans), over the pairs more;
#   - scikit-image phase_cross_correlation on the same strips
#     (bench/register_bench.py): pairs/s of the correlation alone, error.
#   bash bench/register_bench.sh [BUILD_DIR] [THREADS] [TILE_SIDE...]
#   (default build, 2, all of 256 512 1024 2048)
BUILD=${1:-build}
THREADS=${2:-2}
SIDES="${*:3}"
SIDES=${SIDES:-256 512 1024 2048}
source "$(dirname "$0")/lib.sh"

ROUNDS=5 # each round measures the floor and each estimate once; the least of each is kept

once() { # PLATE extra args... -> MS_CPU MS_WALL RSS_MB PPS CPU_MS_TOTAL PAIRS of one run
  local plate=$1
  shift
  "$PY" "$SRC/bench/cputime.py" "$WORK/time" "$T" estimate "$plate" -o "$WORK/shifts.yaml" \
    --overlap "$OVERLAP" --json "$@" > "$WORK/est.json" 2> "$WORK/est.err"
  read -r wall user sys rss < "$WORK/time"
  "$PY" -c "
import json; d = json.load(open('$WORK/est.json')); n = d['pairs'] + d['unmatched_pairs']
print(1e3 * ($user + $sys) / n, 1e3 * $wall / n, $rss / 1024, d['pairs_per_second'], 1e3 * ($user + $sys), n)"
}

startup() { # -> CPU ms of one `tessera --version`: the process's start-up and exit (the
  # dynamic loader mapping and relocating its 45 libraries), which the floor, timed
  # inside one process, has none of
  "$PY" "$SRC/bench/cputime.py" "$WORK/time" "$T" --version > /dev/null
  read -r _ user sys _ < "$WORK/time"
  "$PY" -c "print(1e3 * ($user + $sys))"
}

least() { # "A..." "B..." -> the line whose first field is the smaller ("" counts as none)
  if [ -z "$1" ] || { [ -n "$2" ] && "$PY" -c "import sys; sys.exit(not ${2%% *} < ${1%% *})"; }; then
    echo "$2"
  else
    echo "$1"
  fi
}

NO_STAGE=""
# (grep reads the whole help: with -q it may exit first, and under pipefail
# the help's SIGPIPE left the --no-stage-model run out now and then)
"$T" estimate --help 2>&1 | grep -- --no-stage-model >/dev/null && NO_STAGE=--no-stage-model
for cfg in "10x10 256x256 32" "8x6 512x512 64" "5x4 1024x1024 128" "3x3 2048x2048 256"; do
  set -- $cfg
  GRID=$1 TILE=$2 OVERLAP=$3
  [[ " $SIDES " == *" ${TILE%x*} "* ]] || continue
  echo "== $GRID tiles of $TILE uint16, overlap $OVERLAP px, jitter 4, noise 20, 5% blank"
  "$T" simulate -o "$WORK/plate.zarr" --grid "$GRID" --tile "$TILE" --overlap "$OVERLAP" --jitter 4 \
    --blank 0.05 --format 0.4 --truth "$WORK/truth.yaml" --seed 2 >/dev/null
  # A 3x3 plate of tiles of the same size and overlap (none blank: no
  # overlap probe), a run's fixed costs (process start-up, FFTW plans,
  # metadata) with 12 pairs, which the floor has none of. The
  # plate's run less this one, over the pairs more, is what one pair more
  # costs (the per-pair figure of a large plate). (Not 2x2: with fewer
  # than 3 pairs along an axis estimate probes the overlap, two passes
  # more, which would count as fixed.)
  rm -rf "$WORK/small.zarr"
  "$T" simulate -o "$WORK/small.zarr" --grid 3x3 --tile "$TILE" --overlap "$OVERLAP" --jitter 4 \
    --format 0.4 --seed 2 >/dev/null
  # The machine's load drifts over a run (the floor moved 1.3x between
  # runs): the floor and the runs are measured in turns, ROUNDS times,
  # so that each least figure comes from the same stretch of time.
  FLOOR="" FLOOR_MS="" BEST_NS="" BEST_DEF="" BEST_PAR="" BEST_SMALL="" RATIOS="" START=""
  for _ in $(seq "$ROUNDS"); do
    F=$("$BUILD/bench/register_floor" "$WORK/plate.zarr" "$OVERLAP" 1)
    F_MS=$(sed -n 's/^floor:.* \([0-9.]*\) ms\/pair$/\1/p' <<< "$F")
    if [ -z "$FLOOR_MS" ] || "$PY" -c "import sys; sys.exit(not $F_MS < $FLOOR_MS)"; then FLOOR=$F FLOOR_MS=$F_MS; fi
    [ -z "$NO_STAGE" ] || BEST_NS=$(least "$BEST_NS" "$(once "$WORK/plate.zarr" --threads 1 $NO_STAGE)")
    D=$(once "$WORK/plate.zarr" --threads 1)
    BEST_DEF=$(least "$BEST_DEF" "$D")
    # this round's default run over this round's floor, measured back to back
    RATIOS="$RATIOS $("$PY" -c "print(${D%% *} / $F_MS)")"
    S=$(once "$WORK/small.zarr" --threads 1)
    BEST_SMALL=$(least "$BEST_SMALL" "${S#* * * * }") # CPU_MS_TOTAL PAIRS
    BEST_PAR=$(least "$BEST_PAR" "$(once "$WORK/plate.zarr" --threads "$THREADS")")
    START=$(least "$START" "$(startup)")
  done
  echo "$FLOOR"
  echo "(the floor and each run below: the least of $ROUNDS rounds, in turns)"
  read -r MS_CPU MS_WALL RSS_MB PPS _ _ <<< "$BEST_PAR"
  printf 'tessera threads %s: %s pairs/s end to end, peak_rss_mb=%.1f\n' "$THREADS" "$PPS" "$RSS_MB"
  NS_MS=""
  if [ -n "$NO_STAGE" ]; then # the first pass alone (the stage model's pass is extra work)
    read -r MS_CPU MS_WALL RSS_MB PPS _ _ <<< "$BEST_NS"
    NS_MS=$MS_CPU
    printf 'tessera threads 1 %s: %.2f ms/pair CPU (%.2f wall), ratio %.2f to the floor, peak_rss_mb=%.1f\n' \
      "$NO_STAGE" "$MS_CPU" "$MS_WALL" "$("$PY" -c "print($MS_CPU / $FLOOR_MS)")" "$RSS_MB"
  fi
  read -r MS_CPU MS_WALL RSS_MB PPS CPU_TOTAL NPAIRS <<< "$BEST_DEF"
  # (shifts.yaml and est.json, which register_bench.py reads, are the last run's: --threads THREADS,
  # the same file as on 1 thread)
  printf 'tessera threads 1 (default: stage model on): %.2f ms/pair CPU (%.2f wall), floor %.2f ms/pair, ratio %.2f (target <= 3), peak_rss_mb=%.1f\n' \
    "$MS_CPU" "$MS_WALL" "$FLOOR_MS" "$("$PY" -c "print($MS_CPU / $FLOOR_MS)")" "$RSS_MB"
  read -r SMALL_TOTAL SMALL_PAIRS <<< "$BEST_SMALL"
  if [ -n "$NPAIRS" ] && [ -n "$SMALL_PAIRS" ] && [ "$NPAIRS" -gt "$SMALL_PAIRS" ]; then
    MARGINAL=$("$PY" -c "print(($CPU_TOTAL - $SMALL_TOTAL) / ($NPAIRS - $SMALL_PAIRS))")
    printf 'tessera threads 1, one pair more: %.2f ms/pair CPU (the run less a 3x3 plate'"'"'s, %.1f ms for %d pairs: start-up, plans), ratio %.2f to the floor\n' \
      "$MARGINAL" "$SMALL_TOTAL" "$SMALL_PAIRS" "$("$PY" -c "print($MARGINAL / $FLOOR_MS)")"
  fi
  # Of the fixed costs, the part no registration can shed: the process's start-up.
  printf 'start-up (tessera --version): %.1f ms CPU; the default run less it: %.2f ms/pair, ratio %.2f to the floor\n' \
    "$START" "$("$PY" -c "print(($CPU_TOTAL - $START) / $NPAIRS)")" \
    "$("$PY" -c "print(($CPU_TOTAL - $START) / $NPAIRS / $FLOOR_MS)")"
  "$PY" -c "
import statistics; r = sorted(float(x) for x in '$RATIOS'.split())
print(f'default run over the floor, round by round: median {statistics.median(r):.2f} (range {r[0]:.2f}-{r[-1]:.2f})')"
  [ -z "$NS_MS" ] || printf 'stage model pass: %.2f ms/pair CPU (the default minus %s)\n' \
    "$("$PY" -c "print($MS_CPU - $NS_MS)")" "$NO_STAGE"
  "$PY" "$SRC/bench/register_bench.py" "$WORK/plate.zarr" "$WORK/truth.yaml" "$WORK/shifts.yaml" "$WORK/est.json"
done
