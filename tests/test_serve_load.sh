#!/usr/bin/env bash
# test_serve_load.sh — a small, bounded load test of `projmt serve` on a tiny
# checkpoint: 10 concurrent keep-alive clients x 10 requests
# (scripts/serve_load.py) with 0 errors, 0 lost answers and every answer
# equal to `projmt translate -i` on the same lines; /metrics accounts for
# every sentence in its batch-size histogram. The batch limit (4) is below
# the number of clients, so sentences wait behind full batches while others
# arrive (a queue whose tail was lost there once hung every client). Speed is
# not asserted (the full 50 x 20 measurement is scripts/bench_serve.sh); the
# clients' 120 s timeout only turns a hang into errors.
set -u
HERE=$(dirname "$0")
source "$HERE/serve_fixture.sh"
serve_setup serve-load "${1:?usage: test_serve_load.sh BUILD_DIR}"
for s in "the cat sleeps" "she reads a book" "where is the station" "I like green tea" "we are going home now" \
         "the children play in the garden" "the cat reads" "where is the garden" "she likes tea" "we play"; do
    echo "$s"
done > "$TMP/lines.txt"
for _ in $(seq 10); do cat "$TMP/lines.txt"; done > "$TMP/load.txt"
"$PROJMT" translate --model "$MODEL" --threads 1 -i "$TMP/load.txt" -o "$TMP/expected.txt" 2> /dev/null \
    || { echo "FAIL: projmt translate"; exit 1; }
serve_start load --max-batch 4 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$HERE/../scripts/serve_load.py" --url "http://127.0.0.1:$PORT" --sentences "$TMP/load.txt" \
    --expected "$TMP/expected.txt" --clients 10 --requests 10 --timeout 120 | tee "$TMP/load.log"
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

# SIGTERM under a continuous load of keep-alive clients: the server answers
# what it has received and exits 0 (with the lost queue tail above, its
# drain never ended); every answer a client did get is right.
serve_start drain --max-batch 4 || { echo "FAIL: the server did not start"; exit 1; }
python3 "$HERE/../scripts/serve_load.py" --url "http://127.0.0.1:$PORT" --sentences "$TMP/load.txt" \
    --expected "$TMP/expected.txt" --clients 10 --requests 1000000 --timeout 120 --until-refused > "$TMP/drain.log" 2>&1 &
load_pid=$!
for _ in $(seq 600); do   # until the load is under way
    n=$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "projmt_sentences_total" { print $2 }')
    [ "${n:-0}" -ge 50 ] && break
    sleep 0.1
done
kill -TERM "$SERVE_PID"
for _ in $(seq 600); do kill -0 "$SERVE_PID" 2> /dev/null || break; sleep 0.1; done
if kill -0 "$SERVE_PID" 2> /dev/null; then
    echo "FAIL: the server did not exit after SIGTERM under load"
    kill -KILL "$SERVE_PID"
    fail=1
fi
wait "$SERVE_PID"
rc=$?
SERVE_PID=""
wait "$load_pid"
[ "$rc" -eq 0 ] || { echo "FAIL: the server exited with $rc after SIGTERM under load"; fail=1; }
grep -q "stopped" "$TMP/drain.err" || { echo "FAIL: no 'stopped' line after SIGTERM under load"; fail=1; }
python3 -c 'import json, sys; d = json.loads(sys.argv[1]); sys.exit(0 if d["mismatches"] == 0 and d["answered"] - d["errors"] >= 50 else 1)' \
    "$(tail -n 1 "$TMP/drain.log")" || { echo "FAIL: wrong answers around SIGTERM: $(tail -n 1 "$TMP/drain.log")"; fail=1; }
[ $fail -eq 0 ] && echo "ok: 100 requests from 10 clients, all answered and equal to translate; SIGTERM under load drained and exited"
exit $fail
