#!/usr/bin/env bash
# test_metrics_sacrebleu.sh — cross-checks `projmt eval` against the real
# sacreBLEU (Python) on a few hundred made-up sentence pairs that stress the
# 13a rules (numbers, punctuation, entities, dashes) and UTF-8 (¿¡ñ, CJK,
# no-break spaces). Both BLEU and chrF must agree to 2 decimal places.
# sacreBLEU comes from the source copy next to the checkout
# (../shared/tools/sacrebleu, or $PROJMT_SACREBLEU_DIR) through PYTHONPATH,
# or from an installed package; its Debian dependencies come from
# `scripts/setup.sh --all`. Skips (exit 77) only when neither imports.
# $1 = build dir.
set -u
build_dir=${1:?usage: test_metrics_sacrebleu.sh BUILD_DIR}
projmt="$build_dir/projmt"
source_dir=${PROJMT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
sacrebleu_dir=${PROJMT_SACREBLEU_DIR:-$source_dir/../shared/tools/sacrebleu}
if [ -d "$sacrebleu_dir/sacrebleu" ]; then
    export PYTHONPATH="$sacrebleu_dir${PYTHONPATH:+:$PYTHONPATH}"
fi

python=""
for candidate in /usr/bin/python3 python3; do
    if "$candidate" -c 'import sacrebleu' >/dev/null 2>&1; then python=$candidate; break; fi
done
if [ -z "$python" ]; then
    echo "SKIPPED: sacrebleu is not importable by /usr/bin/python3 or python3 (looked in $sacrebleu_dir;" \
         "run scripts/setup.sh --all for its dependencies)"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/projmt-sacrebleu-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

# Writes N made-up pairs (fixed seed) to hyp/ref files; references are never
# empty because sacreBLEU rejects empty references.
generate_pairs() {
    "$python" - "$1" "$2" "$3" "$4" <<'EOF'
import random, sys
seed, hyp_path, ref_path, count = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
words = ["el", "la", "gato", "perro", "casa", "año", "niño", "señor", "mañana", "¿Dónde", "está", "¡Hola",
         "3.5", "1,000", "a,b", "end.", "U.S.A.", "x.,y", "1-2", "well-known", "don't", "(hola)", "$3.50,",
         "50%", "&quot;cita&quot;", "&amp;", "&lt;b&gt;", "e-mail", "10.", ".5", ",", ".", "?", "!", "¿", "¡",
         "café", "€20", "日本", "a\u00a0b", "c\u3000d", "tab\there", "word-", "-", "...", "2-", "-3",
         "a.b.c", "9,", ",9", "x/y", "{z}", "[w]", "~t", "@home", "#tag", "=", "+1"]
def sentence():
    body = " ".join(rng.choice(words) for _ in range(rng.randint(0, 14)))
    return body + rng.choice(["", "", ".", "?", " ", "  \t"])
with open(hyp_path, "w", encoding="utf-8", newline="\n") as hyp_file, \
     open(ref_path, "w", encoding="utf-8", newline="\n") as ref_file:
    for _ in range(count):
        ref = sentence()
        if not ref.strip():
            ref = "x"
        tokens = ref.split(" ")
        if rng.random() < 0.3:
            rng.shuffle(tokens)
        hyp = " ".join(t if rng.random() < 0.7 else rng.choice(words) for t in tokens)
        if rng.random() < 0.05:
            hyp = ""
        hyp_file.write(hyp + "\n")
        ref_file.write(ref + "\n")
EOF
}

# Prints "BLEU CHRF" from sacreBLEU and from projmt's JSON line.
sacrebleu_scores() {
    "$python" - "$1" "$2" <<'EOF'
import sys
from sacrebleu.metrics import BLEU, CHRF
read = lambda path: open(path, encoding="utf-8", newline="\n").read().split("\n")[:-1]
hyps, refs = read(sys.argv[1]), read(sys.argv[2])
print(BLEU().corpus_score(hyps, [refs]).score, CHRF().corpus_score(hyps, [refs]).score)
EOF
}
projmt_scores() {
    "$projmt" eval --hyp "$1" --ref "$2" --json | tail -n 1 |
        "$python" -c 'import json, sys; r = json.load(sys.stdin); print(r["bleu"]["score"], r["chrf"]["score"])'
}

for seed in 1 2 3; do
    generate_pairs "$seed" "$work/hyp.txt" "$work/ref.txt" 100 || { echo "FAIL: generator" >&2; exit 1; }
    expected=$(sacrebleu_scores "$work/hyp.txt" "$work/ref.txt")
    got=$(projmt_scores "$work/hyp.txt" "$work/ref.txt")
    if "$python" -c 'import sys; e = [float(x) for x in sys.argv[1].split()]; g = [float(x) for x in sys.argv[2].split()]
sys.exit(0 if len(e) == len(g) == 2 and all(f"{a:.2f}" == f"{b:.2f}" for a, b in zip(e, g)) else 1)' "$expected" "$got"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL: seed $seed: sacreBLEU (BLEU chrF) = $expected, projmt = $got" >&2
    fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
