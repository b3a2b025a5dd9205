#!/usr/bin/env bash
# test_train_resume_data.sh — resuming checks that the training data is the
# one the checkpoint was trained on: the data position (epoch, batch) only
# means the same batches over the same train.tok. A re-prepared split (other
# seed: other pairs and order) is refused with a message naming last.ckpt,
# both pair counts and what to do; the original data resumes; --fresh starts
# over on the new data.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=${1:?usage: test_train_resume_data.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-resume-data-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
prepare() {   # prepare DIR SEED
  "$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$1" --seed "$2" \
    --valid-size 20 --test-size 30 --vocab-size 100 > "$tmp/prepare.log" 2>&1 ||
    { cat "$tmp/prepare.log"; echo "FAIL: prepare"; exit 1; }
}
prepare "$tmp/a" 1
prepare "$tmp/b" 2
check "the two preparations differ" bash -c "! cmp -s '$tmp/a/train.tok' '$tmp/b/train.tok'"
common=(--config configs/tiny.ini --threads 1 --valid-every 0 --valid-bleu-sentences 0 --save-dir "$tmp/run" --seed 1)

"$projmt" train "${common[@]}" --data-dir "$tmp/a" --max-steps 2 > "$tmp/first.log" 2>&1
check "first run exits 0" [ $? -eq 0 ]
"$projmt" train "${common[@]}" --data-dir "$tmp/b" --max-steps 4 > "$tmp/other.log" 2>&1
status=$?
check "other data: exit 1 (got $status)" [ $status -eq 1 ]
check "other data: message names last.ckpt and the data ($(tail -1 "$tmp/other.log"))" \
  grep -q "last.ckpt' was trained on another train.tok (.* pairs, checksum .*; now .* pairs, checksum .*).*--fresh" "$tmp/other.log"
"$projmt" train "${common[@]}" --data-dir "$tmp/a" --max-steps 4 > "$tmp/same.log" 2>&1
check "same data: exit 0 and resumes at step 2" grep -q "resuming from .* at step 2 " "$tmp/same.log"
"$projmt" train "${common[@]}" --data-dir "$tmp/b" --max-steps 2 --fresh > "$tmp/fresh.log" 2>&1
check "--fresh on other data: exit 0" [ $? -eq 0 ]
"$projmt" train "${common[@]}" --data-dir "$tmp/b" --max-steps 3 > "$tmp/again.log" 2>&1
check "then resumes on that data" grep -q "resuming from .* at step 2 " "$tmp/again.log"

finish
