#!/usr/bin/env bash
# test_translate_cli.sh — `projmt translate` end to end on a tiny checkpoint
# (written by test_translator --make-checkpoint): stream mode is one output
# line per input line (empty line, invalid UTF-8 and an over-long line
# included) with a summary on stderr; it answers line by line inside a
# coprocess; --batch / -i / -o give the same translations; --n-best and
# --scores formats; missing, garbage and truncated model files fail cleanly.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
BUILD=${1:?usage: test_translate_cli.sh BUILD_DIR}
PROJMT=$BUILD/projmt
MAKER=$BUILD/test_translator
[ -x "$PROJMT" ] && [ -x "$MAKER" ] || { echo "SKIPPED: $PROJMT or $MAKER not built"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-cli-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

"$MAKER" --make-checkpoint "$TMP/m.ckpt" > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
MODEL=(--model "$TMP/m.ckpt")
LONG=$(for i in $(seq 80); do printf 'the children play '; done)

# ---- stream mode ----
printf 'the cat sleeps\n\nwhere \xff\xfe is the station\n%s\nshe reads a book\n' "$LONG" > "$TMP/in.txt"
"$PROJMT" translate "${MODEL[@]}" < "$TMP/in.txt" > "$TMP/out.txt" 2> "$TMP/err.txt"
check "stream exits 0" test $? -eq 0
check "one output line per input line" test "$(wc -l < "$TMP/out.txt")" -eq 5
check "empty line gives an empty line" test -z "$(sed -n 2p "$TMP/out.txt")"
check "non-empty lines translate to something" test -n "$(sed -n 1p "$TMP/out.txt")$(sed -n 5p "$TMP/out.txt")"
check "invalid UTF-8 warned" grep -q "line 3: 2 invalid UTF-8 byte(s) replaced by U+FFFD" "$TMP/err.txt"
check "over-long line warned" grep -q "line 4: .*truncated" "$TMP/err.txt"
check "summary on stderr" grep -Eq "5 sentences, .* s, .* sentences/s" "$TMP/err.txt"
check "output is valid UTF-8" iconv -f UTF-8 -t UTF-8 "$TMP/out.txt" -o /dev/null

# ---- coprocess: each answer arrives before the next question is sent ----
coproc TR { "$PROJMT" translate "${MODEL[@]}" 2> "$TMP/coproc.err"; }
answers=0
for q in "the cat sleeps" "" "I like green tea"; do
    printf '%s\n' "$q" >&"${TR[1]}"
    if IFS= read -r -t 30 reply <&"${TR[0]}"; then
        answers=$((answers + 1))
        [ -z "$q" ] && [ -n "$reply" ] && answers=-100
    fi
done
exec {TR[1]}>&-
wait "$TR_PID"
check "coprocess answered every line at once" test "$answers" -eq 3

# ---- batched file mode gives the same translations ----
"$PROJMT" translate "${MODEL[@]}" -i "$TMP/in.txt" -o "$TMP/out_file.txt" 2> /dev/null
check "-i/-o works" cmp -s "$TMP/out.txt" "$TMP/out_file.txt"
"$PROJMT" translate "${MODEL[@]}" --batch 2 < "$TMP/in.txt" > "$TMP/out_b2.txt" 2> /dev/null
check "--batch 2 same output" cmp -s "$TMP/out.txt" "$TMP/out_b2.txt"

# ---- formats ----
"$PROJMT" translate "${MODEL[@]}" --beam 3 --n-best 2 < "$TMP/in.txt" > "$TMP/nbest.txt" 2> /dev/null
check "n-best: 2 lines per non-empty input + 1 for the empty one" test "$(wc -l < "$TMP/nbest.txt")" -eq 9
check "n-best line format" test "$(grep -Evc '^[0-9]+ \|\|\| .* \|\|\| -?[0-9]+(\.[0-9]+)?$' "$TMP/nbest.txt")" -eq 0
check "n-best ids in input order" test "$(cut -d' ' -f1 "$TMP/nbest.txt" | uniq | tr '\n' ' ')" = "0 1 2 3 4 "
"$PROJMT" translate "${MODEL[@]}" --scores < "$TMP/in.txt" > "$TMP/scores.txt" 2> /dev/null
check "--scores appends the score" test "$(grep -Ec ' \|\|\| -?[0-9]+\.[0-9]+$' "$TMP/scores.txt")" -eq 5

# ---- bad model files ----
"$PROJMT" translate --model "$TMP/none.ckpt" < /dev/null > /dev/null 2> "$TMP/e1.txt"
rc=$?
check "missing model fails" test $rc -ne 0
check "missing model message names it" grep -q "none.ckpt" "$TMP/e1.txt"
printf 'not a checkpoint' > "$TMP/garbage.ckpt"
"$PROJMT" translate --model "$TMP/garbage.ckpt" < /dev/null > /dev/null 2> "$TMP/e2.txt"
check "garbage model fails" test $? -ne 0
check "garbage model message" grep -q "garbage.ckpt" "$TMP/e2.txt"
head -c 300 "$TMP/m.ckpt" > "$TMP/cut.ckpt"
"$PROJMT" translate --model "$TMP/cut.ckpt" < /dev/null > /dev/null 2> "$TMP/e3.txt"
check "truncated model fails" test $? -ne 0
"$PROJMT" translate < /dev/null > /dev/null 2> "$TMP/e4.txt"
check "no --model is a usage error" test $? -eq 2

finish
