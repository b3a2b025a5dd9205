#!/usr/bin/env bash
# test_compare_smoke.sh — scripts/compare.sh end to end on a made-up corpus
# with a tiny config and a few steps per mode (standard, projection and a
# custom LABEL=--flags mode): every mode folder has its train.tsv and eval
# JSON, the plots, attention pictures and report.md exist, report.md carries
# the numbers of the TSVs and eval files and the exact command with no
# absolute path, and a second run reuses the finished runs instead of
# training again.
# SKIPPED when /usr/bin/python3 has no matplotlib.
# Usage: bash test_compare_smoke.sh <build-dir>
set -uo pipefail

build=$(cd "${1:?usage: test_compare_smoke.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
if ! /usr/bin/python3 -c "import matplotlib, numpy" 2>/dev/null; then
  echo "SKIPPED: /usr/bin/python3 has no matplotlib/numpy (apt-get install python3-matplotlib)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
source "$here/study_fixture.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-compare-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0 passed=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { passed=$((passed + 1)); }
check() { local what=$1; shift; if "$@"; then ok; else fail "$what"; fi; }

make_tiny_data "$projmt" "$tmp" || { echo "FAIL: prepare"; exit 1; }
args=(--name smoke --root "$tmp/runs" --build "$build" --config "$tmp/tiny.ini" --data-dir "$tmp/data"
      --max-steps 4 --modes "standard; projection; wide=--d-model 32 --attention projection"
      --flores none --bleu-sentences 6 --beam-size 2 --bench-steps 1)
bash "$here/../scripts/compare.sh" "${args[@]}" > "$tmp/compare.log" 2>&1
status=$?
check "compare.sh exits 0 (got $status: $(tail -n 3 "$tmp/compare.log" | tr '\n' ' '))" [ $status -eq 0 ]
study=$tmp/runs/smoke
report=$study/report.md

for mode in standard projection wide; do
  for f in train.tsv train.log flags.txt done eval_valid.json eval_test.json eval_bleu_test.json; do
    check "$mode/$f written" [ -s "$study/$mode/$f" ]
  done
  check "$mode trained 4 steps" [ "$(awk -F'\t' '$1 == "train" { s = $2 } END { print s }' "$study/$mode/train.tsv")" = 4 ]
  check "$mode checkpoints stay in ckpt/" [ -f "$study/$mode/ckpt/last.ckpt" ] && [ -z "$(ls "$study/$mode" | grep '\.ckpt$')" ]
  check "report has a speed and a quality row for $mode" [ "$(grep -c "^| $mode |" "$report")" -eq 2 ]
  final_loss=$(awk -F'\t' '$1 == "valid" { l = $4 } END { printf "%.4f", l }' "$study/$mode/train.tsv")
  check "report shows $mode's final valid loss $final_loss from train.tsv" \
    grep -q "^| $mode | 4 | [0-9.]* | $final_loss |" "$report"
  test_loss=$(grep -o '"loss": [0-9.]*' "$study/$mode/eval_test.json" | awk '{ printf "%.4f", $2 }')
  check "report shows $mode's test loss $test_loss" grep -q "^| $mode |.*| $test_loss |" "$report"
  bleu=$(grep -o '"bleu": {"score": [0-9.e+-]*' "$study/$mode/eval_bleu_test.json" | awk '{ printf "%.2f", $3 }')
  check "report shows $mode's test BLEU $bleu" grep -q "^| $mode |.*| $bleu |" "$report"
  params=$(grep -o '"params": [0-9]*' "$study/$mode/eval_test.json" | awk '{ print $2 }' | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta')
  check "report shows $mode's $params parameters" grep -q "^| $mode | .* | $params |" "$report"
done
check "custom mode got its flags" grep -q -- "--d-model 32" "$study/wide/flags.txt"
check "bench.json for the named modes" grep -q '"mode":"projection/projection/projection"' "$study/bench.json"
speed_row=$(grep -m 1 "^| projection |" "$report")
check "bench ratio in the report ($speed_row)" grep -q '^ [0-9]*\.[0-9]\{3\} $' <<< "$(cut -d'|' -f13 <<< "$speed_row")"
check "translation speed in the report" grep -q '^ [0-9.,]* (beam 2) $' <<< "$(cut -d'|' -f14 <<< "$speed_row")"
check "no bench for the custom mode" grep -q '^ — $' <<< "$(grep -m 1 "^| wide |" "$report" | cut -d'|' -f13)"
for name in accuracy loss valid_time; do
  for fmt in png svg; do check "plot $name.$fmt" [ -s "$study/plots/$name.$fmt" ]; done
done
for k in 1 2 3; do
  for site in encoder_self decoder_self decoder_cross cross_mean; do
    check "attention picture s${k}_$site.png" [ -s "$study/attention/s${k}_$site.png" ]
  done
done
check "report links the plots" grep -q "(plots/accuracy.png)" "$report"
check "report links the attention pictures" grep -q "(attention/s1_cross_mean.png)" "$report"
check "report records the command" grep -qF -- "--name smoke" "$report"
check "command.txt written" grep -qF -- "--max-steps 4" "$study/command.txt"
check "report names the machine" grep -q "cores (nproc)" "$report"
# Files are named relative to the repository: the study ran with absolute
# --root, --build, --config and --data-dir, none of which may show.
no_absolute_paths() { ! grep -nE '(^|[[:space:]`(=])/[[:alnum:]_.-]+/' "$1"; }
check "report names no absolute path" no_absolute_paths "$report"
check "report names the config relative to the repository" \
  grep -qF "Config: \`$(realpath --relative-to="$here/.." "$tmp/tiny.ini")\`" "$report"
check "report has 5 samples" [ "$(grep -c '^[0-9]\. \*\*source:\*\*' "$report")" -eq 5 ]
check "samples show every mode" [ "$(grep -c '^   \*\*wide:\*\*' "$report")" -eq 5 ]

# Second run: nothing is retrained; the report is written again.
before=$(md5sum "$study/standard/train.tsv")
bash "$here/../scripts/compare.sh" "${args[@]}" > "$tmp/again.log" 2>&1
check "second run exits 0 ($(tail -n 2 "$tmp/again.log" | tr '\n' ' '))" [ $? -eq 0 ]
check "second run reuses finished runs" [ "$(grep -c 'finished run in' "$tmp/again.log")" -eq 3 ]
check "train.tsv untouched" [ "$before" = "$(md5sum "$study/standard/train.tsv")" ]

bash "$here/../scripts/compare.sh" --name bad --root "$tmp/runs" --build "$build" --modes "nonsense" \
  --data-dir "$tmp/data" > "$tmp/bad.log" 2>&1
check "unknown mode fails" [ $? -ne 0 ]
check "...naming it" grep -q "unknown mode 'nonsense'" "$tmp/bad.log"

echo "$passed passed, $failures failed"
[ "$failures" -eq 0 ]
