#!/usr/bin/env bash
# test_shell_lint.sh — two shell mistakes that made tests flaky or unable to
# fail, checked over every tests/*.sh and scripts/*.sh.
#
# 1. No shell script under pipefail pipes into a reader
# that stops early (grep -q, grep -m, head): the reader's exit makes the
# writer die of SIGPIPE when it still has lines to write, and pipefail then
# fails the pipeline — at random, more often under load. That made
# test_get_data.sh fail under `ctest -j2` and pass alone. Use a here-string
# (grep -q PATTERN <<<"$text") or a command substitution instead.
# First shows the failure mode on a deterministic case, then checks every
# tests/*.sh and scripts/*.sh that sets pipefail.
#
# 2. No check reads $? after a command substitution on the same line
# (check "msg $(tail log)" [ $? -eq 0 ]): the words expand left to right, so
# $? is the substitution's status, not the tested command's, and the check
# cannot fail. Save the status first (rc=$?).
# Usage: bash test_shell_lint.sh <build-dir>   (the build is not used)
set -u
cd "${PROJMT_SOURCE_DIR:-$(dirname "$0")/..}" || exit 1
bad=0

# A writer that still has lines when grep -q has its match dies of SIGPIPE,
# and pipefail turns the match into status 141 (yes never stops writing).
status=$(bash -c 'set -o pipefail; yes match | grep -q match; echo $?')
if [ "$status" != "141" ]; then
  echo "FAIL: expected SIGPIPE status 141 from the demonstration pipeline, got $status"
  bad=1
fi

checked=0
for f in tests/*.sh scripts/*.sh; do
  [ "$f" = tests/test_shell_lint.sh ] && continue   # its demonstration pipeline is on purpose
  grep -q 'pipefail' "$f" || continue
  checked=$((checked + 1))
  # a pipe into grep with -q/-m (any letter group) or into head, outside comments
  hits=$(grep -nE '^[^#]*\|[[:space:]]*(grep[[:space:]]+(-[a-zA-Z]*[qm]|.*[[:space:]]-[a-zA-Z]*[qm])|head)\b' "$f")
  if [ -n "$hits" ]; then
    while IFS= read -r h; do echo "FAIL: $f:$h: pipe into an early-exiting reader under pipefail"; done <<<"$hits"
    bad=1
  fi
done
status_hits=$(grep -nE '^[^#]*\$\(.*\$\?' tests/*.sh scripts/*.sh | grep -v '^tests/test_shell_lint.sh:')
if [ -n "$status_hits" ]; then
  while IFS= read -r h; do echo "FAIL: $h: \$? read after a command substitution on the same line"; done <<<"$status_hits"
  bad=1
fi
[ "$checked" -gt 5 ] || { echo "FAIL: only $checked scripts with pipefail found"; bad=1; }
[ $bad -eq 0 ] && echo "ok: $checked scripts with pipefail have no pipe into grep -q/-m or head; no \$? after a substitution"
exit $bad
