#!/usr/bin/env bash
# test_train_tok_refusals.sh — `projmt train` maps the prepared token files
# (src/data/corpus.h, version 2) and refuses, with exit 1 and a message
# naming the file, one that cannot be this data directory's:
#   - train.tok cut short (an interrupted copy): "truncated";
#   - valid.tok with bytes appended;
#   - the token files of another vocabulary (spm.model from another
#     preparation): "another vocabulary", both sizes named;
#   - an id damaged inside the mapped file (start-up reads no ids, so the
#     batch that holds it stops the run): "outside the vocabulary".
# The untouched directory trains.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=${1:?usage: test_train_tok_refusals.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-tok-refusals-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
prepare() {   # prepare DIR VOCAB
  "$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$1" --seed 1 \
    --valid-size 20 --test-size 30 --vocab-size "$2" > "$tmp/prepare.log" 2>&1 ||
    { cat "$tmp/prepare.log"; echo "FAIL: prepare"; exit 1; }
}
prepare "$tmp/a" 60
prepare "$tmp/b" 80
common=(--config configs/tiny.ini --threads 1 --valid-every 0 --valid-bleu-sentences 0 --seed 1)

# train DIR NAME [ARGS...]: one run into its own save dir; status in $status.
train() {
  local dir=$1 name=$2
  shift 2
  "$projmt" train "${common[@]}" --data-dir "$dir" --save-dir "$tmp/run-$name" "$@" > "$tmp/$name.log" 2>&1
  status=$?
}

train "$tmp/a" good --max-steps 2
check "untouched data trains (exit $status: $(tail -1 "$tmp/good.log"))" [ $status -eq 0 ]

cp -r "$tmp/a" "$tmp/cut"
size=$(stat -c %s "$tmp/cut/train.tok")
head -c $((size - 4)) "$tmp/a/train.tok" > "$tmp/cut/train.tok"
train "$tmp/cut" cut --max-steps 2
check "truncated train.tok: exit 1 (got $status)" [ $status -eq 1 ]
check "truncated train.tok: message names the file ($(tail -1 "$tmp/cut.log"))" \
  grep -q "token file '$tmp/cut/train.tok' is truncated: it has $((size - 4)) bytes, its header promises $size" "$tmp/cut.log"

cp -r "$tmp/a" "$tmp/long"
printf 'x' >> "$tmp/long/valid.tok"
train "$tmp/long" long --max-steps 2
check "valid.tok with a byte appended: exit 1 (got $status)" [ $status -eq 1 ]
check "valid.tok with a byte appended: message names it ($(tail -1 "$tmp/long.log"))" \
  grep -q "corrupt token file '$tmp/long/valid.tok': 1 bytes after the" "$tmp/long.log"

cp -r "$tmp/a" "$tmp/mixed"
cp "$tmp/b/spm.model" "$tmp/mixed/spm.model"
train "$tmp/mixed" mixed --max-steps 2
check "another vocabulary: exit 1 (got $status)" [ $status -eq 1 ]
check "another vocabulary: message names train.tok and both sizes ($(tail -1 "$tmp/mixed.log"))" \
  grep -q "token file '$tmp/mixed/train.tok' was encoded with another vocabulary (60 pieces, .*) than this spm.model (80 pieces" "$tmp/mixed.log"

# The last 4 bytes of train.tok are its last target id: made 0x7f7f7f7f.
cp -r "$tmp/a" "$tmp/flip"
size=$(stat -c %s "$tmp/flip/train.tok")
printf '\177\177\177\177' | dd of="$tmp/flip/train.tok" bs=1 seek=$((size - 4)) conv=notrunc status=none
train "$tmp/flip" flip --epochs 1
check "damaged id: exit 1 (got $status)" [ $status -eq 1 ]
check "damaged id: message gives the id and what to do ($(tail -1 "$tmp/flip.log"))" \
  grep -q "the training split's token file has id 2139062143 (pair [0-9]*) outside the vocabulary of 60 pieces: the file is damaged" "$tmp/flip.log"
check "damaged id: no checkpoint saved with it" [ ! -e "$tmp/run-flip/last.ckpt" ]

finish
