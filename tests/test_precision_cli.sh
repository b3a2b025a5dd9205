#!/usr/bin/env bash
# test_precision_cli.sh — --precision from the command line:
#   - a CPU without native bf16 (oneDNN limited to AVX-512 without bf16 by
#     its own ONEDNN_MAX_CPU_ISA, so this runs on any x86 CPU): `train` and
#     `bench` with bf16 stop with exit 1 and a message naming avx512_bf16,
#     and nothing is trained; fp32 runs as usual under the same limit;
#   - bad values are refused with exit 2 (an unknown precision, a precision
#     listed twice in --precisions);
#   - where the CPU has avx512_bf16: `train --precision bf16` trains and
#     logs its precision, `translate` loads its checkpoint, and `bench --precisions fp32,bf16` runs each mode in both
#     and prints the tokens/s ratio, the bf16 peaks with and without
#     conversion, the step's phases and the products' share of the peak;
#   - the default precision, auto: bf16 exactly where the CPU has native
#     bf16 (both sides of the ISA cap), said on train's start line, and the
#     checkpoint records the resolved precision;
#   - bench's site codes (sss ... ppp) set the three sites.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=${1:?usage: test_precision_cli.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-precision-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
"$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$tmp/data" \
  --valid-size 20 --test-size 20 --vocab-size 100 > "$tmp/prepare.log" 2>&1 ||
  { cat "$tmp/prepare.log"; echo "FAIL: prepare"; exit 1; }
common=(--config configs/tiny.ini --data-dir "$tmp/data" --threads 1 --max-steps 3 --epochs 0 --valid-every 3
        --valid-bleu-sentences 0)
# The precision line of a checkpoint's stored config (its gzip stream).
stored_precision() { zcat "$1" > "$tmp/ckpt.raw" 2> /dev/null; grep -a -m 1 -o "^precision = [a-z0-9]*" "$tmp/ckpt.raw"; }
bench=(bench --config configs/tiny.ini --synthetic --data-dir "$tmp/none" --threads 1 --steps 1 --warmup 0)

# No native bf16 (as oneDNN sees the CPU): refused, clearly.
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$projmt" train "${common[@]}" --precision bf16 --save-dir "$tmp/nobf16" \
  > "$tmp/nobf16.log" 2>&1
status=$?
check "train --precision bf16 without avx512_bf16 exits 1 (status $status)" [ $status -eq 1 ]
check "the refusal names the feature and the way out" grep -q "avx512_bf16.*--precision fp32" "$tmp/nobf16.log"
check "nothing was trained" [ ! -e "$tmp/nobf16/last.ckpt" ]
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$projmt" "${bench[@]}" --modes standard --precisions fp32,bf16 > "$tmp/nobf16b.log" 2>&1
status=$?
check "bench with bf16 without avx512_bf16 exits 1 (status $status)" [ $status -eq 1 ]
check "bench names the feature" grep -q "avx512_bf16" "$tmp/nobf16b.log"
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$projmt" train "${common[@]}" --precision fp32 --save-dir "$tmp/fp32" \
  > "$tmp/fp32.log" 2>&1
check "fp32 trains under the same limit" [ -e "$tmp/fp32/last.ckpt" ]
ONEDNN_MAX_CPU_ISA=AVX512_CORE "$projmt" train "${common[@]}" --save-dir "$tmp/auto-capped" > "$tmp/auto-capped.log" 2>&1
check "auto without native bf16 trains in fp32 and says why" \
  grep -q "precision fp32 (auto: this CPU has no native bf16 dot products)" "$tmp/auto-capped.log"
check "...and its checkpoint records fp32" \
  [ "$(stored_precision "$tmp/auto-capped/last.ckpt")" = "precision = fp32" ]

# Site codes: one letter per site, in that order.
"$projmt" "${bench[@]}" --precision fp32 --modes sss,psp,ssp > "$tmp/sites.log" 2>&1
check "bench site codes set the sites" \
  [ "$(grep -cE "^(standard/standard/standard|projection/standard/projection|standard/standard/projection) " \
       "$tmp/sites.log")" -eq 3 ]
# A kernel or learned sigma names the mode only where a site uses projection.
"$projmt" "${bench[@]}" --precision fp32 --modes sss,pps --kernel epanechnikov --sigma learned > "$tmp/family.log" 2>&1
check "an all-standard mode carries no kernel name" grep -qE "^standard/standard/standard " "$tmp/family.log"
check "a projection mode names its kernel and learned sigma" \
  grep -qE "^projection/projection/standard\+learned-sigma\+epanechnikov\+euclidean " "$tmp/family.log"

# Bad values.
"$projmt" train "${common[@]}" --precision fp16 --save-dir "$tmp/bad" > "$tmp/bad.log" 2>&1
status=$?
check "--precision fp16 is refused with exit 2 (status $status)" [ $status -eq 2 ]
check "the message names the key" grep -q "precision" "$tmp/bad.log"
"$projmt" "${bench[@]}" --modes standard --precisions fp32,fp32 > "$tmp/twice.log" 2>&1
status=$?
check "--precisions fp32,fp32 is refused with exit 2 (status $status)" [ $status -eq 2 ]
check "the message says why" grep -q "listed twice" "$tmp/twice.log"

if cpu_has_bf16 "$projmt"; then
  "$projmt" train "${common[@]}" --precision bf16 --save-dir "$tmp/bf16" > "$tmp/bf16.log" 2>&1
  check "train --precision bf16 trains" [ -e "$tmp/bf16/last.ckpt" ]
  check "the log names the precision" grep -q "precision bf16" "$tmp/bf16.log"
  echo "hello" | "$projmt" translate --model "$tmp/bf16/last.ckpt" --threads 1 > "$tmp/out.txt" 2> "$tmp/tr.log"
  check "a bf16 checkpoint translates" [ -s "$tmp/out.txt" ]
  "$projmt" "${bench[@]}" --modes standard,projection --precisions fp32,bf16 --json > "$tmp/bench.log" 2>&1
  status=$?
  check "bench --precisions fp32,bf16 runs (status $status)" [ $status -eq 0 ]
  check "bench ran the bf16 mode" grep -q "^projection/projection/projection bf16 " "$tmp/bench.log"
  check "bench prints the ratio per mode" [ "$(grep -c "tokens/s ratio bf16 / fp32" "$tmp/bench.log")" -eq 2 ]
  check "bench JSON has the bf16 runs" grep -q '"mode":"standard/standard/standard bf16"' "$tmp/bench.log"
  check "bench prints both bf16 peaks" grep -q "GFLOP/s (with conversion), [0-9.]* GFLOP/s (operands already bf16)" \
    "$tmp/bench.log"
  check "bench splits the step into its phases" \
    grep -q "step time: GEMM [0-9.]*% | bf16 rounding [0-9.]*% | attention [0-9.]*% | LayerNorm [0-9.]*% | loss" \
    "$tmp/bench.log"
  check "bench gives the bf16 products' share of the bf16 peak" \
    grep -q "products alone: [0-9.]* GFLOP/s = [0-9.]*% of the bf16 (rounded operands) peak" "$tmp/bench.log"
  check "bench JSON has the peaks and the phases" \
    grep -q '"bf16_peak_rounded_gflops":[0-9.]*.*"phase_pct":{"gemm":[0-9.]*,"bf16_rounding"' "$tmp/bench.log"
  "$projmt" train "${common[@]}" --save-dir "$tmp/auto" > "$tmp/auto.log" 2>&1
  check "auto trains in bf16 here and says why" \
    grep -q "precision bf16 (auto: this CPU has native bf16 dot products)" "$tmp/auto.log"
  check "the checkpoint records bf16, not auto" \
    [ "$(stored_precision "$tmp/auto/last.ckpt")" = "precision = bf16" ]
  "$projmt" train --dump-config --config configs/tiny.ini > "$tmp/dump.ini" 2>&1
  check "auto is the default" grep -q "^precision = auto" "$tmp/dump.ini"
else
  finish_skip "this CPU ($("$projmt" --version | sed -n 's/^CPU: \([^ ]*\).*/\1/p')) has no native bf16: only the refusal was tested"
fi

finish
