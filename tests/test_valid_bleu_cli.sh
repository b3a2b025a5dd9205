#!/usr/bin/env bash
# test_valid_bleu_cli.sh — validation BLEU/chrF in `projmt train` on a
# made-up corpus (tests/fixtures/made_up_pairs.awk, prepared with `projmt
# prepare`):
#   - every valid row of train.tsv has numeric bleu/chrf in [0, 100], train
#     rows none, and the stderr validation line shows them;
#   - they equal `projmt translate --beam-size 1` + `projmt eval` on the
#     first valid_bleu_sentences lines with last.ckpt (last validation) and
#     best.ckpt (best validation);
#   - early_stopping_metric = bleu with patience stops the run when BLEU
#     stops improving, and best.ckpt holds the best BLEU;
#   - resuming keeps one valid row per step, all scored; switching the
#     early-stopping metric at resume starts the best over;
#   - valid_bleu_sentences = 0 leaves the columns empty, and then
#     early_stopping_metric = chrf is refused with a message naming the key.
# Usage: bash test_valid_bleu_cli.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=${1:?usage: test_valid_bleu_cli.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-valid-bleu-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
"$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$tmp/data" \
  --valid-size 20 --test-size 20 --vocab-size 100 > "$tmp/prepare.log" 2>&1
[ -s "$tmp/data/valid.en" ] || { echo "FAIL: prepare ($(tail -3 "$tmp/prepare.log" | tr '\n' ' '))"; exit 1; }

common=(--config configs/tiny.ini --data-dir "$tmp/data" --threads 1 --epochs 0 --lr 1e-2 --log-every 10
        --valid-every 20 --valid-bleu-sentences 12)

# The bleu (column 11) / chrf (12) fields of the valid rows, as "step bleu chrf".
valid_scores() { awk -F'\t' '$1 == "valid" { print $2, $11, $12 }' "$1/train.tsv"; }

# All valid rows scored within [0, 100] and no train row scored.
check_columns() {
  local run=$1 rows
  rows=$(valid_scores "$run")
  check "$run: has valid rows" [ -n "$rows" ]
  check "$run: every valid row has bleu and chrf in [0, 100] ($rows)" \
    awk '{ for (k = 2; k <= 3; k++) if ($k !~ /^[0-9]+\.[0-9][0-9]$/ || $k + 0 > 100) exit 1 }' <<<"$rows"
  check "$run: train rows have no bleu/chrf" \
    awk -F'\t' '$1 == "train" && ($11 != "" || $12 != "") { exit 1 }' "$run/train.tsv"
}

# "bleu chrf" of `projmt translate --beam-size 1` with ckpt on the first 12
# valid sentences, scored by `projmt eval` (printed with 2 decimals, as train.tsv).
translate_and_eval() {
  head -n 12 "$tmp/data/valid.en" > "$tmp/src.en"
  head -n 12 "$tmp/data/valid.es" > "$tmp/ref.es"
  "$projmt" translate --model "$1" --beam-size 1 --threads 1 -i "$tmp/src.en" -o "$tmp/hyp.es" 2> /dev/null
  "$projmt" eval --hyp "$tmp/hyp.es" --ref "$tmp/ref.es" | awk -F' = ' '{ split($2, w, " "); s = s (NR > 1 ? " " : "") w[1] }
                                                             END { print s }'
}

# 1. Early stopping on BLEU: the tiny model learns, BLEU saturates, patience
#    3 ends the run long before max_steps.
"$projmt" train "${common[@]}" --save-dir "$tmp/es" --max-steps 3000 --early-stopping-metric bleu --patience 3 \
  > "$tmp/es.log" 2>&1
status=$?
check "early-stopping run exits 0 (got $status: $(tail -2 "$tmp/es.log" | tr '\n' ' '))" [ $status -eq 0 ]
check "stops for lack of improvement" grep -q "no improvement for \`patience\` validations" "$tmp/es.log"
check_columns "$tmp/es"
check "stderr shows BLEU and chrF" grep -qE '^valid step [0-9]+ .*\| BLEU [0-9.]+ \| chrF [0-9.]+ \([0-9.]+s\)' "$tmp/es.log"
scores=$(valid_scores "$tmp/es")
last_step=$(tail -n 1 <<<"$scores" | cut -d' ' -f1)
check "stopped before max_steps (step $last_step)" [ "$last_step" -lt 3000 ]
# The best BLEU (first row reaching it) came before the last 3 rows, which did not beat it.
best=$(awk 'NR == 1 || $2 + 0 > b { b = $2 + 0; line = $0 } END { print line }' <<<"$scores")
best_step=$(cut -d' ' -f1 <<<"$best") best_bleu=$(cut -d' ' -f2 <<<"$best")
check "best ($best) before the last 3 validations" [ "$best_step" -lt "$(tail -n 3 <<<"$scores" | sed -n 1p | cut -d' ' -f1)" ]
check "BLEU rose above 10 while learning (best $best)" awk -v b="$best_bleu" 'BEGIN { exit !(b > 10) }'
check "best.ckpt = best BLEU row (step $best)" [ "$(translate_and_eval "$tmp/es/best.ckpt")" = "${best#* }" ]
check "last.ckpt = last valid row" [ "$(translate_and_eval "$tmp/es/last.ckpt")" = "$(tail -n 1 <<<"$scores" | cut -d' ' -f2-)" ]

# 2. Resume: a second session adds valid rows once per step, all scored.
"$projmt" train "${common[@]}" --save-dir "$tmp/res" --max-steps 40 --early-stopping-metric bleu > "$tmp/res1.log" 2>&1
"$projmt" train "${common[@]}" --save-dir "$tmp/res" --max-steps 80 --early-stopping-metric bleu > "$tmp/res2.log" 2>&1
check "second session resumes" grep -q "resuming from $tmp/res/last.ckpt at step 40" "$tmp/res2.log"
check_columns "$tmp/res"
check "valid rows at 20 32 40 60 64 80 once each" [ "$(valid_scores "$tmp/res" | cut -d' ' -f1 | tr '\n' ' ')" = "20 32 40 60 64 80 " ]

# 2b. Switching from BLEU to loss at resume: the best BLEU (>= 0) is no
#     -loss (< 0), so the best starts over and the next validation is the best.
"$projmt" train "${common[@]}" --save-dir "$tmp/res" --max-steps 100 > "$tmp/res3.log" 2>&1
check "metric change is noted" grep -q "early_stopping_metric changed from bleu to loss" "$tmp/res3.log"
check "first validation after the change is the new best" grep -q "^valid step 96 .*| new best" "$tmp/res3.log"

# 3. Off: empty columns, no BLEU on stderr; early stopping on chrF then needs it.
"$projmt" train "${common[@]}" --save-dir "$tmp/off" --max-steps 40 --valid-bleu-sentences 0 > "$tmp/off.log" 2>&1
check "valid_bleu_sentences 0: valid rows" [ "$(grep -c $'^valid\t' "$tmp/off/train.tsv")" -eq 3 ]
check "valid_bleu_sentences 0: bleu/chrf empty" awk -F'\t' 'NR > 1 && ($11 != "" || $12 != "") { exit 1 }' "$tmp/off/train.tsv"
check "valid_bleu_sentences 0: no BLEU on stderr" [ -z "$(grep -E 'BLEU [0-9]' "$tmp/off.log")" ]
"$projmt" train "${common[@]}" --save-dir "$tmp/bad" --max-steps 40 --valid-bleu-sentences 0 \
  --early-stopping-metric chrf > "$tmp/bad.log" 2>&1
status=$?
check "chrf without valid_bleu_sentences exits 1 (got $status)" [ $status -eq 1 ]
check "and names the setting" grep -q "early_stopping_metric = chrf needs validation BLEU/chrF, but valid_bleu_sentences is 0" "$tmp/bad.log"

finish
