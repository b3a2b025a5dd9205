#!/usr/bin/env bash
# test.sh — the README's test command: set up, build, run every test, then the
# unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
#   bash scripts/test.sh            everything
#   bash scripts/test.sh --quick    skip the sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

bash scripts/setup.sh --all

cmake -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure

if [ "${1:-}" != "--quick" ]; then
  echo "== unit tests under ASan + UBSan =="
  cmake -B build-asan -S . -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPROJMT_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -L unit
fi
