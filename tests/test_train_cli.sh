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
for flag in --batch-tokens --lr --warmup --lr-schedule --decay-steps --min-lr --accum --clip-norm --save-dir --data-dir --encoder-self --fresh; do
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

# A cosine schedule over a known budget: warm-up to the peak at step 2, then
# down to --min-lr at --max-steps (the lr column of train.tsv, steps 2..8).
"$projmt" train "${common[@]}" --save-dir "$tmp/cosine" --lr 1e-3 --warmup 2 --lr-schedule cosine \
  --min-lr 1e-4 --max-steps 8 --valid-every 0 > "$tmp/cosine.log" 2>&1
status=$?
check "cosine run exits 0 (got $status: $(tail -1 "$tmp/cosine.log"))" [ $status -eq 0 ]
lrs=$(awk -F'\t' '$1 == "train" { printf "%s ", $7 }' "$tmp/cosine/train.tsv")
check "cosine lr at steps 2 4 6 8 is 1e-3 7.75e-4 3.25e-4 1e-4 (got $lrs)" \
  awk -v l="$lrs" 'BEGIN { n = split(l, a, " "); split("1e-3 7.75e-4 3.25e-4 1e-4", w, " ");
    if (n != 4) exit 1; for (i = 1; i <= 4; i++) if (a[i] - w[i] > 1e-9 || w[i] - a[i] > 1e-9) exit 1 }'
"$projmt" train "${common[@]}" --save-dir "$tmp/x" --lr-schedule cosine --max-steps 0 > "$tmp/nosteps.log" 2>&1
status=$?
check "cosine without a budget exits 2, a usage error (got $status)" [ $status -eq 2 ]
check "cosine without a budget says what to give" grep -q "give decay_steps, max_steps or minutes" "$tmp/nosteps.log"

# Over a time limit: the end of the decay is estimated at the end of warm-up,
# the lr falls to 0 there and the run stops; run again, it keeps the estimate.
"$projmt" train "${common[@]}" --save-dir "$tmp/timed" --lr 1e-3 --warmup 20 --lr-schedule linear \
  --max-steps 0 --epochs 0 --minutes 0.05 --valid-every 0 > "$tmp/timed.log" 2>&1
status=$?
check "time-limited linear run exits 0 (got $status: $(tail -1 "$tmp/timed.log"))" [ $status -eq 0 ]
end=$(sed -n 's/.*lr schedule: linear decay to step \([0-9]*\), where the 0.05-minute time limit.*/\1/p' "$tmp/timed.log")
check "the decay's end is estimated once, after warm-up ($(grep 'lr schedule' "$tmp/timed.log"))" \
  [ -n "$end" ] && [ "$end" -gt 20 ]
last=$(awk -F'\t' '$1 == "train" { s = $2; l = $7 } END { print s, l }' "$tmp/timed/train.tsv")
check "the run ends where the decay ends or at the time limit (last row: $last; end $end)" \
  grep -qE "done: (the lr schedule's end reached|time limit reached)" "$tmp/timed.log"
check "the lr falls after warm-up (rows: $(awk -F'\t' '$1 == "train" && ($2 == 20 || $2 == 40) { printf "%s ", $7 }' "$tmp/timed/train.tsv"))" \
  awk -F'\t' '$1 == "train" && $2 == 20 { a = $7 } $1 == "train" && $2 == 40 { b = $7 } END { exit !(a == 1e-3 && b != "" && b < a) }' "$tmp/timed/train.tsv"
"$projmt" train "${common[@]}" --save-dir "$tmp/timed" --lr 1e-3 --warmup 20 --lr-schedule linear \
  --max-steps 0 --epochs 0 --minutes 0.1 --valid-every 0 > "$tmp/timed2.log" 2>&1
check "a resumed run keeps the estimate ($(grep 'lr schedule' "$tmp/timed2.log"))" \
  grep -q "lr schedule: linear decay to step $end, as estimated from the time limit when the run started" "$tmp/timed2.log"
"$projmt" train "${common[@]}" --save-dir "$tmp/x" --lr-schedule cosine --warmup 0 --max-steps 0 --minutes 1 \
  > "$tmp/nowarmup.log" 2>&1
check "cosine over a time limit without warm-up is refused" grep -q "needs warmup > 0" "$tmp/nowarmup.log"

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
