#!/usr/bin/env bash
# test_models_gitignore.sh — what git may commit under models/: the shipped
# model's exported file (models/en-es.int8.pmt), its results JSON and the
# model card (README.md), nothing else. Every checkpoint name a training run
# or scripts/train_release.sh writes there (last/best/step-N/averages, any
# *.ckpt, also one named like the shipped file), the fp32 comparison file
# and the run's logs stay ignored, by the rules themselves (check-ignore
# --no-index); and no checkpoint is tracked anywhere in the repository.
# SKIPPED when the source is not a git checkout or git is missing.
# Usage: bash test_models_gitignore.sh <build-dir>   (the build is not used)
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
command -v git > /dev/null || { echo "SKIPPED: git is not installed"; exit 77; }
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || { echo "SKIPPED: $(pwd) is not a git checkout"; exit 77; }
ignored() { git check-ignore -q --no-index "$1"; }
not_ignored() { ! git check-ignore -q --no-index "$1"; }

for f in models/last.ckpt models/best.ckpt models/en-es.ckpt models/en-es.int8.ckpt models/en-es.int8.pmt.ckpt \
         models/release-run/last.ckpt models/release-run/best.ckpt models/release-run/step-500.ckpt \
         models/release-run/release/avg.ckpt models/quickstart-standard/best.ckpt models/run/last.ckpt.tmp \
         models/release-run/release/en-es.fp32.pmt models/en-es.fp32.pmt models/en-es.bf16.pmt \
         models/release-run/logs/train.log models/release-run/train.tsv models/other.results.json; do
  check "$f is ignored" ignored "$f"
done
for f in models/README.md models/en-es.int8.pmt models/en-es.results.json; do
  check "$f may be committed" not_ignored "$f"
done
tracked_models=$(git ls-files models | grep -v -x -e models/README.md -e models/en-es.int8.pmt -e models/en-es.results.json)
check "nothing else is tracked under models/ (${tracked_models//$'\n'/ })" [ -z "$tracked_models" ]
tracked_ckpt=$(git ls-files '*.ckpt' '**/*.ckpt')
check "no checkpoint is tracked (${tracked_ckpt//$'\n'/ })" [ -z "$tracked_ckpt" ]
# The names the recipe writes by default are the ones the rules let through.
check "train_release.sh writes models/NAME.WEIGHTS.pmt with NAME en-es, WEIGHTS int8" \
  grep -q '^run=models/release-run out_dir=models name=en-es weights=int8 ' scripts/train_release.sh

finish
