#!/usr/bin/env bash
# test_translate_signals.sh — SIGTERM and SIGINT during `projmt translate`
# leave the output already written whole: the batch in progress is finished
# and flushed, the output is exactly the first N lines of an uninterrupted
# run (no torn last line), stderr says after how many lines it stopped (N),
# and the exit status is 128 + signal.
#   - stream mode blocked on input: deterministic (the answers to the lines
#     sent are out, then the signal arrives while it waits for more);
#   - -i/-o batched mode: signals at 12 random moments (seeded delays) while
#     it works through 4000 lines.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
BUILD=${1:?usage: test_translate_signals.sh BUILD_DIR}
PROJMT=$BUILD/projmt
MAKER=$BUILD/test_translator
[ -x "$PROJMT" ] && [ -x "$MAKER" ] || { echo "SKIPPED: $PROJMT or $MAKER not built"; exit 77; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/projmt-sig-XXXXXX")
bg=""
trap '[ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null; rm -rf "$TMP"' EXIT
signum() { case $1 in INT) echo 2 ;; TERM) echo 15 ;; esac; }

"$MAKER" --make-checkpoint "$TMP/m.ckpt" > "$TMP/make.log" 2>&1 || { cat "$TMP/make.log"; echo "FAIL: making the checkpoint"; exit 1; }
MODEL=(--model "$TMP/m.ckpt" --threads 1 --beam 3 --n-best 3)
words=(the cat sleeps on sofa I like green tea where is station we are going home now children play in garden she reads a book)
RANDOM=7
for i in $(seq 4000); do
    n=$((RANDOM % 9 + 1)) line=""
    for _ in $(seq $n); do line+="${words[RANDOM % ${#words[@]}]} "; done
    echo "$line"
done > "$TMP/in.txt"
# References: uninterrupted runs with the same batch size (padding changes
# the last digit of some scores).
"$PROJMT" translate "${MODEL[@]}" --batch 16 -i "$TMP/in.txt" -o "$TMP/ref16.txt" 2> "$TMP/ref.err"
check "reference run exits 0" test $? -eq 0
check "reference has 3 n-best lines per input" test "$(wc -l < "$TMP/ref16.txt")" -eq 12000
head -n 5 "$TMP/in.txt" | "$PROJMT" translate "${MODEL[@]}" > "$TMP/ref1.txt" 2> "$TMP/ref.err"

# The output is whole: ends in a newline, equals the reference's first lines,
# and stderr names that many input lines (3 n-best lines each).
whole_prefix() {   # whole_prefix REFERENCE OUT ERR
    local ref=$1 out=$2 err=$3 lines stopped
    lines=$(wc -l < "$out")
    [ ! -s "$out" ] || [ "$(tail -c 1 "$out" | od -An -c | tr -d ' ')" = '\n' ] || return 1
    head -n "$lines" "$ref" | cmp -s - "$out" || return 1
    stopped=$(sed -n 's/.*stopped by SIG[A-Z]* after \([0-9]*\) lines; every output line is complete$/\1/p' "$err")
    [ -n "$stopped" ] && [ $((stopped * 3)) -eq "$lines" ]
}

# ---- stream mode, signal while waiting for input ----
for sig in INT TERM; do
    mkfifo "$TMP/fifo.$sig"
    "$PROJMT" translate "${MODEL[@]}" < "$TMP/fifo.$sig" > "$TMP/stream.$sig" 2> "$TMP/stream.$sig.err" &
    bg=$!
    exec 3> "$TMP/fifo.$sig"
    head -n 5 "$TMP/in.txt" >&3
    for _ in $(seq 600); do [ "$(wc -l < "$TMP/stream.$sig")" -ge 15 ] && break; sleep 0.05; done
    kill -s "$sig" "$bg" 2>/dev/null
    exec 3>&-   # end of input too: a translate that ignored the signal ends (and fails the checks)
    wait "$bg"
    status=$?
    bg=""
    check "stream SIG$sig: exit status $status is 128 + $(signum $sig)" test $status -eq $((128 + $(signum $sig)))
    check "stream SIG$sig: the 5 answered lines are whole ($(grep stopped "$TMP/stream.$sig.err"))" \
        whole_prefix "$TMP/ref1.txt" "$TMP/stream.$sig" "$TMP/stream.$sig.err"
    check "stream SIG$sig: 5 lines reported" grep -q "after 5 lines" "$TMP/stream.$sig.err"
done

# ---- batched file mode, signals at random moments ----
RANDOM=11
for trial in $(seq 12); do
    sig=$([ $((trial % 2)) -eq 0 ] && echo INT || echo TERM)
    out="$TMP/batch.$trial" err="$TMP/batch.$trial.err"
    "$PROJMT" translate "${MODEL[@]}" --batch 16 -i "$TMP/in.txt" -o "$out" 2> "$err" &
    bg=$!
    sleep "0.$((RANDOM % 9 + 1))"
    kill -s "$sig" "$bg" 2>/dev/null
    wait "$bg"
    status=$?
    bg=""
    if [ $status -eq 0 ]; then   # finished before the signal: whole by definition
        check "trial $trial finished: output equals the reference" cmp -s "$out" "$TMP/ref16.txt"
        continue
    fi
    check "trial $trial SIG$sig: exit status $status is 128 + $(signum $sig)" test $status -eq $((128 + $(signum $sig)))
    check "trial $trial SIG$sig: output is a whole prefix ($(wc -l < "$out") lines; $(grep stopped "$err"))" whole_prefix "$TMP/ref16.txt" "$out" "$err"
done

finish
