#!/usr/bin/env bash
# test_translate_pipe.sh — `projmt translate` in a pipe decodes the lines
# already waiting together, with the outputs of one-line-at-a-time
# translation (--batch 1), greedy and beam, in input order: long lines
# (several reads), CRLF, an empty line, invalid UTF-8, a NUL byte and no
# final newline included. A slow writer (a coprocess that waits for each
# answer, lines arriving one or three at a time) gets every answer before it
# sends more. Results are the same for --threads 1 and 2 (scores included).
# SIGTERM while a pipe is being translated leaves a whole prefix. The
# progress line of -i appears on a terminal (under script(1)) and never when
# stderr is a file.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
BUILD=${1:?usage: test_translate_pipe.sh BUILD_DIR}
PROJMT=$BUILD/projmt
MAKER=$BUILD/test_translator
[ -x "$PROJMT" ] && [ -x "$MAKER" ] || { echo "SKIPPED: $PROJMT or $MAKER not built"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-pipe-XXXXXX")
bg=""
trap '[ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT

"$MAKER" --make-checkpoint "$TMP/m.ckpt" > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
MODEL=(--model "$TMP/m.ckpt")
words=(the cat sleeps on sofa I like green tea where is station we are going home now children play in garden she reads a book)
RANDOM=5
{
    for i in $(seq 300); do
        n=$((RANDOM % 9 + 1)) line=""
        for _ in $(seq $n); do line+="${words[RANDOM % ${#words[@]}]} "; done
        case $((i % 50)) in
            7) printf '%s\r\n' "$line" ;;                                 # CRLF
            8) printf '\n' ;;                                             # empty
            9) printf 'where \xff\xfe is %s\n' "$line" ;;                 # invalid UTF-8
            10) printf 'the cat\0sleeps %s\n' "$line" ;;                  # NUL byte
            11) for _ in $(seq 12000); do printf 'the children play '; done; printf '\n' ;;   # 216 kB: several reads
            *) printf '%s\n' "$line" ;;
        esac
    done
    printf 'she reads a book'                                             # no final newline
} > "$TMP/in.txt"
N=301

for beam in 1 4; do
    "$PROJMT" translate "${MODEL[@]}" --beam "$beam" --batch 1 < "$TMP/in.txt" > "$TMP/one.$beam" 2> "$TMP/one.$beam.err"
    check "beam $beam: one-at-a-time run exits 0" test $? -eq 0
    check "beam $beam: one output line per input line" test "$(wc -l < "$TMP/one.$beam")" -eq $N
    cat "$TMP/in.txt" | "$PROJMT" translate "${MODEL[@]}" --beam "$beam" > "$TMP/pipe.$beam" 2> "$TMP/pipe.$beam.err"
    check "beam $beam: pipe run exits 0" test $? -eq 0
    check "beam $beam: pipe output equals one-at-a-time" cmp -s "$TMP/one.$beam" "$TMP/pipe.$beam"
    check "beam $beam: same warnings (invalid UTF-8, truncation)" cmp -s <(grep warning "$TMP/one.$beam.err") <(grep warning "$TMP/pipe.$beam.err")
    "$PROJMT" translate "${MODEL[@]}" --beam "$beam" -i "$TMP/in.txt" -o "$TMP/file.$beam" 2> /dev/null
    check "beam $beam: -i/-o output equals one-at-a-time" cmp -s "$TMP/one.$beam" "$TMP/file.$beam"
done
check "CRLF line translated like its LF form" test "$(sed -n 7p "$TMP/one.1")" = "$(sed -n 7p "$TMP/in.txt" | tr -d '\r' | "$PROJMT" translate "${MODEL[@]}" 2>/dev/null)"
check "empty line gives an empty line" test -z "$(sed -n 8p "$TMP/pipe.1")"
check "invalid UTF-8 warned" grep -q "line 9: 2 invalid UTF-8 byte(s) replaced by U+FFFD" "$TMP/pipe.1.err"
check "NUL byte reported as invalid UTF-8" grep -q "line 10: 1 invalid UTF-8 byte(s)" "$TMP/pipe.1.err"
check "216 kB line truncated with a warning" grep -q "line 11: .*truncated" "$TMP/pipe.1.err"
check "unterminated last line translated" test -n "$(tail -n 1 "$TMP/pipe.1")"

# Same bits for any thread count: lanes do not depend on it.
"$PROJMT" translate "${MODEL[@]}" --beam 4 --n-best 4 --threads 1 < "$TMP/in.txt" > "$TMP/t1" 2> /dev/null
"$PROJMT" translate "${MODEL[@]}" --beam 4 --n-best 4 --threads 2 < "$TMP/in.txt" > "$TMP/t2" 2> /dev/null
check "--threads 1 and 2 give the same n-best lists and scores" cmp -s "$TMP/t1" "$TMP/t2"
check "n-best lists are there" test "$(wc -l < "$TMP/t1")" -gt $N

# ---- slow writer: each answer arrives before the next line is sent ----
head -n 6 "$TMP/in.txt" > "$TMP/slow.txt"
coproc TR { "$PROJMT" translate "${MODEL[@]}" --beam 4 2> "$TMP/coproc.err"; }
answered=0 line_no=0
send_and_read() {   # send_and_read COUNT: sends the next COUNT lines at once, reads COUNT answers
    local k reply want
    for k in $(seq "$1"); do sed -n "$((line_no + k))p" "$TMP/slow.txt" >&"${TR[1]}"; done
    for k in $(seq "$1"); do
        line_no=$((line_no + 1))
        want=$(sed -n "${line_no}p" "$TMP/one.4")
        if IFS= read -r -t 60 reply <&"${TR[0]}" && [ "$reply" = "$want" ]; then answered=$((answered + 1)); fi
    done
}
send_and_read 1
send_and_read 3
send_and_read 1
send_and_read 1
exec {TR[1]}>&-
wait "$TR_PID"
check "coprocess: every line answered, right content and order, before the next was sent ($answered of 6)" test "$answered" -eq 6

# ---- SIGTERM while a pipe is being translated: a whole prefix ----
for i in $(seq 20); do cat "$TMP/in.txt"; echo; done | grep -av 'children play the children' > "$TMP/big.txt"
"$PROJMT" translate "${MODEL[@]}" --beam 4 --batch 1 < "$TMP/big.txt" > "$TMP/big.ref" 2> /dev/null
mkfifo "$TMP/fifo"
"$PROJMT" translate "${MODEL[@]}" --beam 4 < "$TMP/fifo" > "$TMP/sig.out" 2> "$TMP/sig.err" &
bg=$!
exec 3> "$TMP/fifo"
cat "$TMP/big.txt" >&3 &
writer=$!
for _ in $(seq 600); do [ "$(wc -l < "$TMP/sig.out")" -ge 64 ] && break; sleep 0.05; done
kill -s TERM "$bg" 2>/dev/null
wait "$bg"
status=$?
bg=""
exec 3>&-
kill "$writer" 2>/dev/null
wait "$writer" 2>/dev/null
lines=$(wc -l < "$TMP/sig.out")
stopped=$(sed -n 's/.*stopped by SIGTERM after \([0-9]*\) lines; every output line is complete$/\1/p' "$TMP/sig.err")
if [ $status -eq 0 ]; then
    check "pipe finished before SIGTERM: output equals the reference" cmp -s "$TMP/sig.out" "$TMP/big.ref"
else
    check "pipe SIGTERM: exit status $status is 143" test $status -eq 143
    check "pipe SIGTERM: output ($lines lines) is a whole prefix of the reference" cmp -s "$TMP/sig.out" <(head -n "$lines" "$TMP/big.ref")
    check "pipe SIGTERM: ends in a newline" test "$(tail -c 1 "$TMP/sig.out" | od -An -c | tr -d ' ')" = '\n'
    check "pipe SIGTERM: stderr names the $lines lines" test "${stopped:-x}" = "$lines"
fi

# ---- progress line: only on a terminal ----
"$PROJMT" translate "${MODEL[@]}" -i "$TMP/big.txt" -o "$TMP/prog.out" 2> "$TMP/prog.err"
check "no progress when stderr is a file (no CR, no ETA)" test "$(grep -c $'\r\|ETA' "$TMP/prog.err")" -eq 0
check "summary still printed" grep -q "sentences/s" "$TMP/prog.err"
if command -v script > /dev/null; then
    script -qec "'$PROJMT' translate --model '$TMP/m.ckpt' -i '$TMP/big.txt' -o '$TMP/prog2.out'" /dev/null > "$TMP/pty.log" 2>&1
    total=$(wc -l < "$TMP/big.txt")
    check "progress on a terminal: done/total, sentences/s and ETA" grep -Eq "[0-9]+/$total sentences \([0-9]+%\), [0-9.]+ sentences/s, ETA [0-9]+:[0-9]{2}" "$TMP/pty.log"
    check "progress line cleared at the end" grep -q $'\r\033\\[K''projmt translate: ' "$TMP/pty.log"
    check "progress run output equals the file run" cmp -s "$TMP/prog.out" "$TMP/prog2.out"
else
    echo "note: script(1) not installed; the terminal half of the progress check is skipped"
fi

finish
