#!/usr/bin/env bash
# test_shipped_model.sh — the model committed in models/ (written by
# scripts/train_release.sh): models/en-es.int8.pmt is an exported model file
# (not a checkpoint) within the size limit of its results, is the file its
# results JSON describes (bytes, sha256), loads and translates a pipe of
# sentences line for line and a single sentence as the README shows,
# translates 20 everyday sentences well enough (tests/fixtures/
# shipped_model_sample.{en,es}, sentences and references written for this
# test, none of them a Tatoeba pair: BLEU 80.7,
# chrF2 87.0 when added; the floors, BLEU 50 and chrF2 70, leave room for
# another int8 kernel's ties while a model that copies, drops or garbles
# its input scores far below them), and
# models/README.md is exactly the card scripts/model_card.py writes from
# models/en-es.results.json (so no number on it was typed by hand).
# SKIPPED while no model is shipped (before the release run is committed).
# Usage: bash test_shipped_model.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=$(cd "${1:?usage: test_shipped_model.sh <build-dir>}" && pwd)
projmt=$build/projmt
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
model=models/en-es.int8.pmt results=models/en-es.results.json card=models/README.md
if [ ! -e "$model" ]; then
  echo "SKIPPED: no shipped model: $model is written by scripts/train_release.sh and committed after the release run"
  exit 77
fi
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-shipped-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

check "$results is committed with the model" [ -s "$results" ]
facts=$(/usr/bin/python3 - "$model" "$results" <<'PY'
import gzip, hashlib, json, sys
model, results = sys.argv[1:]
bad = []
try:
    magic = gzip.open(model).read(8)
except OSError as e:
    magic = repr(e).encode()
if magic != b"PMTMODEL":
    bad.append(f"not an exported model file (starts {magic!r}; a checkpoint starts b'PMTCKPT')")
data = open(model, "rb").read()
try:
    r = json.load(open(results))
    f = r["files"][r["weights"]]
    if f["path"] != model: bad.append(f"results describe {f['path']}")
    if f["bytes"] != len(data): bad.append(f"{len(data)} bytes, results say {f['bytes']}")
    if f["sha256"] != hashlib.sha256(data).hexdigest(): bad.append("sha256 differs from the results'")
    if len(data) > r["files"]["max_mb"] * 1e6: bad.append(f"{len(data)} bytes, over {r['files']['max_mb']} MB")
except (OSError, ValueError, KeyError) as e:
    bad.append(f"results unreadable: {e!r}")
print("ok" if not bad else "; ".join(bad))
PY
)
check "$model is the file its results describe ($facts)" [ "$facts" = ok ]

printf 'Where is the train station?\nI would like a cup of coffee.\nShe reads a book every week.\n' > "$tmp/in.txt"
"$projmt" translate --model "$model" < "$tmp/in.txt" > "$tmp/out.txt" 2> "$tmp/err.txt"
status=$?
check "$model translates a pipe (status $status: $(tail -n 2 "$tmp/err.txt" | tr '\n' ' '))" [ $status -eq 0 ]
check "...one line per input line" [ "$(wc -l < "$tmp/out.txt")" -eq 3 ]
sample=tests/fixtures/shipped_model_sample
"$projmt" eval --model "$model" --src "$sample.en" --ref "$sample.es" --hyp-out "$tmp/sample.hyp" --json \
  > "$tmp/sample.json" 2> "$tmp/sample.err"
status=$?
check "$model scores the sample (status $status: $(tail -n 2 "$tmp/sample.err" | tr '\n' ' '))" [ $status -eq 0 ]
scores=$(/usr/bin/python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[-1])   # after sacreBLEU text lines, the JSON line
print("%.1f %.1f" % (d["bleu"]["score"], d["chrf"]["score"]))' "$tmp/sample.json" 2> /dev/null)
read -r bleu chrf <<< "${scores:-0 0}"
check "sample BLEU $bleu >= 50 ($(head -n 3 "$tmp/sample.hyp" 2> /dev/null | tr '\n' '|'))" \
  /usr/bin/python3 -c "import sys; sys.exit(not float('$bleu') >= 50)"
check "sample chrF2 $chrf >= 70" /usr/bin/python3 -c "import sys; sys.exit(not float('$chrf') >= 70)"
echo "Where is the train station?" | "$projmt" translate --model "$model" > "$tmp/one.txt" 2> /dev/null
check "the README's one-line command translates" [ -s "$tmp/one.txt" ]
check "README shows that command" grep -qF "./build/projmt translate --model $model" README.md

/usr/bin/python3 scripts/model_card.py "$results" > "$tmp/card.md"
status=$?
check "model_card.py renders $results" [ $status -eq 0 ]
check "$card is the card generated from $results (regenerate: python3 scripts/model_card.py $results --out $card)" \
  cmp -s "$tmp/card.md" "$card"

finish
