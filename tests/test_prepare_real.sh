#!/usr/bin/env bash
# test_prepare_real.sh — `projmt prepare` on the real spa-eng corpus (found by
# scripts/get_data.sh --no-download: PROJMT_CORPUS, PROJMT_DATA_DIR, or
# ../shared/data next to the repository), into a temporary dir. Checks the
# manifest's counts and splits and the files. It prints how long prepare took
# but asserts no time: speed belongs to benchmarks, not tests.
# Skips (exit 77) when the corpus is not on this machine. In a sanitizer build
# (ASan makes SentencePiece training ~30x slower) it runs on every 6th line
# with a 2000-piece vocabulary: the point there is
# memory safety on real text, not speed.
# Usage: bash test_prepare_real.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=${1:?usage: test_prepare_real.sh <build-dir>}
src=${PROJMT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
corpus=$(bash "$src/scripts/get_data.sh" --no-download 2>/dev/null | tail -n 1) || corpus=""
if [ -z "$corpus" ] || [ ! -f "$corpus" ]; then
  echo "SKIPPED: spa-eng corpus not found (set PROJMT_DATA_DIR or PROJMT_CORPUS)"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-prepare-real-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
check() { if eval "$1"; then ok; else fail "$1 ($2)"; fi; }

vocab=8000
if grep -q '^PROJMT_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  awk 'NR % 6 == 1' "$corpus" > "$tmp/sample.txt"
  corpus="$tmp/sample.txt" vocab=2000
  echo "sanitizer build: using $(wc -l < "$corpus") lines, vocab $vocab"
fi

start=$(date +%s.%N)
"$build/projmt" prepare --corpus "$corpus" --data-dir "$tmp/data" --vocab-size $vocab \
  > "$tmp/summary.txt" 2> "$tmp/stderr.txt"
status=$?
seconds=$(echo "$(date +%s.%N) - $start" | bc 2>/dev/null || awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
cat "$tmp/summary.txt"
check '[ $status -eq 0 ]' "exit status $status: $(cat "$tmp/stderr.txt")"
check '[ ! -s "$tmp/stderr.txt" ]' "unexpected warnings: $(head -c 500 "$tmp/stderr.txt")"
manifest="$tmp/data/manifest.json"
check '[ -s "$manifest" ]' "no manifest"

# Pulls one integer out of the manifest: json_int '"valid": {"pairs": '
json_int() { grep -o -- "$1[0-9]*" "$manifest" | sed -n 1p | grep -o '[0-9]*$'; }
input_lines=$(wc -l < "$corpus")
check '[ "$(json_int "\"input_lines\": ")" = "$input_lines" ]' "input_lines should be $input_lines"
train=$(json_int '"train": {"pairs": ')
check '[ "$(json_int "\"valid\": {\"pairs\": ")" = 2000 ]' "valid pairs"
check '[ "$(json_int "\"test\": {\"pairs\": ")" = 2000 ]' "test pairs"
check '[ "$(wc -l < "$tmp/data/train.en")" = "$train" ] && [ "$(wc -l < "$tmp/data/train.es")" = "$train" ]' "train.en/es lines"
check '[ "$(json_int "\"vocab\": {\"size\": ")" = $vocab ]' "vocab size"
kept=$(json_int '"kept_pairs": ')
check '[ -n "$train" ] && [ "$kept" = $((train + 4000)) ]' "kept_pairs $kept = train + valid + test"
check '[ "$kept" -gt $((input_lines * 99 / 100)) ]' "only $kept of $input_lines pairs kept"
check 'grep -q "\"p99\": " "$manifest" && grep -q "\"unk_rate\"" "$manifest" && grep -q "\"coverage\": 0.9" "$manifest"' "stats fields"
for f in spm.model spm.vocab train.tok valid.tok test.tok valid.en valid.es test.en test.es; do
  check '[ -s "$tmp/data/$f" ]' "$f missing"
done
echo "prepare took ${seconds}s"
finish
