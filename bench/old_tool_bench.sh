#!/usr/bin/env bash
# tessera fuse against the old Python/CuPy tool's CPU path (issue 12: >= 3x).
# The old tool's code is not available; bench/old_tool_model.py models its
# assemble_streaming loop with NumPy where CuPy would be (docstring there).
# In one run, on two simulated plates (8x8 tiles of 512^2, 5x4 of 2048^2;
# 0.4 input, 1 channel, uint16), for blosc-lz4 and the default codec
# (blosc-zstd:3), and for 0.5 output (shards: the old tool's shard path)
# and 0.4 output (one file per chunk: its direct chunk writes), it prints
# tessera's time and peak RSS, the model's, and the ratio beside the 3x
# target; then the model's output is compared with tessera's (uint16: the
# old tool truncates where tessera rounds, so at most 1 grey level; float32:
# the largest difference) and checked with `tessera verify`.
# Both write the same array (the model takes tessera's layout, band = block
# = shard row) at level 0 only (--levels 0: the old tool writes no pyramid).
# tessera's time is the whole process (`date` around it); the model's is
# from after its imports (Python start-up, ~0.3 s, is not counted).
# Best of 3 each (the machine is shared).
#   bash bench/old_tool_bench.sh [BUILD_DIR] [THREADS] [small|large|both]   (default build, 2, both)
BUILD=${1:-build}
THREADS=${2:-2}
PLATES=${3:-both}
source "$(dirname "$0")/lib.sh"
M="$SRC/bench/old_tool_model.py"
now() { date +%s.%N; }

tessera_best() {  # FMT CODECFLAGS...: best of 3 into $WORK/t.zarr; sets t_s t_rss band
  local fmt=$1; shift
  t_s=""
  for _ in 1 2 3; do
    rm -rf "$WORK/t.zarr"
    local s e
    s=$(now)
    /usr/bin/time -f "%M" -o "$WORK/rss" "$T" fuse -q "$WORK/plate.zarr" "$WORK/truth.yaml" -o "$WORK/t.zarr" \
      --format "$fmt" --levels 0 --threads "$THREADS" "$@" --json > "$WORK/t.json"
    e=$(now)
    local dt
    dt=$("$PY" -c "print('%.3f' % ($e - $s))")
    if [ -z "$t_s" ] || "$PY" -c "import sys; sys.exit(not $dt < $t_s)"; then
      t_s=$dt; t_rss=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss")
    fi
  done
  band=$("$PY" -c "import json;d=json.load(open('$WORK/t.json'));print(d['shard'] * d['chunk'])")
}

model_best() {  # sets m_s m_rss m_line m_w1 (time with the weights computed once per run)
  m_s=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%M" -o "$WORK/rss" "$PY" "$M" "$WORK/plate.zarr" "$WORK/truth.yaml" "$WORK/m.zarr" \
      --like "$WORK/t.zarr" --band "$band" > "$WORK/m.txt"
    local line s w wf
    line=$(cat "$WORK/m.txt")
    s=$(echo "$line" | sed -n 's/.*): \([0-9.]*\) s = .*/\1/p')
    w=$(echo "$line" | sed -n 's/.* weights \([0-9.]*\) s,.*/\1/p')
    wf=$(echo "$line" | sed -n "s/.*(first band's \([0-9.]*\) s).*/\1/p")
    if [ -z "$m_s" ] || "$PY" -c "import sys; sys.exit(not $s < $m_s)"; then
      m_s=$s; m_line=$line; m_rss=$(awk '{printf "%.1f", $1/1024}' "$WORK/rss")
      m_w1=$("$PY" -c "print('%.3f' % ($s - $w + $wf))")
    fi
  done
}

plate() {  # GRID TILE OVERLAP
  echo "== plate: $1 tiles of $2 uint16, overlap $3 px, 1 channel, 0.4 input, tessera --threads $THREADS," \
       "model 2 write workers + 1 loader"
  rm -rf "$WORK/plate.zarr"
  "$T" simulate -o "$WORK/plate.zarr" --grid "$1" --tile "$2" --overlap "$3" --format 0.4 \
    --truth "$WORK/truth.yaml" --seed 1 >/dev/null
  for codec in blosc-lz4 default; do
    for fmt in 0.5 0.4; do
      if [ $codec = default ]; then tessera_best $fmt; else tessera_best $fmt --codec $codec; fi
      model_best
      echo "$m_line"
      "$PY" -c "
print('%s output, %s: tessera %.3f s (peak_rss_mb=%s), old-tool model %.3f s (peak_rss_mb=%s): %.1fx '
      '(target >= 3x; %.1fx against the model with its weights computed once per run, %.3f s)'
      % ('$fmt', '$codec' if '$codec' != 'default' else 'blosc-zstd:3 (default)', $t_s, '$t_rss', $m_s, '$m_rss',
         $m_s / $t_s, $m_w1 / $t_s, $m_w1))"
      if [ $codec = default ]; then
        "$PY" "$M" "$WORK/plate.zarr" "$WORK/truth.yaml" "$WORK/m.zarr" --like "$WORK/t.zarr" --band "$band" \
          --compare | tail -n 1
        "$T" verify "$WORK/m.zarr" >/dev/null && echo "tessera verify of the model's $fmt store: ok"
      fi
    done
  done
  # float32 output: the same arithmetic, so the difference should be float rounding at most.
  rm -rf "$WORK/t.zarr"
  "$T" fuse -q "$WORK/plate.zarr" "$WORK/truth.yaml" -o "$WORK/t.zarr" --levels 0 --dtype float32 \
    --threads "$THREADS" --json > "$WORK/t.json"
  band=$("$PY" -c "import json;d=json.load(open('$WORK/t.json'));print(d['shard'] * d['chunk'])")
  "$PY" "$M" "$WORK/plate.zarr" "$WORK/truth.yaml" "$WORK/m.zarr" --like "$WORK/t.zarr" --band "$band" \
    --compare | tail -n 1
}
case "$PLATES" in small|both) plate 8x8 512x512 51 ;; large) ;; *) echo "plates: small, large or both" >&2; exit 2 ;; esac
case "$PLATES" in large|both) plate 5x4 2048x2048 205 ;; esac
