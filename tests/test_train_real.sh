#!/usr/bin/env bash
# test_train_real.sh — a few training steps of configs/small.ini on the real
# prepared corpus (data/spa-eng from `projmt prepare`): the run succeeds, the
# loss is finite and falls from its start near ln(vocab), and throughput is
# reported. Ctrl-C at eight moments of the first steps of a base-config run
# stops it cleanly every time, under glibc's heap checks (a signal delivered
# mid-step used to corrupt the heap inside oneDNN's sgemm in about half of
# such stops). Without a prepared corpus it prepares spa.txt into a temporary
# folder first (about 10 s); SKIPs when neither is present.
# Usage: bash test_train_real.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=${1:?usage: test_train_real.sh <build-dir>}
projmt="$build/projmt"
data="${PROJMT_SOURCE_DIR:-.}/data/spa-eng"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-train-real-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$data/train.tok" ] || [ ! -f "$data/valid.tok" ] || [ ! -f "$data/spm.model" ]; then
  corpus=$(PROJMT_NO_DOWNLOAD=1 bash "${PROJMT_SOURCE_DIR:-.}/scripts/get_data.sh" 2>/dev/null | tail -n 1)
  if [ -z "$corpus" ] || [ ! -f "$corpus" ]; then
    echo "SKIPPED: no prepared corpus in $data and no spa.txt found (set PROJMT_DATA_DIR or run projmt prepare)"
    exit 77
  fi
  data="$tmp/data"
  "$projmt" prepare --corpus "$corpus" --data-dir "$data" > "$tmp/prepare.log" 2>&1 ||
    { echo "FAIL: prepare of $corpus: $(tail -2 "$tmp/prepare.log" | tr '\n' ' ')"; exit 1; }
fi

"$projmt" train --config configs/small.ini --data-dir "$data" --save-dir "$tmp/run" --batch-tokens 1024 \
  --max-steps 30 --log-every 5 --valid-every 0 --warmup 10 --threads 1 > "$tmp/log" 2>&1
status=$?
check "run exits 0 (got $status: $(tail -2 "$tmp/log" | tr '\n' ' '))" [ $status -eq 0 ]
rows=$(grep -c $'^train\t' "$tmp/run/train.tsv" 2>/dev/null || echo 0)
check "6 train rows (got $rows)" [ "$rows" -eq 6 ]
first=$(awk -F'\t' '$1 == "train" { print $4; exit }' "$tmp/run/train.tsv")
last=$(awk -F'\t' '$1 == "train" { v = $4 } END { print v }' "$tmp/run/train.tsv")
speed=$(awk -F'\t' '$1 == "train" { v = $9 } END { print v }' "$tmp/run/train.tsv")
check "loss starts near ln(8000) = 9.0 (got $first)" awk -v a="$first" 'BEGIN { exit !(a > 7 && a < 11) }'
check "loss falls (got $first -> $last)" awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'
check "one final validation row" [ "$(grep -c $'^valid\t30\t' "$tmp/run/train.tsv")" -eq 1 ]
echo "loss $first -> $last over 30 steps, $speed tokens/s"

# SIGINT mid-step, standard and learned-sigma projection (the two reports).
# libc_malloc_debug (glibc >= 2.34) checks every chunk it frees.
malloc_debug=""
for lib in /lib/*/libc_malloc_debug.so.0 /usr/lib/*/libc_malloc_debug.so.0; do
  [ -f "$lib" ] && { malloc_debug=$lib; break; }
done
[ -n "$malloc_debug" ] || echo "note: no libc_malloc_debug.so.0; the stops run without glibc's heap checks"
for trial in 1 2 3 4 5 6 7 8; do
  if [ $((trial % 2)) -eq 0 ]; then kind=(--attention standard); else kind=(--attention projection --sigma learned); fi
  log="$tmp/stop$trial.log"
  LD_PRELOAD="$malloc_debug" GLIBC_TUNABLES=glibc.malloc.check=3 "$projmt" train --config configs/base.ini \
    "${kind[@]}" --data-dir "$data" --save-dir "$tmp/stop$trial" --max-steps 1000 --valid-every 0 \
    --valid-bleu-sentences 0 --threads 1 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q "^training:" "$log" && break; sleep 0.05; done
  sleep "$(awk -v t="$trial" 'BEGIN { print 0.25 + 0.3 * t }')"
  kill -INT "$pid"
  wait "$pid"
  status=$?
  check "SIGINT $trial (${kind[*]}) exits 130 (got $status: $(tail -1 "$log"))" [ $status -eq 130 ]
  check "SIGINT $trial saves last.ckpt" grep -q "stopped at step .*saved" "$log"
done
finish
