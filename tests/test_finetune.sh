#!/usr/bin/env bash
# test_finetune.sh — fine-tuning on other data: `prepare --spm-model` encodes
# a new corpus with an existing vocabulary, `train --init-from` starts a new
# run from a trained model's weights.
#   1. prepare --spm-model: spm.model and spm.vocab are the given model's,
#      byte for byte, the manifest names it; a file that is not a
#      SentencePiece model, and one with other special ids, are refused
#      before anything is written (no data dir left).
#   2. train --init-from: the run starts at step 0 from the model's moving
#      average (its first validation loss, after one step at a negligible
#      lr, is what `eval --split valid` gives the model on that data; a run
#      from the seed is far from it), says so, and then resumes from its own
#      last.ckpt, not from init_from again.
#   3. refused, naming the file: data of another vocabulary, a model of
#      another shape, a missing file; an fp32 export starts exactly, an int8
#      export from its rounded weights, with a note.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=${1:?usage: test_finetune.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-finetune-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
# The fine-tuning corpus: another train.tok (no "The teacher" pairs).
grep -v '^The teacher' "$tmp/pairs.tsv" > "$tmp/other.tsv"
prepare() {   # prepare DIR CORPUS [flags]
  local dir=$1 corpus=$2; shift 2
  "$projmt" prepare --config configs/tiny.ini --corpus "$corpus" --data-dir "$dir" \
    --valid-size 20 --test-size 20 --vocab-size 100 "$@" > "$tmp/prepare.log" 2>&1
}
prepare "$tmp/a" "$tmp/pairs.tsv" || { cat "$tmp/prepare.log"; echo "FAIL: prepare a"; exit 1; }

# ---- 1. prepare --spm-model ----
prepare "$tmp/b" "$tmp/other.tsv" --spm-model "$tmp/a/spm.model"
status=$?
check "prepare --spm-model exits 0 (got $status: $(tail -1 "$tmp/prepare.log"))" [ $status -eq 0 ]
check "spm.model is the given one, byte for byte" cmp -s "$tmp/a/spm.model" "$tmp/b/spm.model"
check "spm.vocab is the given model's" cmp -s "$tmp/a/spm.vocab" "$tmp/b/spm.vocab"
check "the summary says the vocabulary was given" grep -q "vocab [0-9]* (given: $tmp/a/spm.model)" "$tmp/prepare.log"
check "the manifest names it" grep -q "\"spm_model\": \"$tmp/a/spm.model\"" "$tmp/b/manifest.json"
check "the corpus differs from a's" bash -c "! cmp -s '$tmp/a/train.tok' '$tmp/b/train.tok'"
prepare "$tmp/own" "$tmp/other.tsv" || { cat "$tmp/prepare.log"; echo "FAIL: prepare own"; exit 1; }
check "without it, the same corpus gets a vocabulary of its own" bash -c "! cmp -s '$tmp/a/spm.model' '$tmp/own/spm.model'"

printf 'not a model\n' > "$tmp/bogus.model"
prepare "$tmp/bogus" "$tmp/other.tsv" --spm-model "$tmp/bogus.model"
status=$?
check "a file that is not a SentencePiece model: exit 1 (got $status)" [ $status -eq 1 ]
check "and the message names it ($(tail -1 "$tmp/prepare.log"))" grep -q "$tmp/bogus.model" "$tmp/prepare.log"
check "nothing is written" [ ! -e "$tmp/bogus" ]
if command -v spm_train > /dev/null; then
  # SentencePiece's own defaults: unk 0, bos 1, eos 2, no pad.
  cut -f1 "$tmp/pairs.tsv" > "$tmp/en.txt"
  spm_train --input="$tmp/en.txt" --model_prefix="$tmp/foreign" --vocab_size=40 --minloglevel=2 > /dev/null 2>&1
  prepare "$tmp/foreign-ids" "$tmp/other.tsv" --spm-model "$tmp/foreign.model"
  status=$?
  check "a model with other special ids: exit 1 (got $status)" [ $status -eq 1 ]
  check "and the message gives them ($(tail -1 "$tmp/prepare.log"))" \
    grep -q "foreign.model' has special ids pad -1, unk 0, bos 1, eos 2; projmt needs 0, 1, 2, 3" "$tmp/prepare.log"
  check "nothing is written" [ ! -e "$tmp/foreign-ids" ]
else
  fail "spm_train (Debian package sentencepiece, installed by scripts/setup.sh) not found"
fi

# ---- 2. train --init-from ----
common=(--config configs/tiny.ini --threads 1 --valid-bleu-sentences 0 --epochs 0 --log-every 1)
"$projmt" train "${common[@]}" --data-dir "$tmp/a" --save-dir "$tmp/base" --max-steps 60 --ema 0.9 \
  --valid-every 0 > "$tmp/base.log" 2>&1 || { tail -5 "$tmp/base.log"; echo "FAIL: base run"; exit 1; }
# The model's loss on b's validation split (eval takes the moving average).
"$projmt" eval --model "$tmp/base/last.ckpt" --split valid --data-dir "$tmp/b" --threads 1 --json > "$tmp/eval.log" 2>&1
want=$(sed -n 's/.*"loss": \([0-9.e+-]*\).*/\1/p' "$tmp/eval.log" | tail -1)
check "eval gives the base model's loss on b ($want)" [ -n "$want" ]
valid_loss() { awk -F'\t' '$1 == "valid" && $2 == 1 { print $4 }' "$1"; }
# One step at lr 1e-30: the update is far below fp32's resolution of the
# weights, so the step-1 validation sees the starting weights.
ft=(--data-dir "$tmp/b" --max-steps 1 --valid-every 1 --lr 1e-30 --warmup 1)
"$projmt" train "${common[@]}" "${ft[@]}" --save-dir "$tmp/ft" --init-from "$tmp/base/last.ckpt" > "$tmp/ft.log" 2>&1
status=$?
check "train --init-from exits 0 (got $status: $(tail -1 "$tmp/ft.log"))" [ $status -eq 0 ]
check "it says where it starts from" \
  grep -q "fine-tuning from $tmp/base/last.ckpt (its moving average): new optimizer, schedule and data position" "$tmp/ft.log"
check "and what that model had trained" grep -q "it had trained 60 steps" "$tmp/ft.log"
got=$(valid_loss "$tmp/ft/train.tsv")
check "its first validation loss ($got) is the model's on b ($want)" \
  awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-3 && d > -1e-3) }'
"$projmt" train "${common[@]}" "${ft[@]}" --save-dir "$tmp/seed" > "$tmp/seed.log" 2>&1
seed=$(valid_loss "$tmp/seed/train.tsv")
check "a run from the seed starts far from it ($seed vs $want)" \
  awk -v a="$seed" -v b="$want" 'BEGIN { exit !(a != "" && a - b > 0.5) }'
"$projmt" train "${common[@]}" --data-dir "$tmp/b" --max-steps 3 --valid-every 0 --save-dir "$tmp/ft" \
  --init-from "$tmp/base/last.ckpt" > "$tmp/resume.log" 2>&1
check "run again, it resumes from its own last.ckpt at step 1" grep -q "resuming from $tmp/ft/last.ckpt at step 1 " "$tmp/resume.log"
check "and says init_from no longer applies" grep -q "note: init_from '$tmp/base/last.ckpt' applies to a new run only" "$tmp/resume.log"
check "not fine-tuning from it again" bash -c "! grep -q 'fine-tuning from' '$tmp/resume.log'"

# ---- 3. refusals ----
refused() {   # refused WHAT PATTERN [train flags]
  local what=$1 pattern=$2; shift 2
  "$projmt" train "${common[@]}" --max-steps 1 --valid-every 0 --save-dir "$tmp/refused" --fresh "$@" \
    > "$tmp/refused.log" 2>&1
  local status=$?
  check "$what: exit 1 (got $status)" [ $status -eq 1 ]
  check "$what: the message says why ($(grep -m1 'projmt train:' "$tmp/refused.log"))" grep -q "$pattern" "$tmp/refused.log"
  check "$what: no checkpoint written" [ ! -e "$tmp/refused/last.ckpt" ]
}
refused "data of another vocabulary" \
  "init_from '$tmp/base/last.ckpt' was trained with another vocabulary than $tmp/own/spm.model.*--spm-model" \
  --data-dir "$tmp/own" --init-from "$tmp/base/last.ckpt"
refused "a model of another shape" "init_from '$tmp/base/last.ckpt': the checkpoint's model differs" \
  --data-dir "$tmp/b" --init-from "$tmp/base/last.ckpt" --d-model 32
"$projmt" export --model "$tmp/base/last.ckpt" --out "$tmp/base.int8.pmt" --weights int8 > /dev/null 2>&1 ||
  fail "export int8"
"$projmt" train "${common[@]}" "${ft[@]}" --save-dir "$tmp/ft-int8" --init-from "$tmp/base.int8.pmt" \
  > "$tmp/ft-int8.log" 2>&1
check "an int8 export is a starting point, with a note ($(grep -m1 note "$tmp/ft-int8.log"))" \
  grep -q "note: $tmp/base.int8.pmt stores int8 weights: training starts from their rounded values" "$tmp/ft-int8.log"
check "...whose first validation loss is near the model's (rounding only)" \
  awk -v a="$(valid_loss "$tmp/ft-int8/train.tsv")" -v b="$want" 'BEGIN { d = a - b; exit !(a != "" && d < 0.05 && d > -0.05) }'
"$projmt" export --model "$tmp/base/last.ckpt" --out "$tmp/base.fp32.pmt" --weights fp32 > /dev/null 2>&1 ||
  fail "export fp32"
"$projmt" train "${common[@]}" "${ft[@]}" --save-dir "$tmp/ft-export" --init-from "$tmp/base.fp32.pmt" \
  > "$tmp/ft-export.log" 2>&1
check "an fp32 export is a starting point too ($(tail -1 "$tmp/ft-export.log"))" \
  awk -v a="$(valid_loss "$tmp/ft-export/train.tsv")" -v b="$want" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-3 && d > -1e-3) }'
refused "a missing file" "$tmp/nowhere.ckpt" --data-dir "$tmp/b" --init-from "$tmp/nowhere.ckpt"

finish
