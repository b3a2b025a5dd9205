#!/usr/bin/env bash
# quickstart.sh — the README's main command. On a fresh Debian 12 machine:
# installs the dependencies, builds, finds and prepares the Spanish–English
# corpus, trains a small model for a few minutes (live progress line), plots
# its curves, translates a few sentences, and says how to go on.
#
#   bash scripts/quickstart.sh [--minutes N] [--attention standard|projection]
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=5
attention=standard
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --attention) attention=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "quickstart: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

step() { printf '\n== %s\n' "$*"; }

step "1/6 dependencies"
bash scripts/setup.sh --all

step "2/6 build"
cmake -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"

step "3/6 corpus"
data_dir=data/spa-eng
if [ -f "$data_dir/manifest.json" ]; then
  echo "already prepared: $data_dir (delete it to prepare again)"
else
  corpus=$(bash scripts/get_data.sh | tail -n 1)
  ./build/projmt prepare --corpus "$corpus" --data-dir "$data_dir"
fi

run_dir=models/quickstart-$attention
step "4/6 training a small model ($attention attention) for $minutes minutes -> $run_dir"
./build/projmt train --config configs/small.ini --attention "$attention" --data-dir "$data_dir" \
  --save-dir "$run_dir" --minutes "$minutes" --epochs 0

step "5/6 plots"
/usr/bin/python3 scripts/plot_curves.py --out "$run_dir/plots" "$attention=$run_dir/train.tsv"
echo "curves: $run_dir/plots/*.png"

step "6/6 translating a few sentences"
# scripts/quickstart.en: the sentences the shipped model's card also shows (train_release.sh).
./build/projmt translate --model "$run_dir/best.ckpt" --beam-size 4 < scripts/quickstart.en
# The model shipped in models/ (scripts/train_release.sh), when this checkout has it.
shipped=models/en-es.int8.pmt
if [ -f "$shipped" ]; then
  step "the same sentences with the shipped model ($shipped; its card: models/README.md)"
  ./build/projmt translate --model "$shipped" --beam-size 4 < scripts/quickstart.en
fi

cat <<MSG

Done. Translate interactively (line editing, history, :beam N, :quit):
  ./build/projmt translate --model $run_dir/best.ckpt
MSG
[ ! -f "$shipped" ] || echo "  ./build/projmt translate --model $shipped      (the shipped model)"
cat <<MSG
Train longer or the base model:   ./build/projmt train --config configs/base.ini --save-dir models/base
Compare the attention forms:      bash scripts/compare.sh --name my-study --epochs 2
MSG
