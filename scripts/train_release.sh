#!/usr/bin/env bash
# train_release.sh — the recipe of the shipped English→Spanish model
# (models/en-es.int8.pmt): base config, fp32 training with an exponential
# moving average of the weights and numbered checkpoints, then the best of
# (best.ckpt's average, the mean of the last 5 checkpoints' averages, the
# last raw weights) by VALIDATION BLEU, exported with int8 weights and scored
# on the test split and FLORES-200 dev for the model card (models/README.md).
#
#   bash scripts/train_release.sh [--minutes 120] [--run DIR] [--out FILE]
#                                 [--weights int8|bf16] [-- extra train flags]
#
# Needs the build (build/projmt) and the prepared data (data/spa-eng; the
# script prepares it when missing). Resumes an interrupted run: run it again
# with the same options. Precision: fp32 (bf16 training is not implemented
# yet; see the README).
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=120
run=models/release-run
out=models/en-es.int8.pmt
weights=int8
data_dir=data/spa-eng
projmt=./build/projmt
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "train_release: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "train_release: $*" >&2; exit 1; }
step() { printf '\n== %s\n' "$*"; }
[ -x "$projmt" ] || die "$projmt not built (cmake -B build -S . -DCMAKE_BUILD_TYPE=Release && cmake --build build)"

step "data"
if [ -f "$data_dir/manifest.json" ]; then
  echo "prepared: $data_dir"
else
  corpus=$(bash scripts/get_data.sh | tail -n 1)
  "$projmt" prepare --corpus "$corpus" --data-dir "$data_dir"
fi

step "train ($minutes min, base config, fp32, --ema 0.999, --keep-last 5)"
# EMA decay 0.999 averages over the last ~1000 steps: a few thousand steps
# fit in two hours on this machine, so Marian's 0.9999 would still be
# dominated by early weights. Validation (and so best.ckpt) scores the average.
"$projmt" train --config configs/base.ini --data-dir "$data_dir" --save-dir "$run" --minutes "$minutes" \
  --epochs 0 --ema 0.999 --keep-last 5 --valid-every 500 --valid-bleu-sentences 500 \
  --early-stopping-metric bleu "${extra[@]}"

step "candidates, scored on the validation split (beam 4)"
"$projmt" average --out "$run/avg-last5.ckpt" --last 5 --dir "$run"
# The raw weights too: early in training the average lags behind them.
"$projmt" export --raw --model "$run/last.ckpt" --out "$run/raw.fp32.pmt" --weights fp32
valid_bleu() {   # prints the validation BLEU of a model file
  "$projmt" eval --model "$1" --src "$data_dir/valid.en" --ref "$data_dir/valid.es" --beam-size 4 --json |
    tail -n 1 | sed -n 's/.*"bleu": {"score": \([0-9.e+-]*\).*/\1/p'
}
best=""
best_bleu=-1
for candidate in "$run/best.ckpt" "$run/avg-last5.ckpt" "$run/raw.fp32.pmt"; do
  bleu=$(valid_bleu "$candidate")
  [ -n "$bleu" ] || die "could not score $candidate"
  echo "$candidate: valid BLEU $bleu"
  if awk -v a="$bleu" -v b="$best_bleu" 'BEGIN { exit !(a > b) }'; then best=$candidate best_bleu=$bleu; fi
done
echo "chosen: $best"

step "export ($weights)"
"$projmt" export --model "$best" --out "$out" --weights "$weights"

step "scores of the exported file for the model card (beam 4)"
"$projmt" eval --model "$out" --src "$data_dir/test.en" --ref "$data_dir/test.es" --beam-size 4
for prefix in data/flores200-dev/flores200-dev /work/shared/data/flores200-dev/flores200-dev; do
  if [ -f "$prefix.en" ] && [ -f "$prefix.es" ]; then
    "$projmt" eval --model "$out" --src "$prefix.en" --ref "$prefix.es" --beam-size 4
    break
  fi
done
"$projmt" bench --decode --model "$out" --data-dir "$data_dir"
ls -l "$out" "$best"
