#!/usr/bin/env bash
# isa_matrix.sh — the unit tests and the int8, bf16 and export script tests
# (ctest label "isa") again with oneDNN capped to each older instruction set
# this CPU can emulate (ONEDNN_MAX_CPU_ISA). Every feature check of projmt
# follows oneDNN's effective ISA (nn/gemm.h), so each pass behaves as the
# whole program would on a CPU with only that set: SSE4.1 and AVX (CPUs
# before AVX2: oneDNN's older kernels, the int8 split), AVX2 (no int8 dot
# products, no AVX-512), AVX-512 without VNNI, with VNNI, with bf16; the
# uncapped pass of scripts/test.sh is the native ISA (AMX where present).
# projmt's own kernels are compiled for the build's -DPROJMT_MARCH (native
# by default), so only oneDNN's side is capped.
# Prints one line per cap; exits 1 when a pass fails (its log is shown).
#   bash scripts/isa_matrix.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: isa_matrix.sh BUILD_DIR}
projmt=$build/projmt
isa_of() { ONEDNN_MAX_CPU_ISA=${1:-} "$projmt" --version | sed -n 's/^CPU: \([a-z0-9_]*\) .*/\1/p'; }
int8_path_of() {
  local version
  version=$(ONEDNN_MAX_CPU_ISA=${1:-} "$projmt" --version)
  if grep -q "^int8: .*split" <<< "$version"; then echo "split weights"; else echo "packed s8"; fi
}
native=$(isa_of "")
echo "ISA native: $native (int8: $(int8_path_of "")): the passes above"
status=0
for cap in SSE41 AVX AVX2 AVX512_CORE AVX512_CORE_VNNI AVX512_CORE_BF16; do
  want=$(echo "$cap" | tr 'A-Z' 'a-z')
  got=$(isa_of "$cap")
  # A cap above what the CPU has leaves oneDNN at its native ISA: that is
  # not the capped CPU, so it is said and skipped, never passed off as it.
  if [ "$got" != "$want" ]; then
    echo "ISA cap $cap: this CPU cannot run it (capped, oneDNN uses $got), skipped"
    continue
  fi
  if [ "$got" = "$native" ]; then
    echo "ISA cap $cap: the native ISA, tested above"
    continue
  fi
  log=$build/isa-$cap.log
  start=$(date +%s)
  if ONEDNN_MAX_CPU_ISA=$cap ctest --test-dir "$build" -L 'unit|isa' --output-on-failure > "$log" 2>&1; then
    result=passed
  else
    result=FAILED
    status=1
  fi
  summary=$(grep -E "tests passed" "$log" | tail -1)
  skipped=$(grep -c "(Skipped)" "$log" || true)
  echo "ISA cap $cap: effective $got, int8 $(int8_path_of "$cap"): $result: $summary, $skipped skipped ($(( $(date +%s) - start )) s)"
  if [ "$result" = FAILED ]; then
    grep -E "Failed|FAIL" "$log" || true
    echo "(full log: $log)"
  fi
done
exit $status
