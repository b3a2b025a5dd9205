#!/usr/bin/env bash
# test.sh — the README's test command: set up, build, run every test, the unit
# and int8/bf16/export script tests again under each ONEDNN_MAX_CPU_ISA cap
# the CPU can emulate (scripts/isa_matrix.sh), the same with projmt's own
# kernels built for x86-64-v2 (build-v2/), the unit
# tests again with the OpenBLAS matrix-product backend (build-openblas/), then the
# unit and script tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (the script tests drive the ASan-built projmt). Open MPI's plugins leak at
# exit (LeakSanitizer reports their allocations, not ours), so the two MPI
# script tests run under ASan with leak detection off. The two real-corpus
# runs (test_prepare_real, test_train_real: 118k pairs, ~11 of the ~19 min
# the script tests take under ASan on 2 cores) run in the plain pass only;
# the made-up-corpus tests drive the same code under ASan. Last, each
# libFuzzer target (built with clang) runs for a few seconds.
#   bash scripts/test.sh            everything
#   bash scripts/test.sh --quick    skip the sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/setup.sh --all

cmake -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure

# The ISA matrix: the unit tests and the int8/bf16/export script tests again
# under each older instruction set oneDNN can be capped to on this CPU.
echo "== ISA matrix (ONEDNN_MAX_CPU_ISA caps) =="
bash scripts/isa_matrix.sh build

# The oldest CPU a portable package runs on (x86-64-v2: SSE4.2, no AVX):
# projmt's own kernels compiled for it (build-v2/), oneDNN capped to SSE4.1,
# the unit tests and the int8/bf16/export script tests, so the whole program
# runs as it would there. The portable .deb itself is test_install's.
echo "== x86-64-v2 build (-DPROJMT_MARCH=x86-64-v2), oneDNN capped to SSE41 =="
cmake -B build-v2 -S . -DCMAKE_BUILD_TYPE=Release -DPROJMT_MARCH=x86-64-v2 >/dev/null
cmake --build build-v2 -j"$jobs"
ONEDNN_MAX_CPU_ISA=SSE41 ctest --test-dir build-v2 --output-on-failure -L 'unit|isa'

# The other matrix-product backend (the default is oneDNN when installed):
# the unit tests, which hold the finite-difference, PyTorch-reference and
# bit-exact resume checks, built against OpenBLAS in their own build dir.
echo "== unit tests with -DPROJMT_GEMM=openblas =="
cmake -B build-openblas -S . -DCMAKE_BUILD_TYPE=Release -DPROJMT_GEMM=openblas >/dev/null
cmake --build build-openblas -j"$jobs"
ctest --test-dir build-openblas --output-on-failure -L unit

if [ "${1:-}" != "--quick" ]; then
  echo "== unit tests under ASan + UBSan =="
  cmake -B build-asan -S . -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROJMT_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -L unit
  echo "== script tests under ASan + UBSan =="
  mpi_tests='^test_dist_(mpi|train)$'
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -L script \
    -E "$mpi_tests|^test_(prepare|train)_real$"
  ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -L script -R "$mpi_tests"
  # The libFuzzer targets build with clang (Debian's 14), which refuses
  # some of what GCC accepts: a short run of each keeps that build and the
  # targets working (scripts/fuzz.sh longer, by hand, to search).
  echo "== fuzz targets (clang, ASan + UBSan), 5 s each =="
  bash scripts/fuzz.sh 5
fi
