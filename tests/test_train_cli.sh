#!/usr/bin/env bash
# test_train_cli.sh — `projmt train` as a user runs it: --help and
# --dump-config; a short run on a made-up corpus (prepared with `projmt
# prepare`) writes last.ckpt, best.ckpt and train.tsv and prints the
# parameter counts of all 8 attention combinations; running again resumes;
# Ctrl-C (SIGINT) saves last.ckpt and exits 130, and the next run resumes;
# missing data and a damaged checkpoint fail with messages naming the file.
# Usage: bash test_train_cli.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=${1:?usage: test_train_cli.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-train-cli-XXXXXX")
bg=""
trap '[ -n "$bg" ] && kill "$bg" 2>/dev/null; rm -rf "$tmp"' EXIT

"$projmt" train --help > "$tmp/help" 2>&1
check "--help exits 0" [ $? -eq 0 ]
for flag in --batch-tokens --lr --warmup --accum --clip-norm --save-dir --data-dir --encoder-self --fresh; do
  check "--help lists $flag" grep -q -- "$flag" "$tmp/help"
done
"$projmt" train --dump-config --d-model 64 --attention projection > "$tmp/dump" 2>&1
check "--dump-config exits 0" [ $? -eq 0 ]
check "--dump-config shows flags" grep -q "^d_model = 64$" "$tmp/dump"
check "--dump-config shows sites" grep -q "^decoder_cross = projection$" "$tmp/dump"
"$projmt" train --no-such-flag 1 > "$tmp/bad" 2>&1
check "unknown flag exits 2" [ $? -eq 2 ]

if ! "$projmt" prepare --help > /dev/null 2>&1; then
  echo "$passed passed, $failed failed"
  echo "SKIPPED: projmt prepare is not built yet, so no data for a training run"
  [ "$failed" -eq 0 ] && exit 77 || exit 1
fi

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
"$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$tmp/data" \
  --valid-size 20 --test-size 20 --vocab-size 100 > "$tmp/prepare.log" 2>&1
check "prepare succeeds ($(tail -3 "$tmp/prepare.log" | tr '\n' ' '))" [ -f "$tmp/data/train.tok" ]

common=(--config configs/tiny.ini --data-dir "$tmp/data" --threads 1 --log-every 2 --valid-every 3)
"$projmt" train "${common[@]}" --save-dir "$tmp/run" --max-steps 6 > "$tmp/run1.log" 2>&1
status=$?
check "first run exits 0 (got $status: $(tail -2 "$tmp/run1.log" | tr '\n' ' '))" [ $status -eq 0 ]
for f in last.ckpt best.ckpt train.tsv; do check "run wrote $f" [ -s "$tmp/run/$f" ]; done
check "no temporary files left" [ -z "$(ls "$tmp/run" | grep '\.tmp$')" ]
check "prints all 8 attention combinations" [ "$(grep -cE '^  (standard|projection) +/ (standard|projection) +/ (standard|projection) ' "$tmp/run1.log")" -eq 8 ]
check "marks this run's combination" grep -q "<- this run" "$tmp/run1.log"
check "train.tsv header" grep -q $'^kind\tstep\tepoch\tloss\taccuracy\tperplexity\tlr\tgrad_norm\ttokens_per_s\telapsed_s\tbleu\tchrf$' "$tmp/run/train.tsv"
check "3 train rows" [ "$(grep -c $'^train\t' "$tmp/run/train.tsv")" -eq 3 ]
check "2 valid rows" [ "$(grep -c $'^valid\t' "$tmp/run/train.tsv")" -eq 2 ]

"$projmt" train "${common[@]}" --save-dir "$tmp/run" --max-steps 8 > "$tmp/run2.log" 2>&1
check "second run resumes" grep -q "resuming from $tmp/run/last.ckpt at step 6" "$tmp/run2.log"
check "4 train rows after resume" [ "$(grep -c $'^train\t' "$tmp/run/train.tsv")" -eq 4 ]
check "train steps unique" [ -z "$(cut -f1,2 "$tmp/run/train.tsv" | sort | uniq -d)" ]

# Ctrl-C: wait for the first row, interrupt, expect a saved checkpoint and 130.
"$projmt" train "${common[@]}" --save-dir "$tmp/int" --max-steps 0 --epochs 0 --valid-every 0 > "$tmp/int.log" 2>&1 &
bg=$!
for _ in $(seq 1 300); do
  grep -q $'^train\t' "$tmp/int/train.tsv" 2>/dev/null && break
  sleep 0.1
done
kill -INT "$bg"
wait "$bg"
status=$?
bg=""
check "SIGINT exits 130 (got $status)" [ $status -eq 130 ]
check "SIGINT saves last.ckpt" [ -s "$tmp/int/last.ckpt" ]
check "SIGINT says how to resume" grep -q "stopped at step .*run the same command to resume" "$tmp/int.log"
"$projmt" train "${common[@]}" --save-dir "$tmp/int" --max-steps 2000000000 --epochs 0 --minutes 0.001 > "$tmp/int2.log" 2>&1
check "run after SIGINT resumes" grep -q "resuming from $tmp/int/last.ckpt" "$tmp/int2.log"

# Failures name the file and say what to do.
"$projmt" train "${common[@]}" --data-dir "$tmp/nodata" --save-dir "$tmp/x" > "$tmp/nodata.log" 2>&1
status=$?
check "missing data exits 1 (got $status)" [ $status -eq 1 ]
check "missing data names prepare" grep -q "projmt prepare" "$tmp/nodata.log"
head -c 200 "$tmp/run/last.ckpt" > "$tmp/run/last.ckpt.cut" && mv "$tmp/run/last.ckpt.cut" "$tmp/run/last.ckpt"
"$projmt" train "${common[@]}" --save-dir "$tmp/run" --max-steps 10 > "$tmp/damaged.log" 2>&1
status=$?
check "damaged checkpoint exits 1 (got $status)" [ $status -eq 1 ]
check "damaged checkpoint is named" grep -q "$tmp/run/last.ckpt' is truncated or corrupted" "$tmp/damaged.log"

finish
