#!/usr/bin/env bash
# bench_mpi.sh — on this machine: `projmt train` as 1 rank x T threads against
# T ranks x 1 thread (T = cores), alternating, REPS times each; prints tokens/s
# (the last log window of each run, so start-up is excluded), the gradient
# all-reduce time per step and its share of the step, and the medians.
#
#   scripts/bench_mpi.sh [DATA_DIR] [STEPS] [REPS] [-- extra projmt train options]
#   defaults: data/spa-eng, 12 steps, 3 repetitions; base config, batch 4096 tokens.
# Results go to a temporary folder that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:-data/spa-eng}
steps=${2:-12}
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
[ "${1:-}" = "--" ] && shift
cores=$(nproc)
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
work=$(mktemp -d "${TMPDIR:-/tmp}/projmt-bench-mpi-XXXXXX")
trap 'rm -rf "$work"' EXIT
common=(--config configs/base.ini --data-dir "$data" --batch-tokens 4096 --max-steps "$steps" --epochs 0
        --log-every $((steps / 2)) --valid-every 0 --fresh "$@")

# last_rate DIR: tokens/s of the last train row.
last_rate() { awk -F'\t' '$1 == "train" { r = $9 } END { print r }' "$1/train.tsv"; }

for rep in $(seq 1 "$reps"); do
    build/projmt train "${common[@]}" --threads "$cores" --save-dir "$work/one" >"$work/one.log" 2>&1 ||
        { tail -5 "$work/one.log" >&2; exit 1; }
    one=$(last_rate "$work/one")
    PROJMT=build/projmt scripts/train_mpi.sh -n "$cores" "${common[@]}" --threads 1 --save-dir "$work/many" \
        >"$work/many.log" 2>&1 || { tail -5 "$work/many.log" >&2; exit 1; }
    many=$(last_rate "$work/many")
    ar=$(sed -n 's/^all-reduce: [0-9]* steps, \([0-9.]*\) ms per step, \([0-9.]*\)% of step time.*/\1 \2/p' "$work/many.log")
    echo "rep $rep: 1x$cores $one tok/s | ${cores}x1 $many tok/s | all-reduce ms/step, % of step: $ar"
done | tee "$work/reps.txt"
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Fields of a rep line: 4 = 1-rank tok/s, 8 = many-rank tok/s, last two = all-reduce ms and %.
one=$(awk '{ print $4 }' "$work/reps.txt" | median)
many=$(awk '{ print $8 }' "$work/reps.txt" | median)
ratio=$(awk '{ print $8 / $4 }' "$work/reps.txt" | median)
ms=$(awk '{ print $(NF - 1) }' "$work/reps.txt" | median)
share=$(awk '{ print $NF }' "$work/reps.txt" | median)
echo "median: 1x$cores $one tok/s, ${cores}x1 $many tok/s, ratio of the same rep ${ratio}; all-reduce $ms ms/step = $share% of the step"
