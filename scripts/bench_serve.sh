#!/usr/bin/env bash
# bench_serve.sh — throughput of `projmt serve` under load against
# `projmt translate -i` on the same sentences (issue target: >= 70 %).
#
#   bash scripts/bench_serve.sh MODEL SENTENCES [CLIENTS] [REQUESTS]
#   env: THREADS (default 2), RUNS (alternating pairs, default 3), BUILD (default build),
#        MAX_BATCH (32), MAX_WAIT_MS (5)
#
# The first CLIENTS*REQUESTS lines of SENTENCES are translated by
# `translate -i` (batch 32; its own sentences/s, model loading excluded) and
# by the server, loaded by scripts/serve_load.py (CLIENTS keep-alive
# clients x REQUESTS one-sentence requests, checked against translate's
# output). Runs alternate; the medians are printed with the ratio.
set -euo pipefail
model=${1:?usage: bench_serve.sh MODEL SENTENCES [CLIENTS] [REQUESTS]}
sentences=${2:?usage: bench_serve.sh MODEL SENTENCES [CLIENTS] [REQUESTS]}
clients=${3:-50} requests=${4:-20}
threads=${THREADS:-2} runs=${RUNS:-3} build=${BUILD:-build}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-bench-serve-XXXXXX")
pid=""
trap '[ -n "$pid" ] && kill -TERM "$pid" 2> /dev/null; rm -rf "$tmp"' EXIT
n=$((clients * requests))
head -n "$n" "$sentences" > "$tmp/lines.txt"
[ "$(wc -l < "$tmp/lines.txt")" -eq "$n" ] || { echo "bench_serve: $sentences has fewer than $n lines" >&2; exit 1; }

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
: > "$tmp/translate.txt"; : > "$tmp/serve.txt"; : > "$tmp/load.jsonl"
for run in $(seq "$runs"); do
  "$build/projmt" translate --model "$model" --threads "$threads" -i "$tmp/lines.txt" -o "$tmp/expected.txt" \
    2> "$tmp/translate.log"
  sed -n 's/.* \([0-9.]*\) sentences\/s$/\1/p' "$tmp/translate.log" >> "$tmp/translate.txt"
  "$build/projmt" serve --model "$model" --port 0 --threads "$threads" --max-batch "${MAX_BATCH:-32}" \
    --max-wait-ms "${MAX_WAIT_MS:-5}" 2> "$tmp/serve.log" &
  pid=$!
  port=""
  while [ -z "$port" ]; do
    sleep 0.2
    kill -0 "$pid" || { cat "$tmp/serve.log"; exit 1; }
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$tmp/serve.log")
  done
  python3 "$here/serve_load.py" --url "http://127.0.0.1:$port" --sentences "$tmp/lines.txt" \
    --expected "$tmp/expected.txt" --clients "$clients" --requests "$requests" > "$tmp/load.log" || true
  tail -n 1 "$tmp/load.log" | tee -a "$tmp/load.jsonl"
  python3 -c 'import json, sys; print(json.loads(sys.argv[1])["sentences_per_second"])' "$(tail -n 1 "$tmp/load.log")" \
    >> "$tmp/serve.txt"
  kill -TERM "$pid"; wait "$pid"; pid=""
  echo "run $run: translate -i $(tail -n 1 "$tmp/translate.txt") sentences/s, serve $(tail -n 1 "$tmp/serve.txt") sentences/s"
done
t=$(median < "$tmp/translate.txt") s=$(median < "$tmp/serve.txt")
field() { python3 -c 'import json, sys; print(sorted(json.loads(l)[sys.argv[1]] for l in open(sys.argv[2]))[int(sys.argv[3]) // 2])' "$1" "$tmp/load.jsonl" "$runs"; }
echo
echo "| $clients clients x $requests requests, $threads threads, $runs runs (medians) | sentences/s |"
echo "|---|---|"
echo "| projmt translate -i (batch 32) | $t |"
echo "| projmt serve (max batch ${MAX_BATCH:-32}, max wait ${MAX_WAIT_MS:-5} ms) | $s |"
echo "| ratio serve / translate | $(awk -v s="$s" -v t="$t" 'BEGIN { printf "%.2f", s / t }') |"
echo "| serve p50 / p99 latency (ms) | $(field p50_ms) / $(field p99_ms) |"
echo "| serve mean batch size | $(field mean_batch) |"
echo "| errors / lost / mismatches (all runs) | $(python3 -c 'import json, sys; L = [json.loads(l) for l in open(sys.argv[1])]; print(" / ".join(str(sum(d[k] or 0 for d in L)) for k in ("errors", "lost", "mismatches")))' "$tmp/load.jsonl") |"
