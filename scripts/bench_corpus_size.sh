#!/usr/bin/env bash
# bench_corpus_size.sh — `projmt prepare` and training start-up at 118k and
# at 10M sentence pairs (issue 44): pairs/s, seconds and peak RSS, measured
# by /usr/bin/time -v. Results go to docs/corpus-size.md by hand.
#
# The 10M-pair corpus is synthetic but made of real text: every line joins
# two real pairs (i, j) drawn by a seeded generator from spa.txt and the
# extra corpora (English "en_i en_j", Spanish "es_i es_j"; pairs with a side
# over 20 words left out of the pool so a joined pair stays under
# max_words). A concatenation of two translations is a translation, and with
# ~187k real pairs in the pool there are ~3.5e10 ordered choices, so of 10M
# draws only ~1,400 repeat and dedup does not collapse the corpus.
#
# usage: scripts/bench_corpus_size.sh [WORK_DIR] [PAIRS]
#   WORK_DIR  where corpora, data dirs and logs go (default /tmp/stream-bench;
#             never inside the repository: the corpus is data)
#   PAIRS     size of the synthetic corpus (default 10000000)
# The synthetic corpus is made once: SYNTH=FILE names an existing one.
# Environment: PROJMT (default build/projmt; the binary measured), DATA (default ../shared/data),
# STEPS (phases to run, default "synth prepare-small prepare-big train-small train-big";
# synth-small prepare-synth-small train-synth-small: the first 118,964 lines of the
# synthetic corpus, the same kind of sentences as the 10M run, for a fair start-up
# comparison: the joined sentences are twice as long as spa.txt's).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/stream-bench}
pairs=${2:-10000000}
projmt=${PROJMT:-$here/build/projmt}
data=${DATA:-$here/../shared/data}
steps=${STEPS:-"synth prepare-small prepare-big train-small train-big"}
spa=$data/spa-eng/spa.txt
extra=$data/extra-en-es
synth=${SYNTH:-$work/synth-$pairs.tsv}

mkdir -p "$work"
[ -x "$projmt" ] || { echo "bench_corpus_size: $projmt is not built (cmake --build build)" >&2; exit 1; }
[ -r "$spa" ] || { echo "bench_corpus_size: cannot read $spa (set DATA=)" >&2; exit 1; }

log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$work/bench.log"; }

# Runs a command under /usr/bin/time -v; prints "seconds peak_rss_MiB".
measure() {
    local name=$1; shift
    /usr/bin/time -v -o "$work/$name.time" "$@" > "$work/$name.out" 2> "$work/$name.err"
    local secs rss
    secs=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0;
                       for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$work/$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$work/$name.time")
    echo "$secs $rss"
}

make_synthetic() {
    [ -s "$synth" ] && { log "synthetic corpus $synth exists"; return; }
    log "making $pairs synthetic pairs into $synth"
    python3 - "$spa" "$extra" "$pairs" "$synth.tmp" <<'EOF'
import gzip, random, sys
spa, extra, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pool = []
def add(path, en_col, es_col):
    opener = gzip.open if path.endswith('.gz') else open
    with opener(path, 'rt', encoding='utf-8', errors='replace') as f:
        for line in f:
            cols = line.rstrip('\n').split('\t')
            if len(cols) <= max(en_col, es_col):
                continue
            en, es = cols[en_col].strip(), cols[es_col].strip()
            if en and es and len(en.split()) <= 20 and len(es.split()) <= 20:
                pool.append((en, es))
add(spa, 0, 1)
add(extra + '/lohelp.en-es.tsv.gz', 0, 1)
add(extra + '/pydocs.en-es.tsv.gz', 0, 1)
add(extra + '/bible.en-es.tsv.gz', 1, 2)
rng = random.Random(44)
m = len(pool)
sys.stderr.write('pool of %d real pairs\n' % m)
with open(out, 'w', encoding='utf-8') as f:
    buf = []
    for k in range(n):
        a, b = pool[rng.randrange(m)], pool[rng.randrange(m)]
        buf.append(a[0] + ' ' + b[0] + '\t' + a[1] + ' ' + b[1] + '\n')
        if len(buf) == 100000:
            f.write(''.join(buf)); buf = []
            if (k + 1) % 1000000 == 0:
                sys.stderr.write('%d pairs\n' % (k + 1))
    f.write(''.join(buf))
EOF
    mv "$synth.tmp" "$synth"
    log "synthetic corpus: $(wc -l < "$synth") lines, $(du -h "$synth" | cut -f1)"
}

# prepare NAME CORPUS N: time and peak RSS of `projmt prepare`.
run_prepare() {
    local name=$1 corpus=$2 n=$3
    rm -rf "$work/data-$name"
    log "prepare $name ($corpus)"
    read -r secs rss < <(measure "prepare-$name" "$projmt" prepare --corpus "$corpus" --data-dir "$work/data-$name")
    local rate
    rate=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.0f", n / s}')
    log "RESULT prepare $name: $n pairs, $secs s, $rate pairs/s, peak RSS $rss MiB"
}

# train NAME: start-up to the end of the first step (one step, no
# validation BLEU), time and peak RSS. The step, the closing teacher-forced
# validation (2000 pairs) and the checkpoint are the same work at any corpus
# size, so a difference is start-up.
run_train() {
    local name=$1
    rm -rf "$work/run-$name"
    log "train start-up $name"
    read -r secs rss < <(measure "train-$name" "$projmt" train --config "$here/configs/base.ini" \
        --data-dir "$work/data-$name" --save-dir "$work/run-$name" --max-steps 1 --valid-every 0 --valid-bleu-sentences 0 --threads 2)
    log "RESULT train start-up $name: $secs s to the first step (and its checkpoint), peak RSS $rss MiB"
}

log "CPU: $(lscpu | awk -F': +' '/Model name/ {m = $2} /CPU family/ {f = $2} /^Model:/ {o = $2} END {print m ", family " f ", model " o}')"
for step in $steps; do
    case $step in
        synth) make_synthetic ;;
        prepare-small) run_prepare small "$spa" 118964 ;;
        prepare-big) make_synthetic; run_prepare big "$synth" "$pairs" ;;
        train-small) run_train small ;;
        train-big) run_train big ;;
        synth-small) make_synthetic; head -n 118964 "$synth" > "$work/synth-118964.tsv" ;;
        prepare-synth-small) run_prepare synth-small "$work/synth-118964.tsv" 118964 ;;
        train-synth-small) run_train synth-small ;;
        *) echo "bench_corpus_size: unknown step '$step'" >&2; exit 2 ;;
    esac
done
