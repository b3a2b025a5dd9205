#!/usr/bin/env bash
# test_install.sh — libprojmt as a user gets it: `cmake --install` into a
# temporary prefix holds the program, libprojmt.so.0 (its SONAME, only the
# projmt_* symbols exported), the header, projmt.pc and the CMake package;
# the C example builds with `pkg-config --cflags --libs projmt` and with
# find_package(projmt), and translates; the Python example and the pytest
# suite (python/tests) run on the installed library; the .deb
# (`--target package`) declares its dependencies, holds the program, the
# library, the header, the .pc file and the shipped model with its card, and
# translates from a `dpkg-deb -x` folder.
# SKIPPED in a sanitizer build (python3 cannot load an ASan-built library
# without LD_PRELOAD; test_api covers the API under ASan) and without the
# shipped model.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=$(cd "${1:?usage: test_install.sh BUILD_DIR}" && pwd)
src=$(cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" && pwd)
model=$src/models/en-es.int8.pmt
[ -e "$model" ] || { echo "SKIPPED: no shipped model ($model)"; exit 77; }
if grep -q "^PROJMT_SANITIZE:BOOL=ON" "$build/CMakeCache.txt"; then
  echo "SKIPPED: sanitizer build (test_api covers the C API under ASan; the plain build runs this test)"
  exit 77
fi
for tool in pkg-config cc dpkg-deb; do
  command -v "$tool" > /dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
sentence="Where is the station?"
want="¿Dónde está la estación?"

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1
check "cmake --install exits 0" test $? -eq 0
libdir=$(dirname "$(find "$prefix" -name libprojmt.so.0 | head -n 1)")
check "installed: the program" test -x "$prefix/bin/projmt"
check "installed: libprojmt.so.0" test -e "$libdir/libprojmt.so.0"
check "installed: the header" test -e "$prefix/include/projmt.h"
check "installed: projmt.pc" test -e "$libdir/pkgconfig/projmt.pc"
check "installed: the CMake package" test -e "$libdir/cmake/projmt/projmtConfig.cmake"
check "installed: the shipped model and its card" test -e "$prefix/share/projmt/models/en-es.int8.pmt" -a \
    -e "$prefix/share/projmt/models/README.md"
soname=$(objdump -p "$libdir/libprojmt.so.0" | awk '/SONAME/ {print $2}')
check "SONAME libprojmt.so.0 ($soname)" test "$soname" = libprojmt.so.0
exported=$(nm -D --defined-only "$libdir/libprojmt.so.0" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort -u)
check "exports only projmt_* ($(grep -vc '^projmt_' <<< "$exported") others)" test -z "$(grep -v '^projmt_' <<< "$exported")"
check "exports the API" grep -q "^projmt_translate_batch$" <<< "$exported"

# The C example through pkg-config, as the README shows.
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs projmt)
check "pkg-config knows projmt ($flags)" test -n "$flags"
# shellcheck disable=SC2086
cc "$src/examples/translate.c" $flags -o "$tmp/translate-c" 2> "$tmp/cc.log"
check "the C example builds with pkg-config" test $? -eq 0
LD_LIBRARY_PATH=$libdir "$tmp/translate-c" "$model" "$sentence" > "$tmp/c.out" 2> "$tmp/c.err"
check "the C example translates" test "$(cut -f1 "$tmp/c.out")" = "$want"
LD_LIBRARY_PATH=$libdir "$tmp/translate-c" "$tmp/none.pmt" "$sentence" > /dev/null 2> "$tmp/c-missing.err"
status=$?
check "the C example reports a missing model (status $status)" test "$status" -eq 1
check "... naming it" grep -q "none.pmt" "$tmp/c-missing.err"

# The same example through find_package(projmt).
cmake -S "$src/examples" -B "$tmp/cmake-example" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cmake.log" 2>&1 &&
  cmake --build "$tmp/cmake-example" > "$tmp/cmake-build.log" 2>&1
check "the C example builds with find_package(projmt)" test $? -eq 0
LD_LIBRARY_PATH=$libdir "$tmp/cmake-example/translate" "$model" "$sentence" > "$tmp/cm.out" 2> /dev/null
check "... and translates" test "$(cut -f1 "$tmp/cm.out")" = "$want"

# Python: the installed package over the installed library, with Debian's
# python3 (python3-pytest), whatever python3 comes first in PATH.
py=/usr/bin/python3
[ -x "$py" ] || py=python3
pydir=$prefix/lib/python3/dist-packages
PYTHONPATH=$pydir PROJMT_LIBRARY=$libdir/libprojmt.so.0 "$py" "$src/examples/translate.py" "$model" "$sentence" \
    > "$tmp/py.out" 2> "$tmp/py.err"
check "the Python example translates ($(head -c 200 "$tmp/py.err"))" test "$(cat "$tmp/py.out")" = "$want"
if "$py" -c "import pytest" 2> /dev/null; then
  PYTHONPATH=$pydir PROJMT_LIBRARY=$libdir/libprojmt.so.0 "$py" -m pytest -q -p no:cacheprovider \
      "$src/python/tests" > "$tmp/pytest.log" 2>&1
  rc=$?
  check "pytest python/tests passes ($(tail -n 1 "$tmp/pytest.log"))" test "$rc" -eq 0
else
  fail "pytest is not installed (scripts/setup.sh --all installs python3-pytest)"
fi

# The Debian package.
cmake --build "$build" --target package > "$tmp/package.log" 2>&1
check "the package target builds" test $? -eq 0
deb=$(ls "$build"/projmt_*_amd64.deb 2> /dev/null | head -n 1)
check "projmt_<version>_amd64.deb exists" test -n "$deb"
if [ -n "$deb" ]; then
  depends=$(dpkg-deb -f "$deb" Depends)
  for lib in libdnnl2 libopenblas0 libsentencepiece0 libinih1 libmicrohttpd12 libjansson4 libedit2 zlib1g; do
    check "the .deb depends on $lib" grep -q "$lib" <<< "$depends"
  done
  dpkg-deb -x "$deb" "$tmp/deb"
  for f in usr/bin/projmt usr/include/projmt.h usr/share/projmt/models/en-es.int8.pmt usr/share/projmt/models/README.md; do
    check "the .deb holds /$f" test -e "$tmp/deb/$f"
  done
  deblib=$(dirname "$(find "$tmp/deb" -name libprojmt.so.0 | head -n 1)")
  check "the .deb holds libprojmt.so.0 and projmt.pc" test -e "$deblib/libprojmt.so.0" -a -e "$deblib/pkgconfig/projmt.pc"
  echo "$sentence" | LD_LIBRARY_PATH=$deblib "$tmp/deb/usr/bin/projmt" translate \
      --model "$tmp/deb/usr/share/projmt/models/en-es.int8.pmt" > "$tmp/deb.out" 2> /dev/null
  check "the packaged program translates with the packaged model" test "$(cat "$tmp/deb.out")" = "$want"
fi
finish
