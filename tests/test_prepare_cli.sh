#!/usr/bin/env bash
# test_prepare_cli.sh — `projmt prepare` as a user runs it: --help,
# --dump-config, a good run on a made-up TSV and on aligned files, and every
# bad input (missing file, misaligned files, nothing left after cleaning, an
# output dir that cannot be created, too large valid+test, unknown flag) must
# exit non-zero with a message that names the problem and leave no outputs.
# Usage: bash test_prepare_cli.sh <build-dir>
set -uo pipefail

build=${1:?usage: test_prepare_cli.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-prepare-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0 passed=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { passed=$((passed + 1)); }

# Made-up English/Spanish pairs from word lists (never corpus sentences).
make_pairs() {
  awk -v n="$1" 'BEGIN {
    split("I|You|The boy|The girl|My mother|Tom|The teacher", se, "|");
    split("Yo|Tú|El niño|La niña|Mi madre|Tom|El profesor", ss, "|");
    split("sees|wants|buys|finds|paints", ve, "|");
    split("ve|quiere|compra|encuentra|pinta", vs, "|");
    split("the apple|the year|the coffee|the song|the mountain|the bread|the book|the beach", oe, "|");
    split("la manzana|el año|el café|la canción|la montaña|el pan|el libro|la playa", os, "|");
    for (i = 0; i < n; i++) {
      a = i % 7 + 1; b = int(i / 7) % 5 + 1; c = int(i / 35) % 8 + 1;
      printf "%s %s %s.\t%s %s %s.\n", se[a], ve[b], oe[c], ss[a], vs[b], os[c];
    }
  }'
}

# run NAME EXPECTED_STATUS PATTERN ARGS... : runs prepare, checks status and
# that stdout+stderr match PATTERN (grep -E).
run() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out status
  out=$("$projmt" prepare "$@" 2>&1)
  status=$?
  if [ "$want" = "nonzero" ]; then
    [ "$status" -ne 0 ] && ok || fail "$name: exit status 0, expected failure"
  else
    [ "$status" -eq "$want" ] && ok || fail "$name: exit status $status, expected $want; output: $out"
  fi
  # a here-string: `echo | grep -q` fails at random under pipefail (SIGPIPE)
  grep -Eq -- "$pattern" <<<"$out" && ok || fail "$name: output lacks /$pattern/: $out"
}

# no_outputs DIR: a failed run must not leave prepared files behind.
no_outputs() {
  if [ -d "$1" ] && [ -n "$(ls -A "$1")" ]; then fail "files left in $1: $(ls -A "$1" | tr '\n' ' ')"; else ok; fi
}

make_pairs 280 > "$tmp/good.tsv"
cut -f1 "$tmp/good.tsv" > "$tmp/good.en"
cut -f2 "$tmp/good.tsv" > "$tmp/good.es"
head -n 279 "$tmp/good.es" > "$tmp/short.es"
printf '\n   \t \nno tab on this line\n' > "$tmp/empty.tsv"
touch "$tmp/a-file"
small=(--valid-size 20 --test-size 20 --vocab-size 100)

run help 0 "usage: projmt prepare" --help
run help-lists-data-options 0 "--valid-size" --help
run dump-config 0 "valid_size *= *33" --dump-config --valid-size 33
run unknown-flag nonzero "no-such-flag" --no-such-flag 3

run good-tsv 0 "280 input lines" --corpus "$tmp/good.tsv" --data-dir "$tmp/out" "${small[@]}"
for f in spm.model spm.vocab train.tok valid.tok test.tok train.en train.es valid.en valid.es test.en test.es manifest.json; do
  [ -s "$tmp/out/$f" ] && ok || fail "good-tsv: $f missing or empty"
done
[ "$(wc -l < "$tmp/out/valid.es")" -eq 20 ] && ok || fail "good-tsv: valid.es should have 20 lines"
[ -z "$(find "$tmp/out" -name '*.tmp')" ] && ok || fail "good-tsv: temporary files left"

run good-aligned 0 "pairs kept" --src-file "$tmp/good.en" --tgt-file "$tmp/good.es" --data-dir "$tmp/aligned" "${small[@]}"
[ -s "$tmp/aligned/manifest.json" ] && ok || fail "good-aligned: no manifest"

run missing-file nonzero "no-such-file.tsv.*No such file" --corpus "$tmp/no-such-file.tsv" --data-dir "$tmp/f1" "${small[@]}"
no_outputs "$tmp/f1"
run mismatched nonzero "differ in length.*280 lines.*279" --src-file "$tmp/good.en" --tgt-file "$tmp/short.es" --data-dir "$tmp/f2" "${small[@]}"
no_outputs "$tmp/f2"
run only-src nonzero "--tgt-file" --src-file "$tmp/good.en" --data-dir "$tmp/f3" "${small[@]}"
no_outputs "$tmp/f3"
run no-input nonzero "no input" --data-dir "$tmp/f3b" "${small[@]}"
no_outputs "$tmp/f3b"
run empty-corpus nonzero "no sentence pairs left" --corpus "$tmp/empty.tsv" --data-dir "$tmp/f4" "${small[@]}"
no_outputs "$tmp/f4"
run unwritable-dir nonzero "cannot create output directory" --corpus "$tmp/good.tsv" --data-dir "$tmp/a-file/sub" "${small[@]}"
run no-training-left nonzero "leaves no training pairs" --corpus "$tmp/good.tsv" --data-dir "$tmp/f5" --valid-size 200 --test-size 80
no_outputs "$tmp/f5"
run bad-ratio nonzero "max_ratio" --corpus "$tmp/good.tsv" --data-dir "$tmp/f6" --max-ratio 0.5
no_outputs "$tmp/f6"

# Several sources: a gzip'd TSV with a reference column (found by its
# magic bytes: no .gz in the name), weight 2; the per-source table; a config
# file's `source` lines, which a --source flag replaces.
make_pairs 100 | awk -F'\t' '{ sub(/\.$/, " today.", $1); sub(/\.$/, " hoy.", $2); printf "Ref %d\t%s\t%s\n", NR, $1, $2 }' \
  > "$tmp/ref.tsv"
make_pairs 280 | awk -F'\t' '{ printf "%s\tOtra versión %d.\n", $1, NR }' | gzip -c > "$tmp/other.tsv.gz"
gzip -c "$tmp/ref.tsv" > "$tmp/ref-gz"
run help-lists-source 0 "EN_PATH\+ES_PATH" --help
run dump-sources 0 "source = a.tsv:weight=2" --dump-config --source a.tsv:weight=2
run several 0 "ref +extra +2 +100 +100 +200 " --corpus "$tmp/good.tsv" --source "$tmp/ref-gz:en=2,es=3,weight=2,name=ref" \
  --data-dir "$tmp/several" "${small[@]}"
[ "$(wc -l < "$tmp/several/train.en")" -eq $((240 + 200)) ] && ok || fail "several: train.en should have 440 lines"
cmp -s "$tmp/out/test.en" "$tmp/several/test.en" && cmp -s "$tmp/out/valid.es" "$tmp/several/valid.es" && ok ||
  fail "several: valid/test differ from the run on good.tsv alone"
grep -q '"name": "ref", "role": "extra", "weight": 2' "$tmp/several/manifest.json" && ok || fail "several: manifest row"
run held-out 0 "other +extra +1 +280 +240 +240 .* 40$" --corpus "$tmp/good.tsv" --source "$tmp/other.tsv.gz" \
  --data-dir "$tmp/held" "${small[@]}"
printf 'source = %s\nsource = %s\n' "$tmp/ref-gz:en=2,es=3" "$tmp/no-such-file.tsv" > "$tmp/sources.ini"
run ini-sources nonzero "no-such-file.tsv" --config "$tmp/sources.ini" --corpus "$tmp/good.tsv" --data-dir "$tmp/f7" "${small[@]}"
no_outputs "$tmp/f7"
run flag-replaces-ini 0 "pairs kept" --config "$tmp/sources.ini" --source "$tmp/ref-gz:en=2,es=3" --corpus "$tmp/good.tsv" \
  --data-dir "$tmp/f8" "${small[@]}"
head -c 300 "$tmp/other.tsv.gz" > "$tmp/cut.tsv.gz"
run truncated-gz nonzero "cut.tsv.gz.*truncated gzip" --corpus "$tmp/good.tsv" --source "$tmp/cut.tsv.gz" --data-dir "$tmp/f9" "${small[@]}"
no_outputs "$tmp/f9"
run bad-spec nonzero "unknown option 'wieght'" --corpus "$tmp/good.tsv" --source "$tmp/ref.tsv:wieght=2" --data-dir "$tmp/f10" "${small[@]}"
no_outputs "$tmp/f10"

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
