#!/usr/bin/env bash
# test_api_quiet.sh — the C API never prints, exits or aborts (include/projmt.h
# promises it): libprojmt.so is linked with --gc-sections over code compiled
# one section per function (CMakeLists.txt), so it holds only what its
# exported functions reach, and what it imports from libc is what they can
# call. Fails naming every output, exit or abort function it imports.
# (Shared libraries it loads — oneDNN, OpenBLAS, SentencePiece — print only
# when asked: ONEDNN_VERBOSE, SentencePiece's training, which the API never
# runs.)
#   bash tests/test_api_quiet.sh BUILD_DIR
set -u
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
source tests/check.sh
build=${1:?usage: test_api_quiet.sh BUILD_DIR}
lib="$build/libprojmt.so.0"
[ -e "$lib" ] || { echo "FAIL: no $lib (build it first)"; exit 1; }
command -v nm > /dev/null || { echo "FAIL: nm (binutils) is not installed"; exit 1; }
imports=$(nm -D --undefined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
check "libprojmt imports libc at all (nm read it)" grep -qx malloc <<<"$imports"
forbidden='printf|fprintf|vprintf|vfprintf|dprintf|vdprintf|puts|fputs|fputc|putc|putchar|fwrite|perror|psignal|'
forbidden+='__printf_chk|__fprintf_chk|__vfprintf_chk|__vprintf_chk|__dprintf_chk|syslog|vsyslog|err|errx|warn|warnx|'
forbidden+='abort|exit|_exit|_Exit|quick_exit'
# assert() is for programmer errors (ARCHITECTURE.md) and compiled out in
# Release (-DNDEBUG), the build users and packages get: there it is
# forbidden too. RelWithDebInfo and Debug builds (the sanitizer passes) keep
# their asserts on purpose, so there, and only there, they may import it.
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2> /dev/null)
case "$build_type" in
  Release|MinSizeRel) forbidden+='|__assert_fail|__assert_perror_fail' ;;
  *) echo "note: a ${build_type:-unknown-type} build keeps assert(): __assert_fail allowed, all else checked" ;;
esac
found=$(grep -xE "$forbidden" <<<"$imports" | sort -u | tr '\n' ' ')
check "libprojmt calls no output, exit or abort function (found: ${found:-none})" test -z "$found"
finish
