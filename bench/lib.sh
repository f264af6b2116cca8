# Shared prologue of the bench scripts, sourced after a script has set BUILD
# from its first argument. Sets SRC, BUILD (absolute), PY (Debian's python
# with numpy/zarr/scipy/skimage), WORK (a scratch directory removed at exit)
# and T (the tessera binary), and builds tessera and the C bench drivers
# (bench/*.c -> $BUILD/bench/<name>, see bench/CMakeLists.txt).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$SRC/$BUILD" ;; esac
PY=${TESSERA_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
T="$BUILD/tessera"
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target tessera_cli bench_drivers -j2 >/dev/null
