# check.sh — the pass/fail bookkeeping the script tests share (sourced, not run).
#   check "description" command...  runs the command: a pass, or FAIL and a failure
#   ok / fail "message"             count one by hand
#   finish                          prints "N passed, M failed"; exits 1 on any failure, else 0
passed=0 failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else fail "$what"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
