#!/usr/bin/env bash
# test_export_cli.sh — `projmt export` and `projmt average` end to end on a
# tiny checkpoint (written by test_translator --make-checkpoint): each
# weight type writes a file that translate accepts in place of the
# checkpoint (fp32: the same output); int8 is the smallest; bad usage exits
# 2, an unreadable checkpoint 1, a damaged export is refused by translate;
# average of one checkpoint with itself translates as the checkpoint;
# --last N --dir takes the newest step-<N>.ckpt files; --compute-type int8
# (bf16) decodes a checkpoint as its int8 (bf16) export does, fp32 decodes an
# int8 file from its widened weights, an unknown type exits 2.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
BUILD=${1:?usage: test_export_cli.sh BUILD_DIR}
PROJMT=$BUILD/projmt
MAKER=$BUILD/test_translator
[ -x "$PROJMT" ] && [ -x "$MAKER" ] || { echo "SKIPPED: $PROJMT or $MAKER not built"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-export-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

"$MAKER" --make-checkpoint "$TMP/m.ckpt" > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
printf 'the cat sleeps\nshe reads a book\nI like green tea\n' > "$TMP/in.txt"
"$PROJMT" translate --model "$TMP/m.ckpt" --scores < "$TMP/in.txt" > "$TMP/want.txt" 2> /dev/null
check "checkpoint translates" test "$(wc -l < "$TMP/want.txt")" -eq 3

for w in fp32 bf16 int8; do
    "$PROJMT" export --model "$TMP/m.ckpt" --out "$TMP/m.$w" --weights "$w" > "$TMP/export.$w.log" 2>&1
    check "export --weights $w exits 0" test $? -eq 0
    check "export $w reports the file" grep -q "wrote $TMP/m.$w: $w weights" "$TMP/export.$w.log"
    "$PROJMT" translate --model "$TMP/m.$w" --scores < "$TMP/in.txt" > "$TMP/got.$w.txt" 2> "$TMP/err.$w.txt"
    check "translate takes the $w file" test $? -eq 0 -a "$(wc -l < "$TMP/got.$w.txt")" -eq 3
done
check "fp32 export translates exactly as the checkpoint" cmp -s "$TMP/want.txt" "$TMP/got.fp32.txt"
size() { stat -c %s "$1"; }
check "int8 < bf16 < fp32 file" test "$(size "$TMP/m.int8")" -lt "$(size "$TMP/m.bf16")" -a \
    "$(size "$TMP/m.bf16")" -lt "$(size "$TMP/m.fp32")"
check "an export exports again" "$PROJMT" export --model "$TMP/m.fp32" --out "$TMP/again.int8" > /dev/null

# ---- --compute-type: a checkpoint decoded in int8/bf16 as its export is ----
"$PROJMT" translate --model "$TMP/m.int8" --compute-type int8 --scores < "$TMP/in.txt" > "$TMP/file.int8.txt" 2> /dev/null
"$PROJMT" translate --model "$TMP/m.ckpt" --compute-type int8 --scores < "$TMP/in.txt" > "$TMP/ct.int8.txt" 2> /dev/null
check "checkpoint with --compute-type int8 translates as the int8 export" cmp -s "$TMP/file.int8.txt" "$TMP/ct.int8.txt"
check "int8 scores differ from the checkpoint's (int8 really ran)" bash -c '! cmp -s "$1" "$2"' _ \
    "$TMP/want.txt" "$TMP/ct.int8.txt"
"$PROJMT" translate --model "$TMP/m.int8" --compute-type fp32 --scores < "$TMP/in.txt" > "$TMP/ct.fp32.txt" 2> /dev/null
check "int8 file with --compute-type fp32 translates" test $? -eq 0 -a "$(wc -l < "$TMP/ct.fp32.txt")" -eq 3
check "int8 file with --compute-type fp32 does not decode in int8" bash -c '! cmp -s "$1" "$2"' _ \
    "$TMP/file.int8.txt" "$TMP/ct.fp32.txt"
# auto: the file's int8 where the CPU has int8 dot products; else fp32 over the
# same weights, which int8 without them cannot beat (nn/gemm.h, docs/isa.md).
if grep -q "^int8: .*split" <<< "$("$PROJMT" --version)"; then
    check "auto decodes an int8 file in fp32 without int8 dot products" cmp -s "$TMP/ct.fp32.txt" "$TMP/got.int8.txt"
else
    check "auto decodes an int8 file in int8 with int8 dot products" cmp -s "$TMP/file.int8.txt" "$TMP/got.int8.txt"
fi
if cpu_has_bf16 "$PROJMT"; then
    "$PROJMT" translate --model "$TMP/m.ckpt" --compute-type bf16 --scores < "$TMP/in.txt" > "$TMP/ct.bf16.txt" 2> /dev/null
    check "checkpoint with --compute-type bf16 translates as the bf16 export" cmp -s "$TMP/got.bf16.txt" "$TMP/ct.bf16.txt"
else
    # No native bf16 here (or under an ONEDNN_MAX_CPU_ISA cap): refused, with the way out;
    # the bf16 file itself decodes in fp32 (its widened weights) and translates.
    "$PROJMT" translate --model "$TMP/m.ckpt" --compute-type bf16 < "$TMP/in.txt" > /dev/null 2> "$TMP/ct.nobf16.txt"
    check "--compute-type bf16 without native bf16 exits 1" test $? -eq 1
    check "the refusal names the feature and the way out" grep -q "avx512_bf16.*fp32" "$TMP/ct.nobf16.txt"
    "$PROJMT" translate --model "$TMP/m.bf16" < "$TMP/in.txt" > "$TMP/bf16file.txt" 2> /dev/null
    check "a bf16 file translates without native bf16" test $? -eq 0 -a "$(wc -l < "$TMP/bf16file.txt")" -eq 3
fi
"$PROJMT" translate --model "$TMP/m.ckpt" --compute-type fp16 < "$TMP/in.txt" > /dev/null 2> "$TMP/ct.bad.txt"
check "unknown compute type exits 2" test $? -eq 2
check "unknown compute type named" grep -q "fp16" "$TMP/ct.bad.txt"
"$PROJMT" bench --decode --model "$TMP/m.ckpt" --compute-type int8 --sentences 3 --data-dir "$TMP/nodata" \
    > "$TMP/ct.bench.txt" 2>&1
check "bench --decode takes --compute-type" test $? -eq 0
check "bench --decode --compute-type int8 decodes with int8 weights ($(head -c 300 "$TMP/ct.bench.txt"))" \
    grep -q "^decode .* (int8 weights): 3 synthetic sentences" "$TMP/ct.bench.txt"
check "bench --decode: four timed runs, each a positive sentences/s" \
    test "$(awk 'match($0, /[0-9.]+ sentences\/s/) && substr($0, RSTART) + 0 > 0 { n++ } END { print n + 0 }' "$TMP/ct.bench.txt")" -eq 4
"$PROJMT" bench --decode --model "$TMP/m.ckpt" --sentences 3 --data-dir "$TMP/nodata" > "$TMP/ct.bench32.txt" 2>&1
check "bench --decode of a checkpoint without --compute-type: fp32 weights" \
    grep -q "^decode .* (fp32 weights):" "$TMP/ct.bench32.txt"

"$PROJMT" export --model "$TMP/m.ckpt" --out "$TMP/x" --weights fp16 > /dev/null 2> "$TMP/bad.txt"
check "unknown weight type exits 2" test $? -eq 2
check "unknown weight type named" grep -q "fp16" "$TMP/bad.txt"
"$PROJMT" export --model "$TMP/m.ckpt" > /dev/null 2>&1
check "missing --out exits 2" test $? -eq 2
"$PROJMT" export --model "$TMP/none.ckpt" --out "$TMP/x" > /dev/null 2> "$TMP/missing.txt"
check "missing checkpoint exits 1" test $? -eq 1
check "missing checkpoint named" grep -q "none.ckpt" "$TMP/missing.txt"
check "nothing written for a failed export" test ! -e "$TMP/x" -a ! -e "$TMP/x.tmp"

# A damaged export: the gzip body cut in half.
head -c $(( $(size "$TMP/m.int8") / 2 )) "$TMP/m.int8" > "$TMP/cut.int8"
"$PROJMT" translate --model "$TMP/cut.int8" < "$TMP/in.txt" > /dev/null 2> "$TMP/cut.txt"
check "translate refuses a cut export" test $? -ne 0
check "the cut file is named" grep -q "cut.int8" "$TMP/cut.txt"

# ---- average ----
"$PROJMT" average --out "$TMP/avg.ckpt" "$TMP/m.ckpt" "$TMP/m.ckpt" > "$TMP/avg.log" 2>&1
check "average exits 0" test $? -eq 0
check "average reports its inputs" grep -q "the average of 2 checkpoint(s)" "$TMP/avg.log"
"$PROJMT" translate --model "$TMP/avg.ckpt" --scores < "$TMP/in.txt" > "$TMP/avg.txt" 2> /dev/null
check "average of a checkpoint with itself translates as it" cmp -s "$TMP/want.txt" "$TMP/avg.txt"
mkdir -p "$TMP/run"
for s in 100 300 1000; do cp "$TMP/m.ckpt" "$TMP/run/step-$s.ckpt"; done
"$PROJMT" average --out "$TMP/last2.ckpt" --last 2 --dir "$TMP/run" > "$TMP/last.log" 2>&1
check "--last 2 exits 0" test $? -eq 0
check "--last 2 takes the newest two" grep -q "step-300.ckpt, .*step-1000.ckpt" "$TMP/last.log"
"$PROJMT" average --out "$TMP/x.ckpt" --last 5 --dir "$TMP/run" > /dev/null 2> "$TMP/few.txt"
check "--last beyond the files exits 1" test $? -eq 1
check "--last beyond the files says --keep-last" grep -q "keep-last" "$TMP/few.txt"
"$PROJMT" average --out "$TMP/x.ckpt" > /dev/null 2>&1
check "average without inputs exits 2" test $? -eq 2
"$PROJMT" average --out "" "$TMP/m.ckpt" > /dev/null 2> "$TMP/empty.txt"
check "average --out \"\" exits 2" test $? -eq 2
check "the empty --out is named" grep -q -- "--out" "$TMP/empty.txt"
"$PROJMT" export --model "$TMP/m.ckpt" --out " $TMP/x" > /dev/null 2>&1
check "export --out with a leading space exits 2" test $? -eq 2

# bench --decode --json names the model as a JSON string, whatever its path
# (it printed the path raw, so a '"' broke the line).
mkdir -p "$TMP/data"
head -n 2 "$TMP/in.txt" > "$TMP/data/test.en"
cp "$TMP/m.int8" "$TMP/q\"uote.pmt"
"$PROJMT" bench --decode --model "$TMP/q\"uote.pmt" --data-dir "$TMP/data" --sentences 2 --json 2> /dev/null |
    tail -n 1 > "$TMP/decode.json"
check "bench --decode --json escapes the model path" /usr/bin/python3 -c \
    'import json, sys; assert json.load(open(sys.argv[1]))["decode"] == sys.argv[2]' "$TMP/decode.json" "$TMP/q\"uote.pmt"
finish
