# made_up_model.sh — sourced by script tests that need a trained model and
# the prepared data it learned from: the made-up corpus of
# tests/fixtures/made_up_pairs.awk, prepared with `projmt prepare` (a
# 100-piece vocabulary) and a tiny model trained on it for 60 steps.
#
#   made_up_model PROJMT DIR   writes DIR/data (prepared) and DIR/run/last.ckpt;
#                              on failure prints why and exits 1
made_up_model() {
  local projmt=$1 dir=$2
  awk -f tests/fixtures/made_up_pairs.awk > "$dir/pairs.tsv"
  "$projmt" prepare --config configs/tiny.ini --corpus "$dir/pairs.tsv" --data-dir "$dir/data" \
    --valid-size 20 --test-size 20 --vocab-size 100 > "$dir/prepare.log" 2>&1
  [ -s "$dir/data/train.tok" ] || { echo "FAIL: prepare ($(tail -n 3 "$dir/prepare.log" | tr '\n' ' '))"; exit 1; }
  "$projmt" train --config configs/tiny.ini --data-dir "$dir/data" --save-dir "$dir/run" --threads 1 --epochs 0 \
    --max-steps 60 --lr 1e-2 --valid-bleu-sentences 0 > "$dir/train.log" 2>&1
  [ -s "$dir/run/last.ckpt" ] || { echo "FAIL: train ($(tail -n 3 "$dir/train.log" | tr '\n' ' '))"; exit 1; }
}
