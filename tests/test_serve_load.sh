#!/usr/bin/env bash
# test_serve_load.sh — a small, bounded load test of `projmt serve` on a tiny
# checkpoint: 10 concurrent keep-alive clients x 10 requests
# (scripts/serve_load.py) with 0 errors, 0 lost answers and every answer
# equal to `projmt translate -i` on the same lines; /metrics accounts for
# every sentence in its batch-size histogram. Speed is not asserted (the
# full 50 x 20 measurement is scripts/bench_serve.sh).
set -u
BUILD=${1:?usage: test_serve_load.sh BUILD_DIR}
PROJMT=$BUILD/projmt
[ -x "$PROJMT" ] && [ -x "$BUILD/test_translator" ] || { echo "SKIPPED: $PROJMT or test_translator not built"; exit 77; }
command -v python3 > /dev/null || { echo "SKIPPED: python3 is not installed"; exit 77; }
HERE=$(dirname "$0")
source "$HERE/serve_fixture.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-serve-load-XXXXXX")
SERVE_PID=""
trap '[ -n "$SERVE_PID" ] && kill -TERM "$SERVE_PID" 2> /dev/null; rm -rf "$TMP"' EXIT

serve_make_model "$BUILD" "$TMP" || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
MODEL=$TMP/m.ckpt
for s in "the cat sleeps" "she reads a book" "where is the station" "I like green tea" "we are going home now" \
         "the children play in the garden" "the cat reads" "where is the garden" "she likes tea" "we play"; do
    echo "$s"
done > "$TMP/lines.txt"
for _ in $(seq 10); do cat "$TMP/lines.txt"; done > "$TMP/load.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 -i "$TMP/load.txt" -o "$TMP/expected.txt" 2> /dev/null \
    || { echo "FAIL: projmt translate"; exit 1; }
serve_start load --max-batch 16 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$HERE/../scripts/serve_load.py" --url "http://127.0.0.1:$PORT" --sentences "$TMP/load.txt" \
    --expected "$TMP/expected.txt" --clients 10 --requests 10 | tee "$TMP/load.log"
status=${PIPESTATUS[0]}
summary=$(tail -n 1 "$TMP/load.log")
serve_stop
rc=$?
SERVE_PID=""
fail=0
[ "$status" -eq 0 ] || { echo "FAIL: errors, lost answers or answers different from translate"; fail=1; }
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if (d["answered"], d["errors"], d["lost"], d["mismatches"]) == (100, 0, 0, 0) else 1)' "$summary" \
    || { echo "FAIL: expected 100 answers, 0 errors, 0 lost, 0 mismatches: $summary"; fail=1; }
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if d["batches"] >= 1 and d["batched_sentences"] == 100 else 1)' "$summary" \
    || { echo "FAIL: the batch-size histogram does not account for the 100 sentences: $summary"; fail=1; }
[ "$rc" -eq 0 ] || { echo "FAIL: the server exited with $rc"; fail=1; }
[ $fail -eq 0 ] && echo "ok: 100 requests from 10 clients, all answered and equal to translate"
exit $fail
