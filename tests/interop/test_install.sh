#!/usr/bin/env bash
# SPEC section 5: the library installs with `cmake --install` and a
# pkg-config file. Installs this build into a scratch prefix, then builds a
# small program against the installed header and library with nothing but
# `pkg-config --static --cflags --libs tessera` (as a user's pipeline would)
# and runs it: it simulates a 2x2 plate through the public API and reads
# the plate summary back (ts_info_json), and checks the installed CLI runs.
set -euo pipefail
: "${TESSERA_BIN:?}" "${TESSERA_TEST_TMP:?}"
BUILD=$(cd "$(dirname "$TESSERA_BIN")" && pwd)
WORK=$(mktemp -d "$TESSERA_TEST_TMP/install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
PC=$(find "$WORK/prefix" -name tessera.pc | head -1)
[ -n "$PC" ] || { echo "FAIL: no tessera.pc installed"; exit 1; }
[ -f "$WORK/prefix/include/tessera/tessera.h" ] || { echo "FAIL: no tessera.h installed"; exit 1; }
export PKG_CONFIG_PATH="$(dirname "$PC")"
cat > "$WORK/user.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tessera/tessera.h>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    ts_simulate_options so;
    ts_simulate_options_init(&so);
    so.output = argv[1];
    so.grid_cols = 2;
    so.grid_rows = 2;
    so.tile_h = so.tile_w = 64;
    so.overlap = 8;
    ts_error err;
    if (ts_simulate(&so, &err) != TS_OK) { fprintf(stderr, "simulate: %s\n", err.message); return 1; }
    char *json = NULL;
    if (ts_info_json(argv[1], &json, &err) != TS_OK) { fprintf(stderr, "info: %s\n", err.message); return 1; }
    int ok = strstr(json, "\"A/1\"") != NULL;
    printf("%s\n", json);
    free(json);
    return ok ? 0 : 1;
}
C
# A sanitizer build's library needs the sanitizer runtimes in the program too.
SAN=""
grep -q '^TESSERA_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" && SAN="-fsanitize=address,undefined"
LIBDIR=$(pkg-config --variable=libdir tessera)
# Linked against the shared library (what -ltessera finds first), run as a
# user of a non-system prefix runs it; then against the static one.
# shellcheck disable=SC2046
cc -std=c17 -Wall -Wextra -Werror $SAN -o "$WORK/user" "$WORK/user.c" $(pkg-config --cflags --libs tessera)
LD_LIBRARY_PATH="$LIBDIR" "$WORK/user" "$WORK/plate.zarr" > "$WORK/info.json" ||
  { echo "FAIL: the program linked with the installed libtessera.so failed"; cat "$WORK/info.json"; exit 1; }
# (ldd's output to a file: `ldd | grep -q` under pipefail fails when grep
# exits before ldd has written everything)
ldd "$WORK/user" > "$WORK/ldd.txt"
grep -q "libtessera.so" "$WORK/ldd.txt" || { echo "FAIL: -ltessera did not link the shared library"; exit 1; }
rm -rf "$WORK/plate.zarr"
# shellcheck disable=SC2046
cc -std=c17 -Wall -Wextra -Werror $SAN -o "$WORK/user" "$WORK/user.c" \
  $(pkg-config --static --cflags --libs tessera | sed 's/-ltessera/-l:libtessera.a/')
"$WORK/user" "$WORK/plate.zarr" > "$WORK/info.json" || { echo "FAIL: the program built from the installed library failed"; cat "$WORK/info.json"; exit 1; }
ldd "$WORK/user" > "$WORK/ldd.txt"
if grep -q "libtessera.so" "$WORK/ldd.txt"; then echo "FAIL: -l:libtessera.a linked the shared library"; exit 1; fi
"$WORK/prefix/bin/tessera" info "$WORK/plate.zarr" > "$WORK/info.txt"
grep -q "A/1" "$WORK/info.txt" || { echo "FAIL: installed tessera info does not list A/1"; exit 1; }
echo "ok    installed header, shared and static library and pkg-config file build working programs; installed CLI runs"
