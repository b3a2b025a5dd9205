#!/usr/bin/env bash
# test_shortlist_cli.sh — the vocabulary shortlist end to end on a tiny
# model trained here on a made-up corpus (tests/fixtures/made_up_pairs.awk):
#   - export --shortlist DATA_DIR stores one (and says so); the weights are
#     those of the plain export, so --shortlist 0 translates as the plain
#     file, and exporting the file again keeps its shortlist;
#   - translate, eval and bench --decode take --shortlist K; translate with
#     it writes one line per input line;
#   - a model without a shortlist, a data directory of another vocabulary,
#     a missing one and bad sizes are refused with a message (exit 1 or 2);
#   - the Python package: Translator(shortlist=K) translates, set_shortlist
#     on a model without one raises ValueError.
# Usage: bash test_shortlist_cli.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/made_up_model.sh"

build=$(cd "${1:?usage: test_shortlist_cli.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-shortlist-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

made_up_model "$projmt" "$tmp"

"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/plain.pmt" > "$tmp/plain.log" 2>&1
check "plain export exits 0" [ $? -eq 0 ]
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/listed.pmt" --shortlist "$tmp/data" --shortlist-size 8 \
  --shortlist-frequent 10 > "$tmp/listed.log" 2>&1
status=$?
check "export --shortlist exits 0 ($(tail -n 2 "$tmp/listed.log" | tr '\n' ' '))" [ $status -eq 0 ]
check "export says what it built" grep -q "^shortlist: 8 candidates per source piece and the 10 most frequent" \
  "$tmp/listed.log"
check "export says the file has a shortlist" grep -q "with a vocabulary shortlist" "$tmp/listed.log"
check "the plain export does not" bash -c '! grep -q "with a vocabulary shortlist" "$1"' _ "$tmp/plain.log"
"$projmt" export --model "$tmp/listed.pmt" --out "$tmp/again.pmt" > "$tmp/again.log" 2>&1
check "exporting the file again keeps its shortlist" grep -q "with a vocabulary shortlist" "$tmp/again.log"
check "...byte for byte" cmp -s "$tmp/listed.pmt" "$tmp/again.pmt"

head -n 12 "$tmp/data/test.en" > "$tmp/in.txt"
"$projmt" translate --model "$tmp/plain.pmt" --scores < "$tmp/in.txt" > "$tmp/plain.out" 2> /dev/null
"$projmt" translate --model "$tmp/listed.pmt" --scores --shortlist 0 < "$tmp/in.txt" > "$tmp/zero.out" 2> /dev/null
check "--shortlist 0 translates as the plain file" cmp -s "$tmp/plain.out" "$tmp/zero.out"
"$projmt" translate --model "$tmp/listed.pmt" --scores --shortlist 4 < "$tmp/in.txt" > "$tmp/four.out" \
  2> "$tmp/four.err"
status=$?
check "translate --shortlist 4 exits 0 ($(tail -n 2 "$tmp/four.err" | tr '\n' ' '))" [ $status -eq 0 ]
check "...one line per input line" [ "$(wc -l < "$tmp/four.out")" -eq 12 ]
"$projmt" eval --model "$tmp/listed.pmt" --src "$tmp/in.txt" --ref <(head -n 12 "$tmp/data/test.es") --shortlist 4 \
  > "$tmp/eval.out" 2>&1
check "eval --shortlist 4 scores" grep -q "^BLEU" "$tmp/eval.out"
"$projmt" bench --decode --model "$tmp/listed.pmt" --data-dir "$tmp/data" --sentences 8 --decode-batch 4 \
  --shortlist 4 > "$tmp/bench.out" 2>&1
check "bench --decode --shortlist 4 says so" grep -q "shortlist 4" "$tmp/bench.out"

"$projmt" translate --model "$tmp/plain.pmt" --shortlist 4 < "$tmp/in.txt" > /dev/null 2> "$tmp/none.err"
check "a model without a shortlist is refused (exit 1)" [ $? -eq 1 ]
check "...saying how to get one" grep -q "no vocabulary shortlist (export it with \`projmt export --shortlist\`" \
  "$tmp/none.err"
"$projmt" translate --model "$tmp/listed.pmt" --shortlist -1 < "$tmp/in.txt" > /dev/null 2> "$tmp/neg.err"
check "--shortlist -1 is refused (exit 2)" [ $? -eq 2 ]

"$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$tmp/other" \
  --valid-size 20 --test-size 20 --vocab-size 60 > /dev/null 2>&1
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/x.pmt" --shortlist "$tmp/other" > /dev/null 2> "$tmp/other.err"
check "data of another vocabulary is refused (exit 1)" [ $? -eq 1 ]
check "...naming it" grep -q "is not the model's SentencePiece model" "$tmp/other.err"
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/x.pmt" --shortlist "$tmp/nowhere" > /dev/null 2> "$tmp/gone.err"
check "a missing data directory is refused (exit 1)" [ $? -eq 1 ]
check "...naming its spm.model" grep -q "$tmp/nowhere/spm.model" "$tmp/gone.err"
check "no file is left by a refused export" [ ! -e "$tmp/x.pmt" ]
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/x.pmt" --shortlist "$tmp/data" --shortlist-size 0 \
  > /dev/null 2>&1
check "--shortlist-size 0 is bad usage (exit 2)" [ $? -eq 2 ]
"$projmt" export --model "$tmp/run/last.ckpt" --out "$tmp/x.pmt" --shortlist-size 5 > /dev/null 2> "$tmp/alone.err"
check "--shortlist-size without --shortlist is bad usage (exit 2)" [ $? -eq 2 ]

# serve: --shortlist K is a decoding option like the others; /info says which.
. tests/serve_fixture.sh
PROJMT=$projmt TMP=$tmp MODEL=$tmp/listed.pmt SERVE_PID=""
trap '[ -n "$SERVE_PID" ] && kill -KILL "$SERVE_PID" 2> /dev/null; rm -rf "$tmp"' EXIT
if command -v curl > /dev/null && serve_start listed --shortlist 4; then
  req GET /info
  check "serve --shortlist 4: /info reports it" [ "$(jget "$TMP/body" '(d["shortlist"]["candidates"], d["shortlist"]["in_model"])')" = "(4, True)" ]
  req POST /translate -H 'Content-Type: application/json' -d '{"q": "the cat sleeps", "source": "en", "target": "es"}'
  check "serve --shortlist 4 translates (HTTP $CODE)" [ "$CODE" = 200 ]
  serve_stop
  check "...and stops cleanly" [ $? -eq 0 ]
  SERVE_PID=""
else
  check "serve --shortlist 4 starts ($(tail -n 2 "$tmp/listed.err" 2> /dev/null | tr '\n' ' '))" false
fi
MODEL=$tmp/plain.pmt
timeout 60 "$projmt" serve --model "$MODEL" --port 0 --threads 1 --shortlist 4 > /dev/null 2> "$tmp/serve-none.err"
check "serve --shortlist on a model without one exits 1" [ $? -eq 1 ]
check "...saying why" grep -q "no vocabulary shortlist" "$tmp/serve-none.err"

# (Not under the sanitizer pass: Python cannot load an ASan-built library.)
libs=$(ldd "$build/libprojmt.so.0" 2> /dev/null)
if [ -e "$build/libprojmt.so.0" ] && [[ $libs != *libasan* ]]; then
  PYTHONPATH=python PROJMT_LIBRARY="$build/libprojmt.so.0" /usr/bin/python3 - "$tmp/listed.pmt" "$tmp/plain.pmt" \
    > "$tmp/py.out" 2>&1 <<'PY'
import sys
import projmt
listed, plain = sys.argv[1:]
with projmt.Translator(listed, threads=1, shortlist=4) as t:
    (r,) = t.translate_batch(["the cat sleeps"])
    assert len(r.hypotheses) == 1
    t.set_shortlist(0)
with projmt.Translator(plain, threads=1) as t:
    try:
        t.set_shortlist(4)
    except ValueError as e:
        assert "no vocabulary shortlist" in str(e), e
    else:
        raise AssertionError("set_shortlist on a model without one did not raise")
print("python ok")
PY
  check "Python: Translator(shortlist=K) and set_shortlist ($(tail -n 2 "$tmp/py.out" | tr '\n' ' '))" \
    grep -q "python ok" "$tmp/py.out"
fi
finish
