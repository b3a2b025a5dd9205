#!/usr/bin/env bash
# get_data.sh — finds the English–Spanish corpus (spa.txt, English<TAB>Spanish
# lines from Tatoeba via manythings.org/anki) and prints its path as the last
# line on stdout, for `projmt prepare --corpus "$(bash scripts/get_data.sh)"`.
#
# Why a search order: the corpus is usually already on the machine (a shared
# copy next to the repository, or a previous download), and downloading is
# the last resort. Explicit choices ($1, PROJMT_CORPUS, PROJMT_DATA_DIR) that
# do not hold the file are errors, never silently replaced by another copy.
#
#   bash scripts/get_data.sh [--no-download] [FILE | DIR]
# Looks in order at:
#   1. FILE, or DIR/spa-eng/spa.txt or DIR/spa.txt, when given;
#   2. $PROJMT_CORPUS (the file);
#   3. $PROJMT_DATA_DIR/spa-eng/spa.txt;
#   4. ../shared/data/spa-eng/spa.txt relative to the repository root;
#   5. data/raw/spa-eng/spa.txt (an earlier download);
#   6. downloads $PROJMT_DATA_URL (default: the TensorFlow-hosted spa-eng.zip)
#      into data/raw/ with curl or wget and unzips it — unless --no-download
#      or PROJMT_NO_DOWNLOAD=1.
# Exit status: 0 with the path printed; 1 when no corpus could be found.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
default_url="http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip"
url=${PROJMT_DATA_URL:-$default_url}
raw_dir="$repo_root/data/raw"
allow_download=1
[ "${PROJMT_NO_DOWNLOAD:-0}" = "1" ] && allow_download=0

say() { echo "get_data: $*" >&2; }

fail() {
  say "error: $*"
  cat >&2 <<EOF
get_data: to fix, do one of:
  - pass the file:           bash scripts/get_data.sh /path/to/spa.txt
  - set PROJMT_CORPUS=/path/to/spa.txt, or PROJMT_DATA_DIR=DIR holding spa-eng/spa.txt
  - download $default_url
    on a machine with internet, unzip it, and copy spa-eng/spa.txt to $raw_dir/spa-eng/spa.txt
EOF
  exit 1
}

# A usable corpus: a readable, non-empty file whose first line has a tab.
# (No `head | grep -q` pipe: under pipefail grep's early exit can fail it.)
looks_like_corpus() {
  local first=""
  [ -f "$1" ] && [ -r "$1" ] && [ -s "$1" ] || return 1
  IFS= read -r first < "$1" || [ -n "$first" ]
  [[ $first == *$'\t'* ]]
}

choose() {
  looks_like_corpus "$1" || fail "'$1' (from $2) is not a readable English<TAB>Spanish text file"
  say "using $1 (from $2)"
  echo "$1"
  exit 0
}

# Downloads the zip to data/raw/ and extracts spa-eng/spa.txt there; the
# archive is fetched under a .part name so an interrupted download is never
# mistaken for a complete one.
download() {
  mkdir -p "$raw_dir" || fail "cannot create $raw_dir"
  local zip="$raw_dir/spa-eng.zip" part="$raw_dir/spa-eng.zip.part"
  say "no local corpus found; downloading $url"
  rm -f "$part"
  if command -v curl >/dev/null 2>&1; then
    curl -fL --retry 2 --connect-timeout 20 -o "$part" "$url" || { rm -f "$part"; fail "curl could not download $url (no internet?)"; }
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 20 -t 2 -O "$part" "$url" || { rm -f "$part"; fail "wget could not download $url (no internet?)"; }
  else
    fail "neither curl nor wget is installed, so $url cannot be downloaded"
  fi
  mv "$part" "$zip"
  command -v unzip >/dev/null 2>&1 || fail "unzip is not installed (apt-get install unzip); the archive is at $zip"
  local tmp
  tmp=$(mktemp -d "$raw_dir/unzip.XXXXXX")
  if ! unzip -q -o "$zip" -d "$tmp" >&2 || [ ! -f "$tmp/spa-eng/spa.txt" ]; then
    rm -rf "$tmp"
    fail "$zip is not the expected archive (no spa-eng/spa.txt inside); delete it and retry"
  fi
  mkdir -p "$raw_dir/spa-eng"
  mv "$tmp/spa-eng/"* "$raw_dir/spa-eng/"
  rm -rf "$tmp"
}

arg=""
for a in "$@"; do
  case "$a" in
    --no-download) allow_download=0 ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) fail "unknown option '$a' (see --help)" ;;
    *) [ -z "$arg" ] || fail "give at most one FILE or DIR"; arg=$a ;;
  esac
done

if [ -n "$arg" ]; then
  if [ -d "$arg" ]; then
    for c in "$arg/spa-eng/spa.txt" "$arg/spa.txt"; do
      [ -e "$c" ] && choose "$c" "argument $arg"
    done
    fail "directory '$arg' holds neither spa-eng/spa.txt nor spa.txt"
  fi
  choose "$arg" "argument"
fi
[ -n "${PROJMT_CORPUS:-}" ] && choose "$PROJMT_CORPUS" "PROJMT_CORPUS"
[ -n "${PROJMT_DATA_DIR:-}" ] && choose "$PROJMT_DATA_DIR/spa-eng/spa.txt" "PROJMT_DATA_DIR"

shared="$repo_root/../shared/data/spa-eng/spa.txt"
if looks_like_corpus "$shared"; then choose "$(cd "$(dirname "$shared")" && pwd)/spa.txt" "shared data next to the repository"; fi
if looks_like_corpus "$raw_dir/spa-eng/spa.txt"; then choose "$raw_dir/spa-eng/spa.txt" "earlier download"; fi

[ "$allow_download" = "1" ] || fail "no corpus found locally and downloading is disabled (--no-download / PROJMT_NO_DOWNLOAD=1)"
download
choose "$raw_dir/spa-eng/spa.txt" "download of $url"
