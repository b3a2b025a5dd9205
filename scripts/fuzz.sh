#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer targets (clang, ASan + UBSan) and runs each
# for a given time, one after another on one core.
#
#   bash scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#     SECONDS_PER_TARGET  default 60
#     TARGET              checkpoint corpus config metrics prepare translate request
#                         model_file (default: all)
#   FUZZ_MAX_LEN=N        longest input tried (default 1024 bytes; translate 256,
#                         since its model reads at most 12 tokens a line)
#
# Needs clang and its libFuzzer runtime (scripts/setup.sh --fuzz). Works in
# build-fuzz/ (ignored by git): the growing corpus is build-fuzz/corpus/<t>/
# (the committed seeds in tests/fuzz/seeds/<t>/ are read, never written).
# A crash, leak, hang (-timeout) or over-limit allocation (-malloc_limit_mb)
# is copied to tests/fuzz-regressions/<t>/, where ctest's fuzz_replay_<t>
# replays it in every build; fix it, then commit the file with the fix.
# Prints executions per target and writes them to build-fuzz/fuzz-summary.tsv.
# Exit status 1 when any target found something.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(checkpoint corpus config metrics prepare translate request model_file)
case $seconds in ''|*[!0-9]*) echo "fuzz.sh: SECONDS_PER_TARGET must be a whole number, got '$seconds'" >&2; exit 2 ;; esac

if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
    echo "fuzz.sh: clang is not installed; run scripts/setup.sh --fuzz" >&2
    exit 2
fi
build="$root/build-fuzz"
# OpenBLAS's pthread build: the OpenMP one is tied to libgomp, clang's
# OpenMP is libomp, and one process should not carry both runtimes.
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROJMT_FUZZ=ON \
    -DPROJMT_BLAS_THREADING=pthread -DPROJMT_MPI=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 --target "${targets[@]/#/fuzz_}" >/dev/null

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# libopenblas.so.0 resolves through Debian's alternatives, usually to the
# OpenMP (libgomp) build: load the pthread build so libomp is the only runtime.
export LD_LIBRARY_PATH="/usr/lib/$(gcc -print-multiarch)/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
summary="$build/fuzz-summary.tsv"
[ -f "$summary" ] || printf 'date\ttarget\tseconds\texecutions\texec_per_s\tcorpus\tresult\n' >"$summary"
found=0
for t in "${targets[@]}"; do
    corpus="$build/corpus/$t" artifacts="$build/artifacts/$t" log="$build/logs/$t.log"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    rc=0
    max_len=${FUZZ_MAX_LEN:-1024}
    [ "$t" != translate ] || max_len=${FUZZ_MAX_LEN:-256}
    "$build/fuzz_$t" "$corpus" "$root/tests/fuzz/seeds/$t" -max_total_time="$seconds" -timeout=10 -max_len="$max_len" \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    units=$(find "$corpus" -type f | wc -l)
    result=ok
    if [ $rc -ne 0 ]; then
        result="FOUND (exit $rc, log $log)"
        found=1
        mkdir -p "$root/tests/fuzz-regressions/$t"
        for a in "$artifacts"/*; do [ -f "$a" ] && cp "$a" "$root/tests/fuzz-regressions/$t/" && rm -f "$a"; done
        grep -m 3 -E "ERROR|SUMMARY|runtime error" "$log" >&2 || true
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$t" "$seconds" "${execs:-0}" "${rate:-0}" "$units" "$result" >>"$summary"
    printf 'fuzz %-10s %6ss  %10s executions (%s/s)  corpus %s  %s\n' "$t" "$seconds" "${execs:-0}" "${rate:-0}" "$units" "$result"
done
exit $found
