#!/usr/bin/env bash
# test_flores_lookup.sh — where the study and release scripts find FLORES-200
# dev (scripts/flores.sh): $PROJMT_FLORES first, then
# $PROJMT_DATA_DIR/flores200-dev, the repository's data/flores200-dev and
# ../shared/data/flores200-dev beside the repository; a folder or a file
# prefix; a place with only one of the two files does not count; "none"
# when nothing is found. Runs on temporary folders, not the real data.
# Usage: bash test_flores_lookup.sh <build-dir>   (the build is not used)
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
source_dir=${PROJMT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
. "$source_dir/scripts/flores.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

make_flores() { mkdir -p "$(dirname "$1")" && touch "$1.en" "$1.es"; }
repo=$tmp/top/repo
mkdir -p "$repo"
unset PROJMT_FLORES PROJMT_DATA_DIR

check "nothing anywhere: none" [ "$(flores_auto "$repo")" = none ]
make_flores "$tmp/top/shared/data/flores200-dev/flores200-dev"
check "../shared/data beside the repository" \
  [ "$(flores_auto "$repo")" = "$repo/../shared/data/flores200-dev/flores200-dev" ]
make_flores "$repo/data/flores200-dev/flores200-dev"
check "the repository's data/ before ../shared" [ "$(flores_auto "$repo")" = "$repo/data/flores200-dev/flores200-dev" ]
make_flores "$tmp/d/flores200-dev/flores200-dev"
check "\$PROJMT_DATA_DIR before the repository" \
  [ "$(PROJMT_DATA_DIR=$tmp/d flores_auto "$repo")" = "$tmp/d/flores200-dev/flores200-dev" ]
make_flores "$tmp/own/dev"
check "\$PROJMT_FLORES first, as a file prefix" \
  [ "$(PROJMT_FLORES=$tmp/own/dev PROJMT_DATA_DIR=$tmp/d flores_auto "$repo")" = "$tmp/own/dev" ]
mkdir -p "$tmp/half" && touch "$tmp/half/flores200-dev.en"
check "a folder with only the .en file does not count" \
  [ "$(PROJMT_FLORES=$tmp/half PROJMT_DATA_DIR=$tmp/d flores_auto "$repo")" = "$tmp/d/flores200-dev/flores200-dev" ]
not_found() { ! flores_prefix "$1" > /dev/null; }
check "flores_prefix refuses a place without the files" not_found "$tmp/half"
check "flores_prefix takes the folder" [ "$(flores_prefix "$tmp/d/flores200-dev")" = "$tmp/d/flores200-dev/flores200-dev" ]
finish
