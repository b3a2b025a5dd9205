# study_fixture.sh — sourced by the study tests (eval model modes, compare.sh):
# a made-up English/Spanish corpus (not corpus lines), prepared with `projmt
# prepare`, and a tiny INI for runs of a few steps on one thread.

# make_tiny_data PROJMT DIR: writes DIR/pairs.tsv, prepares DIR/data and
# writes DIR/tiny.ini; returns non-zero (with the prepare log) on failure.
make_tiny_data() {
  local projmt=$1 dir=$2
  awk -f "$(dirname "${BASH_SOURCE[0]}")/fixtures/made_up_pairs.awk" > "$dir/pairs.tsv"
  cat > "$dir/tiny.ini" <<'INI'
[model]
d_model = 16
n_heads = 2
d_ff = 32
enc_layers = 1
dec_layers = 1
dropout = 0.0
max_len = 32
[train]
batch_tokens = 256
lr = 3e-3
warmup = 10
log_every = 2
valid_every = 3
valid_bleu_sentences = 0
threads = 1
INI
  "$projmt" prepare --config "$dir/tiny.ini" --corpus "$dir/pairs.tsv" --data-dir "$dir/data" \
    --valid-size 20 --test-size 20 --vocab-size 100 > "$dir/prepare.log" 2>&1 || {
    tail -n 5 "$dir/prepare.log"
    return 1
  }
}
