#!/usr/bin/env bash
# test_eval_cli.sh — `projmt eval --hyp --ref` end to end: an identical pair
# scores 100.00 on both metrics, known partial scores print as computed by
# hand, --metrics selects, --json ends with one JSON object, and missing or
# misaligned files fail with a message naming the problem. $1 = build dir.
set -u
build_dir=${1:?usage: test_eval_cli.sh BUILD_DIR}
projmt="$build_dir/projmt"
work=$(mktemp -d "${TMPDIR:-/tmp}/projmt-eval-cli-XXXXXX")
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
# expect_line NAME TEXT PATTERN: some line of TEXT matches the extended regex PATTERN.
expect_line() {
    if grep -Eq -- "$3" <<<"$2"; then pass; else fail "$1: no line matching '$3' in:"; echo "$2" >&2; fi
}

printf '%s\n' "the cat sat on the mat." "¿Dónde está el baño?" "El tren sale a las 3.45, ¿verdad?" >"$work/ref.txt"
cp "$work/ref.txt" "$work/same.txt"

out=$("$projmt" eval --hyp "$work/same.txt" --ref "$work/ref.txt" 2>&1)
status=$?
[ $status -eq 0 ] && pass || fail "identical pair exited $status: $out"
expect_line "identical BLEU" "$out" '^BLEU\|nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:2\.3\.1-projmt = 100\.00 100\.0/100\.0/100\.0/100\.0 \(BP = 1\.000 ratio = 1\.000 hyp_len = 21 ref_len = 21\)$'
expect_line "identical chrF" "$out" '^chrF2\|nrefs:1\|case:mixed\|eff:yes\|nc:6\|nw:0\|space:no\|version:2\.3\.1-projmt = 100\.00$'

# Hand-computed (see test_metrics.c): a b c d e vs a b c x e -> (80*50*33.33*25)^(1/4) = 42.73.
printf 'a b c d e\n' >"$work/hyp1.txt"
printf 'a b c x e\n' >"$work/ref1.txt"
out=$("$projmt" eval --hyp "$work/hyp1.txt" --ref "$work/ref1.txt" --metrics bleu 2>&1)
expect_line "smoothed BLEU" "$out" '^BLEU\|.* = 42\.73 80\.0/50\.0/33\.3/25\.0 \(BP = 1\.000 ratio = 1\.000 hyp_len = 5 ref_len = 5\)$'
if grep -q chrF <<<"$out"; then fail "--metrics bleu still printed chrF: $out"; else pass; fi

# chrF of ab vs ac is exactly 25 (test_metrics.c); --json puts one object last.
printf 'ab\n' >"$work/hyp2.txt"
printf 'ac\n' >"$work/ref2.txt"
out=$("$projmt" eval --hyp "$work/hyp2.txt" --ref "$work/ref2.txt" --metrics chrf --json 2>&1)
expect_line "chrF value" "$out" '^chrF2\|.* = 25\.00$'
last=$(tail -n 1 <<<"$out")
expect_line "json last line" "$last" '^\{"sentences": 1, "chrf": \{"score": 25, "signature": "nrefs:1\|case:mixed\|eff:yes\|nc:6\|nw:0\|space:no\|version:2\.3\.1-projmt"\}\}$'

# Empty hypothesis lines: BLEU 0 with BP 0, no NaN.
printf '\n\n\n' >"$work/empty.txt"
out=$("$projmt" eval --hyp "$work/empty.txt" --ref "$work/ref.txt" --json 2>&1)
status=$?
[ $status -eq 0 ] && pass || fail "empty hypotheses exited $status: $out"
expect_line "empty BLEU" "$out" '^BLEU\|.* = 0\.00 0\.0/0\.0/0\.0/0\.0 \(BP = 0\.000 ratio = 0\.000 hyp_len = 0 ref_len = 21\)$'
if grep -qi nan <<<"$out"; then fail "NaN in output: $out"; else pass; fi

# Errors: missing file, misaligned files, missing option, unknown metric.
out=$("$projmt" eval --hyp "$work/nope.txt" --ref "$work/ref.txt" 2>&1)
status=$?
[ $status -ne 0 ] && pass || fail "missing hypothesis file exited 0"
expect_line "missing file message" "$out" "nope\.txt"

printf 'one\ntwo\n' >"$work/two.txt"
out=$("$projmt" eval --hyp "$work/two.txt" --ref "$work/ref.txt" 2>&1)
status=$?
[ $status -ne 0 ] && pass || fail "mismatched line counts exited 0"
expect_line "mismatch message" "$out" "two\.txt' has 2 lines but '.*ref\.txt' has 3"

out=$("$projmt" eval --hyp "$work/same.txt" 2>&1)
status=$?
[ $status -eq 2 ] && pass || fail "missing --ref exited $status"
expect_line "missing option message" "$out" "--ref"

out=$("$projmt" eval --hyp "$work/same.txt" --ref "$work/ref.txt" --metrics bleu,ter 2>&1)
status=$?
[ $status -eq 2 ] && pass || fail "unknown metric exited $status"
expect_line "unknown metric message" "$out" "'ter'"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
