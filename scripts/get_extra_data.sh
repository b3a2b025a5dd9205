#!/usr/bin/env bash
# get_extra_data.sh — finds the extra English–Spanish corpora (issue 44) and
# prints the directory holding them as the last line on stdout, for
#   x=$(bash scripts/get_extra_data.sh)
#   ./build/projmt prepare --corpus spa.txt --source $x/lohelp.en-es.tsv.gz \
#       --source $x/bible.en-es.tsv.gz:en=2,es=3 --source $x/pydocs.en-es.tsv.gz
# or rebuilds them on a fresh machine: the Debian ones from `apt-get download`
# (the only network used; no root needed), pydocs from a path the user gives.
#
# The three files, gzip'd TSV, one pair a line:
#   lohelp.en-es.tsv.gz  English, Spanish      LibreOffice help (MPL-2.0), Debian
#                        libreoffice-help-en-us + libreoffice-help-es: HTML
#                        paragraphs joined on their shared par_id
#   bible.en-es.tsv.gz   reference, English, Spanish   World English Bible / Reina-Valera
#                        1909 (public domain), Debian sword-text-web + sword-text-sparv
#                        exported with mod2imp (libsword-utils), joined on the verse
#   pydocs.en-es.tsv.gz  English, Spanish      Python docs translation (CC0) from the
#                        .po files of a python-docs-es checkout (--pydocs-po DIR)
# The converters are scripts/extra_corpora.py (Python 3 standard library; polib
# when it can be had).
#
# Why a search order: the files are usually already on the machine (a shared
# copy next to the repository, or an earlier rebuild); rebuilding is the last
# resort. Explicit choices (DIR, PROJMT_EXTRA_DIR, PROJMT_DATA_DIR) that do not
# hold the files are errors, never silently replaced by another copy.
#
#   bash scripts/get_extra_data.sh [--rebuild | --no-rebuild] [--pydocs-po DIR] [DIR]
# Looks in order for a directory holding lohelp and bible (pydocs too, or a
# warning that it is missing):
#   1. DIR, when given;
#   2. $PROJMT_EXTRA_DIR;
#   3. $PROJMT_DATA_DIR/extra-en-es;
#   4. ../shared/data/extra-en-es relative to the repository root;
#   5. data/raw/extra-en-es (an earlier rebuild);
#   6. else rebuilds into data/raw/extra-en-es — unless --no-rebuild or
#      PROJMT_NO_DOWNLOAD=1.
# --rebuild           rebuild lohelp and bible into data/raw/extra-en-es even when
#                     found (pydocs too with --pydocs-po; an earlier pydocs stays)
# --pydocs-po DIR     build pydocs from DIR (a checkout of
#                     https://github.com/python/python-docs-es, or any tree of its
#                     .po files) into data/raw/extra-en-es; lohelp and bible are
#                     rebuilt there too when that directory lacks them
# --no-rebuild        never run apt-get (also PROJMT_NO_DOWNLOAD=1)
# Rebuilding needs apt-get and dpkg-deb (Debian), python3, and mod2imp
# (`sudo apt-get install libsword-utils`, or `bash scripts/setup.sh --extra-data`);
# PROJMT_MOD2IMP names another mod2imp. It takes about 30 s and 12 MB of
# downloads; data/raw/extra-en-es/BUILD-INFO.txt records what it used.
# Exit status: 0 with the directory printed (pydocs may be missing: warned);
# 1 nothing usable found, or an explicit location lacks the files;
# 2 bad usage; 3 the rebuild failed (missing tool, apt-get, converter).
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
converter="$repo_root/scripts/extra_corpora.py"
raw_dir="$repo_root/data/raw/extra-en-es"
mod2imp=${PROJMT_MOD2IMP:-mod2imp}
pydocs_help="https://github.com/python/python-docs-es"

say() { echo "get_extra_data: $*" >&2; }

# fail STATUS MESSAGE: the message, how to fix it, and the exit.
fail() {
  local status=$1
  shift
  say "error: $*"
  cat >&2 <<EOF
get_extra_data: to fix, do one of:
  - pass the directory holding the files:   bash scripts/get_extra_data.sh /path/to/extra-en-es
  - set PROJMT_EXTRA_DIR=DIR, or PROJMT_DATA_DIR=DIR holding extra-en-es/
  - rebuild from Debian packages (apt-get download; mod2imp from libsword-utils):
      bash scripts/get_extra_data.sh --rebuild [--pydocs-po /path/to/python-docs-es]
EOF
  exit "$status"
}
usage_error() { say "error: $*"; say "see: bash scripts/get_extra_data.sh --help"; exit 2; }

# is_tsv_gz FILE MIN_TABS: a readable gzip file whose first line has at least
# MIN_TABS tabs. (A process substitution, not `zcat | head`: under pipefail an
# early-exiting reader can fail the pipe.)
is_tsv_gz() {
  local first="" magic="" tabs
  [ -f "$1" ] && [ -r "$1" ] && [ -s "$1" ] || return 1
  magic=$(od -An -tx1 -N2 "$1" | tr -d ' \n')
  [ "$magic" = "1f8b" ] || return 1
  IFS= read -r first < <(gzip -cd "$1" 2>/dev/null) || [ -n "$first" ] || return 1
  tabs=${first//[^$'\t']/}
  [ ${#tabs} -ge "$2" ]
}

# check_dir DIR: sets $lacking to the required files DIR does not hold (lohelp,
# bible) and $has_pydocs to 1 or 0.
check_dir() {
  lacking=""
  is_tsv_gz "$1/lohelp.en-es.tsv.gz" 1 || lacking+=" lohelp.en-es.tsv.gz"
  is_tsv_gz "$1/bible.en-es.tsv.gz" 2 || lacking+=" bible.en-es.tsv.gz"
  has_pydocs=0
  if is_tsv_gz "$1/pydocs.en-es.tsv.gz" 1; then has_pydocs=1; fi
}

warn_pydocs() {
  say "note: $1 has no pydocs.en-es.tsv.gz (it cannot come from Debian); to build it:"
  say "  git clone $pydocs_help  (on a machine with GitHub access), copy it here, then"
  say "  bash scripts/get_extra_data.sh --pydocs-po /path/to/python-docs-es"
}

# choose DIR WHERE: prints DIR and exits 0 (warning when pydocs is missing).
choose() {
  local dir
  dir=$(cd "$1" && pwd)
  say "using $dir (from $2)"
  [ "$has_pydocs" = 1 ] || warn_pydocs "$dir"
  echo "$dir"
  exit 0
}

# explicit DIR WHERE: a location the user named must hold the files.
explicit() {
  [ -d "$1" ] || fail 1 "'$1' (from $2) is not a directory"
  check_dir "$1"
  [ -z "$lacking" ] || fail 1 "'$1' (from $2) lacks (or holds unreadable / non-TSV):$lacking"
  choose "$1" "$2"
}

# ---------------------------------------------------------------- rebuild

need_tool() {  # NAME HOW-TO-GET
  command -v "$1" >/dev/null 2>&1 || fail 3 "'$1' is not installed, so the corpora cannot be rebuilt; $2"
}

# apt_download DEST PKG...: .deb files of PKGs into DEST (no root needed).
apt_download() {
  local dest=$1 opts=()
  shift
  mkdir -p "$dest"
  # As root, apt's download sandbox user (_apt) cannot write into a private
  # temp dir; it would fall back with a warning, so say so up front.
  [ "$(id -u)" -ne 0 ] || opts=(-o APT::Sandbox::User=root)
  if ! (cd "$dest" && apt-get "${opts[@]}" download "$@") > "$work/apt.log" 2>&1; then
    tail -n 15 "$work/apt.log" >&2
    fail 3 "apt-get download $* failed (log above). The package lists may be missing or stale:" \
      "run 'sudo apt-get update'; the apt sources must include Debian bookworm main"
  fi
}

# unpack DEB DIR; echoes "package version" for BUILD-INFO.txt.
unpack() {
  dpkg-deb -x "$1" "$2" || fail 3 "dpkg-deb could not unpack $1"
  dpkg-deb -f "$1" Package Version | tr '\n' ' '
  echo
}

# convert WHAT ARGS...: runs the converter, its summary to stderr and BUILD-INFO.
convert() {
  if ! python3 "$converter" "$@" 2> "$work/convert.log"; then
    cat "$work/convert.log" >&2
    fail 3 "the $1 converter failed (scripts/extra_corpora.py $*)"
  fi
  # (named by where the files end up, not by the work directory)
  sed "s|$work/out|$raw_dir|g" "$work/convert.log" | tee -a "$work/info" >&2
}

rebuild_lohelp() {
  say "lohelp: apt-get download libreoffice-help-en-us libreoffice-help-es"
  apt_download "$work/debs/lo" libreoffice-help-en-us libreoffice-help-es
  local deb
  for deb in "$work/debs/lo/"*.deb; do unpack "$deb" "$work/lo" >> "$work/info"; done
  local help="$work/lo/usr/share/libreoffice/help"
  { [ -d "$help/en-US" ] && [ -d "$help/es" ]; } ||
    fail 3 "the LibreOffice help packages hold no $help/en-US and $help/es (a layout this script does not know)"
  convert lohelp "$help/en-US" "$help/es" "$work/out/lohelp.en-es.tsv.gz"
}

# export_sword PKG DIR OUT: unpacks PKG's .deb into DIR and exports its one
# module (named in mods.d/*.conf) with mod2imp into OUT.
export_sword() {
  local deb conf module
  deb=$(ls "$work/debs/sword/$1"_*.deb 2>/dev/null) || fail 3 "apt-get download left no $1 .deb"
  unpack "$deb" "$2" >> "$work/info"
  local lib="$2/usr/share/sword"
  conf=$(ls "$lib/mods.d/"*.conf 2>/dev/null) || fail 3 "$1 holds no $lib/mods.d/*.conf"
  module=$(sed -n 's/^\[\(.*\)\][[:space:]]*$/\1/p' "$conf")
  module=${module%%$'\n'*}
  [ -n "$module" ] || fail 3 "no [module] line in $conf"
  # SWORD reads ./mods.d, then $SWORD_PATH, before ~/.sword or /etc/sword.conf;
  # HOME is pointed away so a user's own modules cannot answer instead.
  if ! (cd "$lib" && SWORD_PATH="$lib" HOME="$work" "$mod2imp" "$module") > "$3" 2> "$work/mod2imp.log" ||
     [ ! -s "$3" ]; then
    tail -n 5 "$work/mod2imp.log" >&2
    fail 3 "$mod2imp could not export module $module of $1"
  fi
  echo "mod2imp $module: $(grep -c '^\$\$\$' "$3") entries" >> "$work/info"
}

rebuild_bible() {
  say "bible: apt-get download sword-text-web sword-text-sparv; mod2imp"
  apt_download "$work/debs/sword" sword-text-web sword-text-sparv
  export_sword sword-text-web "$work/web" "$work/web.imp"
  export_sword sword-text-sparv "$work/sparv" "$work/sparv.imp"
  convert bible "$work/web.imp" "$work/sparv.imp" "$work/out/bible.en-es.tsv.gz"
}

# Where polib comes from: the import path; Debian's python3-polib when the
# python3 on PATH is another interpreter; python3-polib's .deb (apt-get
# download); else the converter's own .po reader.
polib_source() {
  if python3 -c 'import polib' >/dev/null 2>&1; then echo auto; return; fi
  if [ -f /usr/lib/python3/dist-packages/polib.py ]; then echo /usr/lib/python3/dist-packages; return; fi
  local opts=()
  [ "$(id -u)" -ne 0 ] || opts=(-o APT::Sandbox::User=root)
  mkdir -p "$work/debs/polib"
  if (cd "$work/debs/polib" && apt-get "${opts[@]}" download python3-polib) > "$work/apt.log" 2>&1; then
    local deb
    for deb in "$work/debs/polib/"*.deb; do unpack "$deb" "$work/polib" >> "$work/info"; done
    if [ -f "$work/polib/usr/lib/python3/dist-packages/polib.py" ]; then
      echo "$work/polib/usr/lib/python3/dist-packages"
      return
    fi
  fi
  say "note: polib unavailable (python3-polib could not be had); using the converter's own .po reader"
  echo none
}

rebuild_pydocs() {
  local src=$1 commit
  say "pydocs: .po files under $src"
  commit="not a git checkout"
  # only src's own repository: a copy inside another checkout would name that one's commit
  if [ "$(git -C "$src" rev-parse --show-toplevel 2>/dev/null)" = "$(cd "$src" && pwd -P)" ]; then
    commit="commit $(git -C "$src" rev-parse HEAD)"
  fi
  echo "python-docs-es: $src ($commit)" >> "$work/info"
  convert pydocs "$src" "$work/out/pydocs.en-es.tsv.gz" --polib "$(polib_source)"
}

# rebuild WHICH...: (lohelp bible pydocs) into data/raw/extra-en-es, built in a
# work directory there and moved in when all of them are done.
rebuild() {
  need_tool python3 "install python3 (sudo apt-get install python3)"
  [ -f "$converter" ] || fail 3 "the converter $converter is missing (a broken checkout?)"
  case " $* " in
    *" lohelp "*|*" bible "*)
      need_tool apt-get "the Debian packages need Debian's apt-get (or copy the files from a machine that has them)"
      need_tool dpkg-deb "install dpkg (sudo apt-get install dpkg)" ;;
  esac
  case " $* " in
    *" bible "*)
      command -v "$mod2imp" >/dev/null 2>&1 ||
        fail 3 "'$mod2imp' is not installed, so the Bible cannot be exported: run 'sudo apt-get install libsword-utils'" \
          "(or 'bash scripts/setup.sh --extra-data'), or set PROJMT_MOD2IMP to a mod2imp" ;;
  esac
  mkdir -p "$raw_dir" || fail 3 "cannot create $raw_dir"
  work=$(mktemp -d "$raw_dir/.work.XXXXXX") || fail 3 "cannot create a work directory in $raw_dir"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/out"
  {
    echo "rebuilt by scripts/get_extra_data.sh on $(date -u +%Y-%m-%dT%H:%MZ), $(uname -n)," \
      "$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
  } > "$work/info"
  local what
  for what in "$@"; do
    case "$what" in
      lohelp) rebuild_lohelp ;;
      bible) rebuild_bible ;;
      pydocs) rebuild_pydocs "$pydocs_po" ;;
    esac
  done
  # only when every part succeeded: a failed rebuild leaves the directory as it was
  mv "$work/out/"*.tsv.gz "$raw_dir/"
  mv "$work/info" "$raw_dir/BUILD-INFO.txt"
  say "rebuilt $* in $raw_dir (details: $raw_dir/BUILD-INFO.txt)"
}

# ---------------------------------------------------------------- main

arg="" mode=auto pydocs_po=""
[ "${PROJMT_NO_DOWNLOAD:-0}" = "1" ] && mode=never
while [ $# -gt 0 ]; do
  case "$1" in
    --rebuild) mode=always ;;
    --no-rebuild) mode=never ;;
    --pydocs-po)
      [ $# -ge 2 ] || usage_error "--pydocs-po needs a directory (a checkout of $pydocs_help)"
      pydocs_po=$2
      shift ;;
    --pydocs-po=*) pydocs_po=${1#--pydocs-po=} ;;
    -h|--help) sed -n '2,50p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) usage_error "unknown option '$1'" ;;
    *) [ -z "$arg" ] || usage_error "give at most one DIR"; arg=$1 ;;
  esac
  shift
done
if [ -n "$arg" ] && { [ "$mode" = always ] || [ -n "$pydocs_po" ]; }; then
  usage_error "--rebuild and --pydocs-po write to $raw_dir; they take no DIR ('$arg')"
fi
if [ -n "$pydocs_po" ]; then
  [ -d "$pydocs_po" ] || fail 1 "--pydocs-po '$pydocs_po' is not a directory; it should be a checkout of $pydocs_help"
  [ -n "$(find "$pydocs_po" -name '*.po' -print -quit)" ] ||
    fail 1 "--pydocs-po '$pydocs_po' holds no .po files; it should be a checkout of $pydocs_help"
  pydocs_po=$(cd "$pydocs_po" && pwd)
fi

if [ "$mode" = always ]; then
  todo=(lohelp bible)
  [ -z "$pydocs_po" ] || todo+=(pydocs)
  rebuild "${todo[@]}"
  check_dir "$raw_dir"
  [ -n "$pydocs_po" ] || [ "$has_pydocs" = 0 ] || say "note: kept the earlier $raw_dir/pydocs.en-es.tsv.gz (--pydocs-po DIR rebuilds it)"
  choose "$raw_dir" "rebuild"
fi

if [ -n "$pydocs_po" ]; then
  # pydocs into data/raw/extra-en-es, beside lohelp and bible built there.
  check_dir "$raw_dir"
  todo=(pydocs)
  if [ -n "$lacking" ]; then
    [ "$mode" != never ] || fail 1 "$raw_dir lacks$lacking, and rebuilding is disabled (--no-rebuild / PROJMT_NO_DOWNLOAD=1)"
    todo=(lohelp bible pydocs)
  fi
  rebuild "${todo[@]}"
  check_dir "$raw_dir"
  choose "$raw_dir" "rebuild"
fi

[ -z "$arg" ] || explicit "$arg" "argument"
[ -z "${PROJMT_EXTRA_DIR:-}" ] || explicit "$PROJMT_EXTRA_DIR" "PROJMT_EXTRA_DIR"
[ -z "${PROJMT_DATA_DIR:-}" ] || explicit "$PROJMT_DATA_DIR/extra-en-es" "PROJMT_DATA_DIR"

looked=()
for c in "$repo_root/../shared/data/extra-en-es:shared data next to the repository" "$raw_dir:an earlier rebuild"; do
  dir=${c%%:*}
  looked+=("$dir")
  [ -d "$dir" ] || continue
  check_dir "$dir"
  if [ -z "$lacking" ]; then choose "$dir" "${c#*:}"; fi
  say "skipping $dir: it lacks$lacking"
done

[ "$mode" != never ] ||
  fail 1 "no extra corpora found (looked in: ${looked[*]}) and rebuilding is disabled (--no-rebuild / PROJMT_NO_DOWNLOAD=1)"
say "no extra corpora found (looked in: ${looked[*]}); rebuilding from Debian packages into $raw_dir"
rebuild lohelp bible
check_dir "$raw_dir"
choose "$raw_dir" "rebuild"
