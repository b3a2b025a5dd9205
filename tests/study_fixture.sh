# study_fixture.sh — sourced by the study tests (eval model modes, compare.sh):
# a made-up English/Spanish corpus (not corpus lines), prepared with `projmt
# prepare`, and a tiny INI for runs of a few steps on one thread.

# make_tiny_data PROJMT DIR: writes DIR/pairs.tsv, prepares DIR/data and
# writes DIR/tiny.ini; returns non-zero (with the prepare log) on failure.
make_tiny_data() {
  local projmt=$1 dir=$2
  awk 'BEGIN {
    split("I|You|The boy|The girl|My mother|Tom|The teacher", se, "|");
    split("Yo|Tú|El niño|La niña|Mi madre|Tom|El profesor", ss, "|");
    split("see|want|buy|find|paint", ve, "|");
    split("veo|quiero|compro|encuentro|pinto", vs, "|");
    split("the apple|the year|the coffee|the song|the mountain|the bread|the book|the beach", oe, "|");
    split("la manzana|el año|el café|la canción|la montaña|el pan|el libro|la playa", os, "|");
    for (i = 0; i < 280; i++) {
      a = i % 7 + 1; b = int(i / 7) % 5 + 1; c = int(i / 35) % 8 + 1;
      printf "%s %s %s.\t%s %s %s.\n", se[a], ve[b], oe[c], ss[a], vs[b], os[c];
    }
  }' > "$dir/pairs.tsv"
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
