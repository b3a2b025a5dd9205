#!/usr/bin/env bash
# precision_check.sh — is bf16 training as good as fp32? Trains the same
# config for the same number of epochs (1 by default) in fp32 and in bf16, in
# each attention mode, from the same seed, and compares the validation loss
# at the end: the bf16 target of the speed campaign is "within 1 % of fp32's
# after one epoch, in both attention modes". Only the matrix products differ
# between the two runs of a pair (bf16 inputs, fp32 accumulation; master
# weights, gradients and Adam moments stay fp32), so the gap is the price of
# bf16 alone.
#
#   bash scripts/precision_check.sh [options]
#
#   --config FILE        configs/base.ini
#   --epochs N           1
#   --attention LIST     standard,projection
#   --data-dir D         prepared data (data/spa-eng)
#   --threads N          0 = all cores
#   --out DIR            eval/precision-check (runs, train logs, results.json)
#   --build DIR          build
#
# Prints a Markdown table (valid loss, accuracy, tokens/s, bf16/fp32 loss
# gap) and writes OUT/results.json. Exit status: 0 when every gap is within
# 1 %, 3 when one is not, 1 on failure, 2 on bad usage.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

config=configs/base.ini epochs=1 attention=standard,projection data_dir=data/spa-eng threads=0
out=eval/precision-check build=build
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
bad_usage() { echo "precision_check.sh: $1" >&2; exit 2; }
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || case $1 in -h|--help) ;; *) bad_usage "$1 needs a value (see --help)" ;; esac
  case $1 in
    --config) config=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --attention) attention=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown option $1 (see --help)" ;;
  esac
done
projmt=$build/projmt
[ -x "$projmt" ] || { echo "precision_check.sh: $projmt not found; build first (cmake --build $build)" >&2; exit 1; }
[ -f "$data_dir/train.tok" ] || { echo "precision_check.sh: no prepared data in $data_dir; run projmt prepare (or scripts/quickstart.sh) first" >&2; exit 1; }
mkdir -p "$out"

rows=()
for att in ${attention//,/ }; do
  for prec in fp32 bf16; do
    run=$out/$att-$prec
    echo "== $att $prec: $epochs epoch(s) -> $run" >&2
    "$projmt" train --config "$config" --attention "$att" --precision "$prec" --epochs "$epochs" \
      --valid-every 0 --valid-bleu-sentences 0 --data-dir "$data_dir" --threads "$threads" \
      --save-dir "$run" --fresh --quiet
    rows+=("$att" "$prec" "$run/train.tsv")
  done
done

python3 - "$out/results.json" "$config" "$epochs" "${rows[@]}" <<'EOF'
import csv, json, os, statistics, sys
out, config, epochs, rest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
runs = {}
for att, prec, tsv in zip(rest[0::3], rest[1::3], rest[2::3]):
    with open(tsv, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    valid = [r for r in rows if r["kind"] == "valid"]
    train = [r for r in rows if r["kind"] == "train" and r["tokens_per_s"]]
    if not valid:
        sys.exit(f"precision_check.sh: {tsv} has no validation row")
    last = valid[-1]
    runs.setdefault(att, {})[prec] = {
        "step": int(last["step"]), "valid_loss": float(last["loss"]),
        "valid_accuracy": float(last["accuracy"]),
        "median_tokens_per_s": statistics.median(float(r["tokens_per_s"]) for r in train) if train else None,
        "train_tsv": tsv}
ok = True
print(f"| attention | precision | steps | valid loss | valid acc | tokens/s (median) | loss gap vs fp32 |")
print(f"|---|---|---|---|---|---|---|")
for att, by in runs.items():
    base = by["fp32"]["valid_loss"]
    for prec, r in by.items():
        gap = (r["valid_loss"] - base) / base
        r["loss_gap_vs_fp32"] = gap
        if abs(gap) > 0.01:
            ok = False
        tps = f'{r["median_tokens_per_s"]:,.0f}' if r["median_tokens_per_s"] else "-"
        print(f'| {att} | {prec} | {r["step"]} | {r["valid_loss"]:.4f} | {100 * r["valid_accuracy"]:.2f} % '
              f'| {tps} | {100 * gap:+.2f} % |')
with open(out + ".tmp", "w") as f:
    json.dump({"config": config, "epochs": epochs, "within_1_percent": ok, "runs": runs}, f, indent=2)
os.replace(out + ".tmp", out)
print(f"\nwritten {out}; every bf16 loss within 1 % of fp32: {'yes' if ok else 'NO'}")
sys.exit(0 if ok else 3)
EOF
