#!/usr/bin/env bash
# test_dist_mpi.sh — the MPI layer under `mpirun -np 2`: test_dist_grad's
# collective checks and the 2-rank gradient == whole-batch gradient check on
# both ranks; then a rank that dies (SIGKILL) or aborts while the other waits
# in an all-reduce must end the job promptly, non-zero, with a message.
# $1 = build dir. SKIPPED (77) without mpirun or an MPI build.
set -u
build_dir=${1:?usage: test_dist_mpi.sh BUILD_DIR}
source "$(dirname "$0")/dist_common.sh"
dist_require "$build_dir"

out=$(dist_mpirun 2 "$build_dir/test_dist_grad" 2>&1)
status=$?
[ $status -eq 0 ] && pass || fail "2-rank test_dist_grad exited $status"
for r in 0 1; do
    if grep -Eq "^rank $r of 2: [0-9]+ passed, 0 failed$" <<<"$out"; then pass; else fail "rank $r did not pass all checks"; fi
    n=$(grep -Ec "^rank $r of 2: .* rel err " <<<"$out")
    [ "$n" -eq 2 ] && pass || fail "rank $r compared $n gradients, expected 2"
done
[ "$failed" -eq 0 ] || echo "$out" >&2
echo "$out" | grep "rel err"

# A dead rank: Open MPI's runtime notices the lost process and kills the job.
start=$(date +%s)
out=$(DIST_TIMEOUT=60 dist_mpirun 2 "$build_dir/test_dist_grad" --die 2>&1)
status=$?
took=$(( $(date +%s) - start ))
[ $status -ne 0 ] && [ $status -ne 124 ] && pass || fail "job with a killed rank exited $status (124 = hung until timeout)"
[ $took -lt 30 ] && pass || fail "job with a killed rank took ${took}s to stop"
if grep -q "rank 1 .* exited on signal 9" <<<"$out"; then pass; else fail "no message naming the killed rank:"; echo "$out" >&2; fi
if grep -q "all-reduce returned" <<<"$out"; then fail "rank 0 went on after rank 1 died"; else pass; fi

# A rank that gives up (pmt_dist_abort) stops every rank, with its reason.
out=$(DIST_TIMEOUT=60 dist_mpirun 2 "$build_dir/test_dist_grad" --abort 2>&1)
status=$?
[ $status -ne 0 ] && [ $status -ne 124 ] && pass || fail "aborted job exited $status"
if grep -q "projmt: rank 1 of 2: deliberate abort from the test" <<<"$out"; then pass; else fail "abort reason missing:"; echo "$out" >&2; fi

finish
