#!/usr/bin/env bash
# test_lowp_cli.sh — int8 decoding from the command line and the server, on
# this CPU as oneDNN sees it (scripts/test.sh runs it again under each
# ONEDNN_MAX_CPU_ISA cap): `--version` names the CPU; an int8 export
# translates the same (text and scores) when oneDNN wants another weights
# layout per row count or builds no packed primitive (the PROJMT_TEST_LOWP
# hook of nn/gemm.h stands in for Intel AMX machines); PROJMT_VERBOSE says
# which int8 path runs; when a product fails outright, `translate` and
# `eval` exit 1 with a message naming oneDNN and the way out, and `serve`
# answers that request 500 and translates the next one; /info and
# `bench --decode` name the CPU.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
command -v curl > /dev/null || { echo "SKIPPED: curl is not installed (apt-get install curl)"; exit 77; }
source "$(dirname "$0")/serve_fixture.sh"
serve_setup lowp "${1:?usage: test_lowp_cli.sh BUILD_DIR}"

isa=$("$PROJMT" --version | sed -n 's/^CPU: \([a-z0-9_]*\) .*/\1/p')
check "--version names the CPU (oneDNN's effective ISA: '$isa')" test -n "$isa"
check "--version names the int8 path" grep -q "^int8: oneDNN s8 matmul" <("$PROJMT" --version)
"$PROJMT" export --model "$MODEL" --out "$TMP/m.int8" --weights int8 > /dev/null 2>&1
check "int8 export" test -s "$TMP/m.int8"

SHORT="the cat sleeps"
LONG="the cat sleeps on the green mat while she reads a book about the station"
printf '%s\n' "$SHORT" "she reads a book" "$LONG" > "$TMP/in.txt"
printf '%s\n' "el gato duerme" "ella lee un libro" "el gato duerme en la estera" > "$TMP/ref.txt"
# --compute-type int8: the int8 products whatever the CPU (auto takes fp32
# where int8 dot products are missing: test_export_cli.sh).
I8=(--compute-type int8)
"$PROJMT" translate --model "$TMP/m.int8" "${I8[@]}" --threads 1 --scores < "$TMP/in.txt" > "$TMP/want.txt" 2> /dev/null
check "int8 file translates" test "$(wc -l < "$TMP/want.txt")" -eq 3

PROJMT_VERBOSE=1 PROJMT_TEST_LOWP=no-packed:1 "$PROJMT" translate --model "$TMP/m.int8" --compute-type int8 \
    --threads 1 < "$TMP/in.txt" > /dev/null 2> "$TMP/fallback.err"
check "PROJMT_VERBOSE counts the products that fell back to the one-call GEMM" \
    grep -q "^projmt translate: [1-9][0-9]* int8 products ran the one-call GEMM" "$TMP/fallback.err"

# The exact fallbacks: the same integers, so the same text and scores.
for hook in relayout:8 relayout:1 no-packed:8 no-packed:1; do
    PROJMT_TEST_LOWP=$hook "$PROJMT" translate --model "$TMP/m.int8" "${I8[@]}" --threads 1 --scores < "$TMP/in.txt" \
        > "$TMP/hook.txt" 2> "$TMP/hook.err"
    check "PROJMT_TEST_LOWP=$hook: exit 0" test $? -eq 0
    check "PROJMT_TEST_LOWP=$hook: same translations and scores" cmp -s "$TMP/want.txt" "$TMP/hook.txt"
done

PROJMT_VERBOSE=1 "$PROJMT" translate --model "$TMP/m.int8" "${I8[@]}" --threads 1 < "$TMP/in.txt" > /dev/null 2> "$TMP/verbose.err"
check "PROJMT_VERBOSE names the compute type and the CPU" grep -q "^projmt translate: compute type int8 on $isa (int8: " \
    "$TMP/verbose.err"
check "... once" test "$(grep -c "compute type" "$TMP/verbose.err")" -eq 1
PROJMT_VERBOSE=1 "$PROJMT" translate --model "$TMP/m.int8" --threads 1 < "$TMP/in.txt" > /dev/null 2> "$TMP/auto.err"
if grep -q "^int8: .*split" <<< "$("$PROJMT" --version)"; then auto=fp32; else auto=int8; fi
check "auto on $isa: compute type $auto" grep -q "^projmt translate: compute type $auto on $isa" "$TMP/auto.err"
"$PROJMT" translate --model "$TMP/m.int8" --threads 1 < "$TMP/in.txt" > /dev/null 2> "$TMP/quiet.err"
check "without PROJMT_VERBOSE nothing is said" test "$(grep -c "compute type" "$TMP/quiet.err")" -eq 0

# A product oneDNN cannot run (as an int8 primitive on a CPU that refuses its shape).
PROJMT_TEST_LOWP=fail:1 "$PROJMT" translate --model "$TMP/m.int8" "${I8[@]}" --threads 1 -i "$TMP/in.txt" -o "$TMP/fail.txt" \
    2> "$TMP/fail.err"
check "translate with failing products exits 1" test $? -eq 1
check "translate says oneDNN failed, on which CPU, and the way out" \
    grep -q "^projmt translate: .*oneDNN cannot run the int8 product .* ($isa); --compute-type fp32 avoids it" "$TMP/fail.err"
PROJMT_TEST_LOWP=fail:1 "$PROJMT" translate --model "$TMP/m.int8" --threads 1 --compute-type fp32 < "$TMP/in.txt" \
    > "$TMP/fp32.txt" 2> /dev/null
check "... and --compute-type fp32 does avoid it" test $? -eq 0 -a "$(wc -l < "$TMP/fp32.txt")" -eq 3
PROJMT_TEST_LOWP=fail:1 "$PROJMT" eval --model "$TMP/m.int8" "${I8[@]}" --src "$TMP/in.txt" --ref "$TMP/ref.txt" \
    > "$TMP/eval.out" 2> "$TMP/eval.err"
check "eval with failing products exits 1" test $? -eq 1
check "eval says why" grep -q "oneDNN cannot run the int8 product" "$TMP/eval.err"

"$PROJMT" bench --decode --model "$TMP/m.int8" "${I8[@]}" --sentences 3 --data-dir "$TMP/nodata" > "$TMP/bench.txt" 2>&1
check "bench --decode names the CPU" grep -q "^projmt bench --decode: CPU $isa " "$TMP/bench.txt"
check "bench --decode names the int8 path" grep -q ": compute type int8 on $isa (int8: oneDNN s8 matmul" "$TMP/bench.txt"

# The server: products of 12 rows or more fail (the long line's encoder pass:
# 11 tokens + EOS); that request gets 500, and the next one is translated.
MODEL=$TMP/m.int8
PROJMT_VERBOSE=1 PROJMT_TEST_LOWP=fail:12 serve_start lowp "${I8[@]}" || { echo "FAIL: the server did not start"; exit 1; }
JSON=(-H 'Content-Type: application/json')
req GET /info
check "/info names the CPU" test "$(jget "$TMP/body" "d['cpu_isa']")" = "$isa"
check "/info names the compute type" grep -q "compute type int8 on $isa" <(jget "$TMP/body" "d['compute']")
check "PROJMT_VERBOSE: serve says it too" grep -q "^projmt serve: compute type int8 on $isa" "$TMP/lowp.err"
req POST /translate "${JSON[@]}" -d "{\"q\": \"$LONG\", \"source\": \"en\", \"target\": \"es\"}"
check "a request whose products fail: 500 ($CODE)" test "$CODE" = 500
check "... with the reason" test "$(jget "$TMP/body" "'oneDNN cannot' in d['error']")" = True
req POST /translate "${JSON[@]}" -d "{\"q\": \"$SHORT\", \"source\": \"en\", \"target\": \"es\"}"
check "the next request: 200 ($CODE)" test "$CODE" = 200
"$PROJMT" translate --model "$TMP/m.int8" "${I8[@]}" --threads 1 <<< "$SHORT" > "$TMP/short.txt" 2> /dev/null
check "... translated as translate does" test "$(jget "$TMP/body" "d['translatedText']")" = "$(cat "$TMP/short.txt")"
req GET /health
check "the server is healthy after the failure" test "$CODE" = 200
serve_stop
check "the server stops cleanly (status $?)" test $? -eq 0

finish
