#!/usr/bin/env bash
# The Python package (python/, docs/python.md) end to end, as a user installs
# it: this build's library installed with `cmake --install` into a scratch
# prefix, the package built against it with pip, offline, into a scratch
# target (Debian's /usr/bin/python3, its setuptools and pip), then
# python/tests/test_api.py run with that package and numpy/zarr.
set -euo pipefail
: "${TESSERA_BIN:?}" "${TESSERA_TEST_TMP:?}" "${TESSERA_SOURCE:?}" "${TESSERA_PYTHON:?}"
BUILD=$(cd "$(dirname "$TESSERA_BIN")" && pwd)
if grep -q '^TESSERA_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  # An ASan library loads only into a process started with the ASan
  # runtime; Python is not. The same API is tested in the normal build.
  echo "skip: sanitizer build (the Python extension is tested in the normal build)"; exit 77
fi
WORK=$(mktemp -d "$TESSERA_TEST_TMP/python.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
PC=$(dirname "$(find "$WORK/prefix" -name tessera.pc | head -1)")
# pip builds in a copy of the sources: nothing is written into python/.
cp -r "$TESSERA_SOURCE/python" "$WORK/src"
rm -rf "$WORK/src/build" "$WORK/src"/*.egg-info
PKG_CONFIG_PATH="$PC" "$TESSERA_PYTHON" -m pip install --quiet --no-build-isolation --no-index \
  --disable-pip-version-check --target "$WORK/site" "$WORK/src" 2>&1 | grep -v "Running pip as the 'root' user" || true
[ -f "$WORK/site/tessera/__init__.py" ] || { echo "FAIL: pip did not install the package"; exit 1; }
ls "$WORK"/site/tessera/_tessera*.so >/dev/null || { echo "FAIL: the extension was not built"; exit 1; }
# Found through the run path recorded at build time, not LD_LIBRARY_PATH.
cd "$WORK"
env -u LD_LIBRARY_PATH PYTHONPATH="$WORK/site" TESSERA_TEST_TMP="$WORK" \
  "$TESSERA_PYTHON" "$TESSERA_SOURCE/python/tests/test_api.py"
