#!/usr/bin/env bash
# test_install.sh — libprojmt as a user gets it: `cmake --install` into a
# temporary prefix holds the program, libprojmt.so.0 (its SONAME, only the
# projmt_* symbols exported), the header, projmt.pc and the CMake package;
# the C example builds with `pkg-config --cflags --libs projmt` and with
# find_package(projmt), and translates; the Python example and the pytest
# suite (python/tests) run on the installed library; `pip install python/`
# works offline and translates; the .deb
# (`--target package`) declares its dependencies, holds the program, the
# library, the header, the .pc file and the shipped model with its card, and
# translates from a `dpkg-deb -x` folder. Then the portable .deb
# (-DPROJMT_PORTABLE=ON): its engine at three instruction-set levels, the
# loader's choice of them on this CPU, the base one forced, each translating.
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

# The binding as a pip package (python/pyproject.toml), from a copy of
# python/ (pip builds in the folder it is given), offline, with Debian's
# setuptools: it installs, imports, translates, and carries the C library's
# version.
if "$py" -c "import setuptools" 2> /dev/null && "$py" -m pip --version > /dev/null 2>&1; then
  cp -r "$src/python" "$tmp/python-src"
  rm -rf "$tmp/python-src/tests"
  "$py" -m pip install --quiet --no-index --no-build-isolation --no-deps --target "$tmp/pip" "$tmp/python-src" \
      > "$tmp/pip.log" 2>&1
  status=$?
  check "pip installs python/ ($(tail -n 1 "$tmp/pip.log"))" test "$status" -eq 0
  check "... the package and its metadata" test -e "$tmp/pip/projmt/__init__.py" -a -n "$(ls -d "$tmp"/pip/projmt-*.dist-info 2> /dev/null)"
  PYTHONPATH=$tmp/pip PROJMT_LIBRARY=$libdir/libprojmt.so.0 "$py" "$src/examples/translate.py" "$model" "$sentence" \
      > "$tmp/pip.out" 2> "$tmp/pip.err"
  check "the pip-installed package translates ($(head -c 200 "$tmp/pip.err"))" test "$(cat "$tmp/pip.out")" = "$want"
  pip_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$src/python/pyproject.toml")
  lib_version=$(PYTHONPATH=$tmp/pip PROJMT_LIBRARY=$libdir/libprojmt.so.0 "$py" -c "import projmt; print(projmt.version())")
  check "pyproject.toml's version $pip_version is the library's ($lib_version)" test "$pip_version" = "$lib_version"
else
  fail "pip or setuptools is not installed for $py (scripts/setup.sh --all installs python3-pip, python3-setuptools)"
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

# The portable package (-DPROJMT_PORTABLE=ON): one .deb for every x86-64
# CPU. Its engine is built for x86-64-v2 and again for v3 and v4 in
# glibc-hwcaps/ folders, and the loader picks the highest level this CPU
# runs; `ld.so --glibc-hwcaps-mask x86-64-v2` makes it take the base, so
# this one machine runs the code an older CPU would.
ldso=/lib64/ld-linux-x86-64.so.2
if [ "$(uname -m)" != x86_64 ] || [ ! -x "$ldso" ] || ! "$ldso" --help 2> /dev/null | grep -q '^  x86-64-v2 (supported'; then
  echo "NOTE: portable package not checked (needs x86-64 with glibc-hwcaps, glibc 2.33 or later)"
  finish
fi
pbuild=$tmp/portable-build
cmake -S "$src" -B "$pbuild" -DCMAKE_BUILD_TYPE=Release -DPROJMT_PORTABLE=ON -DBUILD_TESTING=OFF \
    > "$tmp/portable-cmake.log" 2>&1 &&
  cmake --build "$pbuild" -j"$(nproc 2> /dev/null || echo 2)" --target package > "$tmp/portable-build.log" 2>&1
status=$?
check "the portable package builds ($(tail -n 1 "$tmp/portable-build.log"))" test "$status" -eq 0
pdeb=$(ls "$pbuild"/projmt_*_amd64.deb 2> /dev/null | head -n 1)
check "the portable projmt_<version>_amd64.deb exists" test -n "$pdeb"
[ -n "$pdeb" ] || finish
dpkg-deb -x "$pdeb" "$tmp/pdeb"
pbin=$tmp/pdeb/usr/bin/projmt
plib=$(dirname "$(find "$tmp/pdeb" -name libprojmt.so.0 | head -n 1)")
engine=libprojmt-engine.so.$(sed -n 's/^project(projmt VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
for f in "$engine" "glibc-hwcaps/x86-64-v3/$engine" "glibc-hwcaps/x86-64-v4/$engine"; do
  check "the portable .deb holds projmt/$f" test -e "$plib/projmt/$f"
done
# What each file's code uses: projmt's own code in the program, the library
# and the base engine is SSE-only; the only wider vector instructions of the
# base are gemm.c's bf16 converters and ops_attention.c's bf16 products
# (*_native), compiled with a target attribute and called only on a CPU
# with avx512_bf16.
vector_functions() {
  objdump -d --no-show-raw-insn "$1" | awk -v reg="$2" '/^[0-9a-f]+ <.*>:$/ {fn = $2} $0 ~ reg {print fn}' | sort -u
}
check "the portable program uses no AVX registers" test -z "$(vector_functions "$pbin" '%[yz]mm')"
check "the portable libprojmt.so uses no AVX registers" test -z "$(vector_functions "$plib/libprojmt.so.0" '%[yz]mm')"
others=$(vector_functions "$plib/projmt/$engine" '%[yz]mm' | grep -v '_native')
check "the x86-64-v2 engine uses AVX registers only in the bf16 converters and products (others: $(head -n 4 <<< "$others" | tr '\n' ' '))" \
    test -z "$others"
check "the x86-64-v3 engine has AVX code" test -n "$(vector_functions "$plib/projmt/glibc-hwcaps/x86-64-v3/$engine" '%ymm')"
check "the x86-64-v4 engine has AVX-512 code beyond the converters" \
    test -n "$(vector_functions "$plib/projmt/glibc-hwcaps/x86-64-v4/$engine" '%zmm' | grep -v '_native')"

# Which engine the loader takes: the highest level ld.so calls supported.
best=x86-64-v2
for level in x86-64-v3 x86-64-v4; do
  "$ldso" --help | grep -q "^  $level (supported" && best=$level
done
"$pbin" --version > "$tmp/pver.out" 2>&1
check "the portable program runs the $best engine on this CPU ($(grep 'built for' "$tmp/pver.out"))" \
    grep -q "^built for: -march=$best " "$tmp/pver.out"
"$ldso" --glibc-hwcaps-mask x86-64-v2 "$pbin" --version > "$tmp/pver2.out" 2>&1
check "masked to x86-64-v2, it runs the base engine" grep -q "^built for: -march=x86-64-v2 " "$tmp/pver2.out"
pmodel=$tmp/pdeb/usr/share/projmt/models/en-es.int8.pmt
for mask in "" x86-64-v2; do
  if [ -n "$mask" ]; then run=("$ldso" --glibc-hwcaps-mask "$mask" "$pbin"); else run=("$pbin"); fi
  echo "$sentence" | "${run[@]}" translate --model "$pmodel" > "$tmp/pdeb.out" 2> "$tmp/pdeb.err"
  check "the portable program translates${mask:+ on its $mask engine} ($(head -c 200 "$tmp/pdeb.err"))" \
      test "$(cat "$tmp/pdeb.out")" = "$want"
done
# The library's users get the same choice: the Python package over the
# packaged libprojmt, which finds its engine through RUNPATH.
PYTHONPATH=$tmp/pdeb/usr/lib/python3/dist-packages PROJMT_LIBRARY=$plib/libprojmt.so.0 \
    "$py" "$src/examples/translate.py" "$pmodel" "$sentence" > "$tmp/ppy.out" 2> "$tmp/ppy.err"
check "the Python example translates with the portable library ($(head -c 200 "$tmp/ppy.err"))" \
    test "$(cat "$tmp/ppy.out")" = "$want"
# An engine too new for the CPU, forced on the loader, is refused with a
# message, not an illegal instruction.
if [ "$best" != x86-64-v4 ]; then
  "$ldso" --glibc-hwcaps-prepend x86-64-v4 "$pbin" --version > /dev/null 2> "$tmp/pforce.err"
  status=$?
  check "a forced x86-64-v4 engine on this CPU exits 1 (status $status)" test "$status" -eq 1
  check "... naming what the CPU lacks ($(head -c 160 "$tmp/pforce.err"))" grep -q "lacks avx512f" "$tmp/pforce.err"
fi
finish
