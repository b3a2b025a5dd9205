#!/usr/bin/env bash
# tsan.sh — ThreadSanitizer pass over the unit tests, which run the OpenMP
# kernels (attention, layer norm, GEMM wrappers, loss, Adam) with 2 threads.
#
#   bash scripts/tsan.sh [ctest -R regex]
#
# Why clang: GCC's libgomp is not built with TSan, so every OpenMP barrier,
# reduction and task hand-off looks like a race (hundreds of false reports).
# clang uses LLVM's libomp, which loads Archer (libarcher.so) for programs
# built with -fsanitize=thread; Archer reports OpenMP's synchronisation to
# TSan through OMPT. OpenBLAS (pthread build, 1 thread) and SentencePiece are
# not instrumented and are ignored (ignore_noninstrumented_modules=1).
# Needs: scripts/setup.sh --fuzz (clang, libomp-dev with Archer).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-tsan"
command -v clang >/dev/null || { echo "tsan.sh: clang is not installed; run scripts/setup.sh --fuzz" >&2; exit 2; }
mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROJMT_TSAN=ON \
    -DPROJMT_BLAS_THREADING=pthread -DPROJMT_MPI=OFF >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 >"$build/build.log" 2>&1 || { tail -30 "$build/build.log" >&2; exit 1; }
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
# libopenblas.so.0 resolves through Debian's alternatives, usually to the OpenMP
# (libgomp) build: load the pthread build instead.
export LD_LIBRARY_PATH="/usr/lib/$(gcc -print-multiarch)/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
export ARCHER_OPTIONS="${ARCHER_OPTIONS:-verbose=1}"
# Self-check: a planted race must be reported and an OpenMP reduction must
# not, or this pass could be blind (no TSan) or noisy (no Archer).
cat > "$build/race_check.c" <<'C'
#include <stdio.h>
int main(void) {
    int racy = 0, reduced = 0;
#pragma omp parallel for
    for (int i = 0; i < 1000; i++) racy += i;       /* line 5: the planted race */
#pragma omp parallel for reduction(+ : reduced)
    for (int i = 0; i < 1000; i++) reduced += i;
    printf("%d %d\n", racy, reduced);
    return 0;
}
C
clang -fopenmp -fsanitize=thread -g "$build/race_check.c" -o "$build/race_check"
"$build/race_check" > "$build/race_check.log" 2>&1 || true
reported=$(grep -c "race_check.c:5" "$build/race_check.log" || true)
false_alarms=$(grep -c "race_check.c:7" "$build/race_check.log" || true)
if [ "$reported" -eq 0 ] || [ "$false_alarms" -ne 0 ]; then
    cat "$build/race_check.log" >&2
    echo "tsan.sh: the self-check failed: TSan/Archer do not see OpenMP as expected" >&2
    exit 1
fi
echo "tsan.sh: self-check ok (planted race reported, reduction not)"
ctest --test-dir "$build" -L unit --output-on-failure ${1:+-R "$1"}
