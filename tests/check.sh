# check.sh — the pass/fail bookkeeping the script tests share (sourced, not run).
#   check "description" command...  runs the command: a pass, or FAIL and a failure
#   ok / fail "message"             count one by hand
#   finish                          prints "N passed, M failed"; exits 1 on any failure, else 0
#   finish_skip "why"               as finish when a check failed; else also says "SKIPPED: why" and
#                                   exits 77 (ctest's skip): the part that needs what is missing did not run
#   run_script "VAR ..." SCRIPT [VAR=value ...] -- ARGS...
#                                   runs bash SCRIPT ARGS with the listed variables unset plus the
#                                   VAR=value words; sets $out (stdout), $err (stderr), $status
#   cpu_has_bf16 PROJMT             true when the CPU, as oneDNN sees it (ONEDNN_MAX_CPU_ISA caps it), has
#                                   native bf16 dot products: `projmt --version` says so
passed=0 failed=0
ok() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
check() { local what=$1; shift; if "$@"; then ok; else fail "$what"; fi; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
finish_skip() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ] || exit 1
  echo "SKIPPED: $*"
  exit 77
}
run_script() {
  local unset_args=() envs=() v script=$2 err_file
  for v in $1; do unset_args+=(-u "$v"); done
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  err_file=$(mktemp)
  out=$(env "${unset_args[@]}" "${envs[@]}" bash "$script" "$@" 2> "$err_file")
  status=$?
  err=$(cat "$err_file")
  rm -f "$err_file"
}
cpu_has_bf16() { "$1" --version 2> /dev/null | grep -q "^CPU: .*bf16 dot products: yes"; }
