#!/usr/bin/env bash
# test_get_data.sh — scripts/get_data.sh's search order and messages, run on
# a copy of the script inside a throw-away "repository" so the real shared
# corpus next to this checkout cannot be found by accident. The download
# branch is exercised offline through a file:// URL to a made-up zip.
# Usage: bash test_get_data.sh <build-dir>   (the build dir is not needed)
set -uo pipefail

src=${PROJMT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-get-data-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$src/tests/check.sh"   # ok, fail, finish, run_script

mkdir -p "$tmp/repo/scripts" "$tmp/elsewhere/spa-eng"
cp "$src/scripts/get_data.sh" "$tmp/repo/scripts/"
printf 'Hello.\tHola.\nThanks.\tGracias.\n' > "$tmp/elsewhere/spa-eng/spa.txt"
printf 'no tabs in this file\n' > "$tmp/not-a-corpus.txt"

# get ARGS...: runs the copied script with a clean environment plus any
# VAR=value words given before "--"; sets $out (stdout), $err, $status.
get() { run_script "PROJMT_CORPUS PROJMT_DATA_DIR PROJMT_DATA_URL PROJMT_NO_DOWNLOAD" "$tmp/repo/scripts/get_data.sh" "$@"; }
expect_path() {  # NAME PATH
  if [ $status -eq 0 ] && [ "$(echo "$out" | tail -n 1)" = "$2" ]; then ok
  else fail "$1: status $status, stdout '$out', stderr: $err"; fi
}
# Here-strings, not `echo | grep -q`: under pipefail, grep -q exiting at its
# first match makes the echo still writing later lines die of SIGPIPE, and
# the check fails at random under load (seen under ctest -j2).
expect_error() {  # NAME PATTERN
  if [ $status -ne 0 ] && grep -Eq -- "$2" <<<"$err" && grep -q "to fix" <<<"$err"; then ok
  else fail "$1: status $status, stderr lacks /$2/ or the how-to-fix text: $err"; fi
}

corpus="$tmp/elsewhere/spa-eng/spa.txt"
get -- "$corpus";                                   expect_path "file argument" "$corpus"
get -- "$tmp/elsewhere";                            expect_path "dir argument" "$corpus"
get PROJMT_CORPUS="$corpus" --;                     expect_path "PROJMT_CORPUS" "$corpus"
get PROJMT_DATA_DIR="$tmp/elsewhere" --;            expect_path "PROJMT_DATA_DIR" "$corpus"
get -- "$tmp/not-a-corpus.txt";                     expect_error "file without tabs" "not-a-corpus.txt"
get PROJMT_CORPUS="$tmp/missing.txt" --;            expect_error "missing PROJMT_CORPUS" "missing.txt.*PROJMT_CORPUS"
get PROJMT_DATA_DIR="$tmp/repo" --;                 expect_error "PROJMT_DATA_DIR without corpus" "PROJMT_DATA_DIR"
get -- --no-download;                               expect_error "nothing found, no download" "downloading is disabled"
get PROJMT_NO_DOWNLOAD=1 --;                        expect_error "PROJMT_NO_DOWNLOAD" "downloading is disabled"
get -- --bogus;                                     expect_error "unknown option" "unknown option"

if command -v curl >/dev/null 2>&1; then
  get PROJMT_DATA_URL="file://$tmp/no-such.zip" --; expect_error "failed download" "could not download"
  [ -z "$(ls "$tmp/repo/data/raw" 2>/dev/null | grep part)" ] && ok || fail "partial download left behind"
fi
if command -v curl >/dev/null 2>&1 && command -v zip >/dev/null 2>&1 && command -v unzip >/dev/null 2>&1; then
  (cd "$tmp/elsewhere" && zip -q -r "$tmp/spa-eng.zip" spa-eng)
  get PROJMT_DATA_URL="file://$tmp/spa-eng.zip" --; expect_path "download" "$tmp/repo/data/raw/spa-eng/spa.txt"
  cmp -s "$corpus" "$tmp/repo/data/raw/spa-eng/spa.txt" && ok || fail "downloaded corpus differs"
  get PROJMT_DATA_URL="file://$tmp/no-such.zip" --; expect_path "earlier download reused" "$tmp/repo/data/raw/spa-eng/spa.txt"
  printf 'not a zip' > "$tmp/bad.zip"
  rm -rf "$tmp/repo/data/raw"
  get PROJMT_DATA_URL="file://$tmp/bad.zip" --;     expect_error "not a zip" "not the expected archive"
else
  echo "note: curl/zip/unzip missing, download branch not exercised"
fi

mkdir -p "$tmp/shared/data/spa-eng"
cp "$corpus" "$tmp/shared/data/spa-eng/spa.txt"
get -- --no-download;                               expect_path "shared sibling" "$tmp/shared/data/spa-eng/spa.txt"

finish
