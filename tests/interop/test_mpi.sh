# SPEC section 4: the same binary under MPI (`mpirun -n N tessera ...`) writes
# what one process writes. A small simulated plate (2 wells, 2 channels, 2
# timepoints or 2 z planes, a pyramid level) is estimated, fused and stitched
# in one process and under `mpirun -n 2` and `-n 3`; the shifts files must be
# equal under cmp(1) and the stores under `diff -r`. Small chunks and shards
# give more bands than ranks, so every rank writes. Failing runs (a tile
# corrupt in the bottom row, read by the last rank only; an output under a
# regular file) must exit non-zero within a timeout, with one message from
# tessera on stderr, as the single-process run does; one failing while it
# replaces an existing store's images leaves that store as it was.
# Skips (exit 77) only when tessera was built without MPI.
set -u

if [ "${TESSERA_MPI:-OFF}" != "ON" ]; then
    echo "SKIP: tessera was built without MPI (TESSERA_MPI=${TESSERA_MPI:-unset}); nothing to test"
    exit 77
fi
BIN=${TESSERA_BIN:?TESSERA_BIN not set}
MPIEXEC=${TESSERA_MPIEXEC:-mpirun}
TMP=$(mktemp -d "${TESSERA_TEST_TMP:-/tmp}/mpi.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

MPIRUN=("$MPIEXEC" --oversubscribe -q)
# Open MPI refuses to run as root unless told that it is meant.
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)

# Under the sanitizers: Open MPI's own allocations at MPI_Init are not freed
# at MPI_Finalize; they are not tessera's leaks. They are told apart by the
# library in their stacks, which needs its plugins kept loaded (else their
# frames are unknown) and the slow unwinder (Open MPI has no frame pointers).
printf 'leak:libmpi.so\nleak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\nleak:libhwloc.so\nleak:libevent\nleak:mca_\n' \
    >"$TMP/lsan.supp"
export LSAN_OPTIONS="suppressions=$TMP/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
export OMPI_MCA_mca_base_component_disable_dlclose=1

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# mpi N ARGS...: tessera under mpirun with N ranks, 60 s at most.
mpi() {
    local n=$1
    shift
    timeout 60 "${MPIRUN[@]}" -n "$n" "$BIN" "$@"
}

same_file() { if cmp -s "$1" "$2"; then pass "$3"; else fail "$3: $1 and $2 differ"; fi; }
same_tree() {
    if diff -r "$1" "$2" >"$TMP/diff.txt" 2>&1; then pass "$3"
    else fail "$3: $1 and $2 differ:"; head -5 "$TMP/diff.txt"; fi
}

FUSE_ARGS=(--chunk 16 --shard 2 --levels 1 --memory 16M)

for fmt in 0.4 0.5; do
    d="$TMP/$fmt"
    mkdir -p "$d"
    if [ "$fmt" = 0.4 ]; then extra=(--timepoints 2); else extra=(--z 2); fi
    "$BIN" simulate -o "$d/plate" --wells A/1,B/2 --grid 4x3 --tile 72x96 --overlap 16 --jitter 2 \
        --channels 2 "${extra[@]}" --format "$fmt" --seed 7 >/dev/null || { fail "simulate $fmt"; continue; }

    # estimate: one process, 2 and 3 ranks.
    "$BIN" estimate "$d/plate" -o "$d/s1.yaml" --overlap 16 --threads 2 || fail "estimate $fmt (1 process)"
    for n in 2 3; do
        mpi "$n" estimate "$d/plate" -o "$d/s$n.yaml" --overlap 16 --threads 1
        rc=$?
        [ $rc = 0 ] || fail "estimate $fmt under mpirun -n $n exited $rc"
        same_file "$d/s1.yaml" "$d/s$n.yaml" "estimate $fmt: -n $n shifts file = one process's"
    done

    # fuse: explicit layout, and the automatic one (which depends on neither
    # threads nor ranks: -n 2 x 1 thread = one process x 2 threads).
    "$BIN" fuse "$d/plate" "$d/s1.yaml" -o "$d/f1" --format "$fmt" "${FUSE_ARGS[@]}" --threads 2 ||
        fail "fuse $fmt (1 process)"
    "$BIN" fuse "$d/plate" "$d/s1.yaml" -o "$d/a1" --format "$fmt" --chunk 16 --threads 2 ||
        fail "fuse $fmt auto layout (1 process)"
    for n in 2 3; do
        mpi "$n" fuse "$d/plate" "$d/s1.yaml" -o "$d/f$n" --format "$fmt" "${FUSE_ARGS[@]}" --threads 1 \
            --json >"$d/f$n.json"
        rc=$?
        [ $rc = 0 ] || fail "fuse $fmt under mpirun -n $n exited $rc"
        same_tree "$d/f1" "$d/f$n" "fuse $fmt: -n $n store = one process's"
        # --json printed once (rank 0), with every rank's blocks counted.
        lines=$(wc -l <"$d/f$n.json")
        [ "$lines" = 1 ] || fail "fuse $fmt -n $n: $lines --json lines, want 1"
    done
    "$BIN" fuse "$d/plate" "$d/s1.yaml" -o "$d/f1j" --format "$fmt" "${FUSE_ARGS[@]}" --json >"$d/f1.json"
    want=$(grep -o '"blocks_written":[0-9]*\|"output_pixels":[0-9]*' "$d/f1.json" | tr '\n' ' ')
    got=$(grep -o '"blocks_written":[0-9]*\|"output_pixels":[0-9]*' "$d/f3.json" | tr '\n' ' ')
    [ -n "$want" ] && [ "$want" = "$got" ] && pass "fuse $fmt -n 3: --json counts = one process's ($got)" ||
        fail "fuse $fmt -n 3: --json counts '$got', one process '$want'"
    mpi 2 fuse "$d/plate" "$d/s1.yaml" -o "$d/a2" --format "$fmt" --chunk 16 --threads 1 ||
        fail "fuse $fmt auto layout under mpirun -n 2"
    same_tree "$d/a1" "$d/a2" "fuse $fmt, automatic layout: -n 2 x 1 thread = 1 process x 2 threads"

    # stitch: estimate then the distributed fuse.
    "$BIN" stitch "$d/plate" -o "$d/st1" --overlap 16 --shifts-out "$d/st1.yaml" --format "$fmt" \
        "${FUSE_ARGS[@]}" || fail "stitch $fmt (1 process)"
    mpi 2 stitch "$d/plate" -o "$d/st2" --overlap 16 --shifts-out "$d/st2.yaml" --format "$fmt" \
        "${FUSE_ARGS[@]}" --threads 1 || fail "stitch $fmt under mpirun -n 2"
    same_file "$d/st1.yaml" "$d/st2.yaml" "stitch $fmt: -n 2 shifts file = one process's"
    same_tree "$d/st1" "$d/st2" "stitch $fmt: -n 2 store = one process's"
done

# --t-out: one timepoint at a time into a store the first run creates (the
# other ranks open the arrays rank 0 created, then an existing store).
d="$TMP/0.5"
for t in 1 0; do
    "$BIN" fuse "$d/plate" "$d/s1.yaml" -o "$d/t1" "${FUSE_ARGS[@]}" --t-out $t || fail "fuse --t-out $t (1 process)"
    mpi 2 fuse "$d/plate" "$d/s1.yaml" -o "$d/t2" "${FUSE_ARGS[@]}" --t-out $t --threads 1 ||
        fail "fuse --t-out $t under mpirun -n 2"
done
same_tree "$d/t1" "$d/t2" "fuse --t-out 1 then 0: -n 2 store = one process's"

# Failures. A tile of the bottom row with its data truncated: under 3 ranks
# only the last one reads it (its bands, its edges), and every rank must stop
# with that rank's message instead of waiting for it.
cp -r "$d/plate" "$TMP/bad"
found=0
while IFS= read -r f; do
    case "$(basename "$f")" in zarr.json | .z*) continue ;; esac
    head -c 7 "$f" >"$f.cut" && mv "$f.cut" "$f" && found=1
done < <(find "$TMP/bad/B/2/003002/0" -type f)
[ $found = 1 ] || fail "no data file found to corrupt under $TMP/bad/B/2/003002/0"

# check_failure NAME OUT -- ARGS...: one process, then 3 ranks; both fail, the
# MPI run within the timeout, one line of tessera on stderr naming WHAT.
check_failure() {
    local name=$1 what=$2 out=$3
    shift 4
    "$BIN" "$@" -o "$out.1" --threads 1 >/dev/null 2>"$TMP/err1.txt"
    local rc1=$?
    mpi 3 "$@" -o "$out.3" --threads 1 >/dev/null 2>"$TMP/err3.txt"
    local rc3=$?
    local lines
    lines=$(grep -c '^tessera' "$TMP/err3.txt")
    if [ $rc3 = 124 ]; then
        fail "$name under mpirun -n 3 hung (killed by the 60 s timeout)"
    elif [ $rc1 = 0 ] || [ $rc3 != $rc1 ]; then
        fail "$name: one process exited $rc1, mpirun -n 3 exited $rc3"
    elif [ "$lines" != 1 ] || ! grep -q "$what" "$TMP/err3.txt"; then
        fail "$name: want one tessera line naming $what on stderr, got:"; cat "$TMP/err3.txt"
    else
        pass "$name: exit $rc3 under mpirun -n 3 as in one process; $(grep '^tessera' "$TMP/err3.txt")"
    fi
    if [ -e "$out.1" ] || [ -e "$out.3" ]; then
        [ -e "$out.1" ] && [ -e "$out.3" ] && same_tree "$out.1" "$out.3" "$name: what is left = one process's" ||
            fail "$name: one process left $( [ -e "$out.1" ] && echo a || echo no) output, mpirun $( [ -e "$out.3" ] && echo a || echo no)"
    fi
}

# Ranks with different --threads (MPMD): the schedule each rank cuts its run
# from must be the same on all, or results land on the wrong pairs (the band
# width once came from each rank's own threads). A small --cache makes the
# band narrower than the 12 grid columns, so the order depends on it.
"$BIN" simulate -o "$TMP/wide" --grid 12x3 --tile 128x128 --overlap 24 --seed 3 >/dev/null || fail "simulate wide"
"$BIN" estimate "$TMP/wide" -o "$TMP/wide1.yaml" --overlap 24 --cache 1M --threads 1 || fail "estimate wide (1 process)"
timeout 60 "${MPIRUN[@]}" -n 1 "$BIN" estimate "$TMP/wide" -o "$TMP/wide2.yaml" --overlap 24 --cache 1M --threads 1 : \
    -n 1 "$BIN" estimate "$TMP/wide" -o "$TMP/wide2.yaml" --overlap 24 --cache 1M --threads 4 ||
    fail "estimate under MPMD mpirun (threads 1 and 4) exited non-zero"
same_file "$TMP/wide1.yaml" "$TMP/wide2.yaml" "estimate: ranks with 1 and 4 threads give one process's shifts file"

# The stage model's pass under MPI: the pairs it redoes (every pair here:
# jitter 6 is a good part of the 24-px overlap) are shared over the ranks,
# whose results every rank gets; the file must be one process's, with
# pairs replaced (else the pass changed nothing to compare).
"$BIN" simulate -o "$TMP/stage" --grid 7x7 --tile 128x128 --overlap 24 --jitter 6 --blank 0.1 --seed 6 \
    --format 0.4 >/dev/null || fail "simulate stage"
"$BIN" estimate "$TMP/stage" -o "$TMP/stage1.yaml" --overlap 24 --threads 1 --json >"$TMP/stage1.json" ||
    fail "estimate stage (1 process)"
grep -q '"reregistered_pairs":[1-9]' "$TMP/stage1.json" && pass "estimate stage: pairs replaced by the stage pass" ||
    fail "estimate stage: no pair replaced by the stage pass ($(cat "$TMP/stage1.json"))"
for n in 2 3; do
    mpi "$n" estimate "$TMP/stage" -o "$TMP/stage$n.yaml" --overlap 24 --threads 1 ||
        fail "estimate stage under mpirun -n $n exited non-zero"
    same_file "$TMP/stage1.yaml" "$TMP/stage$n.yaml" "estimate, stage pass on the ranks: -n $n shifts file = one process's"
done

# Diagonal bridges (register/bridge.c) are measured by the first rank
# alone, from the tiles it kept and others it reads: a quarter of the tiles
# blank leaves tiles outside the largest group, two bridged here.
"$BIN" simulate -o "$TMP/bridge" --grid 7x7 --tile 128x128 --overlap 24 --jitter 6 --blank 0.25 --seed 6 \
    --format 0.4 >/dev/null || fail "simulate bridge"
"$BIN" estimate "$TMP/bridge" -o "$TMP/bridge1.yaml" --overlap 24 --threads 1 --accept-poor --json \
    >"$TMP/bridge1.json" || fail "estimate bridge (1 process)"
grep -q '"bridge_pairs":[1-9]' "$TMP/bridge1.json" && pass "estimate bridge: diagonal pairs measured" ||
    fail "estimate bridge: no diagonal pair measured ($(cat "$TMP/bridge1.json"))"
for n in 2 3; do
    mpi "$n" estimate "$TMP/bridge" -o "$TMP/bridge$n.yaml" --overlap 24 --threads 1 --accept-poor ||
        fail "estimate bridge under mpirun -n $n exited non-zero"
    same_file "$TMP/bridge1.yaml" "$TMP/bridge$n.yaml" "estimate, diagonal bridges: -n $n shifts file = one process's"
done

# The content test of the tiles without a pair (docs/qc.md, stranded tiles)
# is shared over the ranks, the first rank naming them: on this plate
# (20% blank, seed 4) nine tiles have no pair, one of them with content
# whose overlaps show nothing; every run names it with the same share.
"$BIN" simulate -o "$TMP/content" --grid 7x7 --tile 128x128 --overlap 24 --jitter 6 --blank 0.2 --seed 4 \
    --format 0.4 >/dev/null || fail "simulate content"
"$BIN" estimate "$TMP/content" -o "$TMP/content1.yaml" --overlap 24 --threads 1 --json \
    >"$TMP/content1.json" || fail "estimate content (1 process)"
named() { grep -o '"stranded_tiles":[0-9]*,"first_stranded_tile":"[^"]*","first_stranded_content":[0-9.e-]*' "$1"; }
want=$(named "$TMP/content1.json")
[ -n "$want" ] && [ "${want#*000006}" != "$want" ] && pass "estimate content: A/1/000006 named ($want)" ||
    fail "estimate content: A/1/000006 not named ($(cat "$TMP/content1.json"))"
for n in 2 3; do
    mpi "$n" estimate "$TMP/content" -o "$TMP/content$n.yaml" --overlap 24 --threads 1 --json \
        >"$TMP/content$n.json" || fail "estimate content under mpirun -n $n exited non-zero"
    same_file "$TMP/content1.yaml" "$TMP/content$n.yaml" "estimate, content test: -n $n shifts file = one process's"
    got=$(named "$TMP/content$n.json")
    [ -n "$want" ] && [ "$got" = "$want" ] && pass "estimate content: -n $n names what one process names" ||
        fail "estimate content: -n $n names '$got', one process '$want'"
done

check_failure "estimate, corrupt tile" "003002" "$TMP/bad_est" -- estimate "$TMP/bad" --overlap 16
check_failure "fuse, corrupt tile" "003002" "$TMP/bad_fuse" -- fuse "$TMP/bad" "$d/s1.yaml" "${FUSE_ARGS[@]}"
# Replacing an existing store's images under MPI: every rank writes into the
# temporary directory rank 0 chose, rank 0 swaps it in. A good run gives the
# one process's store; a run failing on the corrupt tile (well B/2, after
# A/1 was replaced by the same image) leaves the store as it was, with no
# temporary directory.
for n in 2 3; do
    cp -r "$d/f1" "$TMP/rep$n"
    mpi "$n" fuse "$d/plate" "$d/s1.yaml" -o "$TMP/rep$n" "${FUSE_ARGS[@]}" --threads 1 ||
        fail "fuse into an existing store under mpirun -n $n"
    same_tree "$d/f1" "$TMP/rep$n" "fuse into an existing store: -n $n store = one process's"
    mpi "$n" fuse "$TMP/bad" "$d/s1.yaml" -o "$TMP/rep$n" "${FUSE_ARGS[@]}" --threads 1 >/dev/null 2>"$TMP/err.txt"
    rc=$?
    if [ $rc = 0 ] || [ $rc = 124 ]; then fail "corrupt tile into an existing store, -n $n: exit $rc"
    elif ! grep -q "left as it was" "$TMP/err.txt"; then
        fail "corrupt tile into an existing store, -n $n: message does not say the image is left:"; cat "$TMP/err.txt"
    fi
    same_tree "$d/f1" "$TMP/rep$n" "corrupt tile into an existing store, -n $n: store as it was"
    left=$(find "$TMP/rep$n" -name '*.tmp.*' | head -3)
    [ -z "$left" ] && pass "corrupt tile into an existing store, -n $n: no temporaries" ||
        fail "corrupt tile into an existing store, -n $n: temporaries left: $left"
done

touch "$TMP/a_file"
check_failure "fuse, unwritable output" "a_file" "$TMP/a_file/out" -- fuse "$d/plate" "$d/s1.yaml" "${FUSE_ARGS[@]}"

# The output lock under MPI: rank 0 takes it for the job, and a live
# holder (here this script's sleep) makes every rank fail, within the timeout.
sleep 120 &
holder=$!
host=$(hostname)
printf 'tessera output lock\nhost: %s\nboot: \npid: %s\nstart: 0\ncommand: fuse\nsince: now\n' "$host" "$holder" \
    >"$TMP/locked.lock"
mpi 3 fuse "$d/plate" "$d/s1.yaml" -o "$TMP/locked" "${FUSE_ARGS[@]}" --threads 1 >/dev/null 2>"$TMP/err.txt"
rc=$?
if [ $rc = 124 ]; then fail "locked output under mpirun -n 3 hung"
elif [ $rc != 1 ] || ! grep -q "pid $holder" "$TMP/err.txt" || [ -e "$TMP/locked" ]; then
    fail "locked output under mpirun -n 3: exit $rc, want 1 naming pid $holder and nothing written:"; cat "$TMP/err.txt"
else pass "locked output under mpirun -n 3: $(head -1 "$TMP/err.txt")"; fi
kill $holder 2>/dev/null; wait $holder 2>/dev/null
rm -f "$TMP/locked.lock"

# --resume under MPI: a one-process run killed mid-way, resumed by 2 ranks
# (each checks and writes its own bands), gives the uninterrupted store.
"$BIN" simulate -o "$TMP/rplate" --grid 12x12 --tile 256x256 --overlap 32 --seed 5 --truth "$TMP/r.yaml" >/dev/null ||
    fail "simulate for resume"
RES_ARGS=(--chunk 64 --shard 2 --codec gzip --levels 1 --format 0.4)
"$BIN" fuse "$TMP/rplate" "$TMP/r.yaml" -o "$TMP/rclean" "${RES_ARGS[@]}" --threads 1 || fail "fuse for resume"
"$BIN" fuse "$TMP/rplate" "$TMP/r.yaml" -o "$TMP/rkilled" "${RES_ARGS[@]}" --threads 1 &
pid=$!
for _ in $(seq 1 4000); do
    n=$(find "$TMP"/rkilled.tmp.*/rkilled/A/1/0/0 -type f 2>/dev/null | wc -l)
    [ "$n" -ge 30 ] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.005
done
if kill -9 $pid 2>/dev/null; then
    wait $pid 2>/dev/null
    mpi 2 fuse "$TMP/rplate" "$TMP/r.yaml" -o "$TMP/rkilled" "${RES_ARGS[@]}" --threads 1 --resume --json \
        >"$TMP/resume.json" || fail "fuse --resume under mpirun -n 2"
    grep -q '"blocks_resumed":[1-9]' "$TMP/resume.json" || fail "fuse --resume under mpirun -n 2 kept nothing: $(cat "$TMP/resume.json")"
    same_tree "$TMP/rclean" "$TMP/rkilled" "fuse --resume under mpirun -n 2 = an uninterrupted run"
else
    fail "the run to resume ended before it could be killed"
fi

if [ $failures != 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all MPI checks passed"
