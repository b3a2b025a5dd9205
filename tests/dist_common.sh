# dist_common.sh — sourced by the tests/test_dist_*.sh scripts (not a test
# itself): the mpirun command line, the skip rules, and pass/fail counting.
#   dist_mpirun NP CMD...   runs CMD on NP ranks on this machine, ending it
#                           after $DIST_TIMEOUT seconds (default 300) so a
#                           hung rank fails the test instead of hanging it.
#   dist_require BUILD_DIR  exits 77 (SKIPPED) without mpirun or without an
#                           MPI build (test_dist_grad then sees 1 rank of 1).

passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }
skip() { echo "SKIPPED: $*"; exit 77; }

export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}

# --oversubscribe: more ranks than cores is how the tests run on 2 cores;
# --bind-to none: ranks move freely (binding 2 ranks x 1 thread is fine too,
# but a 1-rank run must not be pinned to one core).
dist_mpirun() {
    local np=$1
    shift
    local root_flag=()
    [ "$(id -u)" -eq 0 ] && root_flag=(--allow-run-as-root)
    timeout "${DIST_TIMEOUT:-300}" mpirun "${root_flag[@]}" --oversubscribe --bind-to none -np "$np" "$@"
}

dist_require() {
    command -v mpirun >/dev/null 2>&1 || skip "mpirun not found (install openmpi-bin)"
    [ -x "$1/test_dist_grad" ] || skip "$1/test_dist_grad not built"
    local out
    out=$(dist_mpirun 2 "$1/test_dist_grad" 2>&1)
    if ! grep -q "of 2" <<<"$out"; then
        grep -q "of 1" <<<"$out" && skip "projmt was built without MPI (PROJMT_MPI=OFF or no MPI found)"
        echo "$out" >&2
        skip "mpirun cannot start 2 ranks here"
    fi
}
