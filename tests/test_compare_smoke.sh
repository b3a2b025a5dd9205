#!/usr/bin/env bash
# test_compare_smoke.sh — scripts/compare.sh end to end on a made-up corpus
# with a tiny config and a few steps per mode (standard, projection, a
# custom LABEL=--flags mode, and the pooling kernels boxcar, constant,
# epanechnikov plus the cosine metric): every mode folder has its train.tsv
# and eval JSON, the plots, attention pictures and report.md exist, the
# test sentences (samples, pictures) go to the git-ignored local.md only,
# report.md and summary.json carry the numbers of the TSVs and eval files
# and the exact command with no absolute path, a mode with an interrupted
# run resumes it, a second run reuses the finished runs instead of training
# again, --session-minutes stops a sitting with status 75 that the same
# command then continues, a study with per-mode step budgets says so, and a
# new mode joins a study cloned without its checkpoints.
# SKIPPED when /usr/bin/python3 has no matplotlib.
# Usage: bash test_compare_smoke.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=$(cd "${1:?usage: test_compare_smoke.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
if ! /usr/bin/python3 -c "import matplotlib, numpy" 2>/dev/null; then
  echo "SKIPPED: /usr/bin/python3 has no matplotlib/numpy (apt-get install python3-matplotlib)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
source "$here/study_fixture.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-compare-XXXXXX")
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT

make_tiny_data "$projmt" "$tmp" || { echo "FAIL: prepare"; exit 1; }
modes=(standard projection wide boxcar constant epanechnikov cosine)
# Modes one per line as well as several on a line: labels were once cut
# with their newline ("mode label '\nconstant'").
mode_list="standard; projection; wide=--d-model 32 --attention projection; boxcar;
constant;
  epanechnikov; cosine"
args=(--name smoke --root "$tmp/runs" --build "$build" --config "$tmp/tiny.ini" --data-dir "$tmp/data"
      --max-steps 4 --modes "$mode_list" --flores none --bleu-sentences 6 --beam-size 2 --bench-steps 1)
# An interrupted earlier sitting of one mode: 2 of its 4 steps are done.
mkdir -p "$tmp/runs/smoke/epanechnikov"
"$projmt" train --config "$tmp/tiny.ini" --attention projection --sigma fixed --kernel epanechnikov \
  --proj-metric euclidean --max-steps 2 --epochs 0 --minutes 0 --data-dir "$tmp/data" \
  --save-dir "$tmp/runs/smoke/epanechnikov/ckpt" > "$tmp/first-sitting.log" 2>&1
status=$?
check "first sitting of epanechnikov trained ($(tail -n 2 "$tmp/first-sitting.log" | tr '\n' ' '))" [ $status -eq 0 ]
bash "$here/../scripts/compare.sh" "${args[@]}" > "$tmp/compare.log" 2>&1
status=$?
check "compare.sh exits 0 (got $status: $(tail -n 3 "$tmp/compare.log" | tr '\n' ' '))" [ $status -eq 0 ]
study=$tmp/runs/smoke
report=$study/report.md

for mode in "${modes[@]}"; do
  for f in train.tsv train.log flags.txt done eval_valid.json eval_test.json eval_bleu_test.json; do
    check "$mode/$f written" [ -s "$study/$mode/$f" ]
  done
  check "$mode trained 4 steps" [ "$(awk -F'\t' '$1 == "train" { s = $2 } END { print s }' "$study/$mode/train.tsv")" = 4 ]
  check "$mode checkpoints stay in ckpt/" [ -f "$study/$mode/ckpt/last.ckpt" ]
  check "$mode has no checkpoint outside ckpt/" [ -z "$(find "$study/$mode" -maxdepth 1 -name '*.ckpt')" ]
  check "report has a speed and a quality row for $mode" [ "$(grep -c "^| $mode |" "$report")" -eq 2 ]
  final_loss=$(awk -F'\t' '$1 == "valid" { l = $4 } END { printf "%.4f", l }' "$study/$mode/train.tsv")
  check "report shows $mode's final valid loss $final_loss from train.tsv" \
    grep -q "^| $mode | 4 | [0-9.]* | $final_loss |" "$report"
  test_loss=$(grep -o '"loss": [0-9.]*' "$study/$mode/eval_test.json" | awk '{ printf "%.4f", $2 }')
  check "report shows $mode's test loss $test_loss" grep -q "^| $mode |.*| $test_loss |" "$report"
  bleu=$(grep -o '"bleu": {"score": [0-9.e+-]*' "$study/$mode/eval_bleu_test.json" | awk '{ printf "%.2f", $3 }')
  check "report shows $mode's test BLEU $bleu" grep -q "^| $mode |.*| $bleu |" "$report"
  params=$(grep -o '"params": [0-9]*' "$study/$mode/eval_test.json" | awk '{ print $2 }' | sed ':a; s/\B[0-9]\{3\}\>/,&/; ta')
  check "report shows $mode's $params parameters" grep -q "^| $mode | .* | $params |" "$report"
done
check "custom mode got its flags" grep -q -- "--d-model 32" "$study/wide/flags.txt"
# The report names the binary that trained (train.log's first line), not
# only the repository's commit when it was written.
commit=$("$projmt" --version | sed -n '1s/^projmt [^ ]* (commit \([^)]*\))$/\1/p')
check "projmt --version names a commit ($commit)" test -n "$commit"
check "train.log records the training binary's commit" grep -qF "(commit $commit), built for -march=" "$study/standard/train.log"
check "report.md says which commit trained" grep -qF "trained by projmt commit $commit; report written at projmt commit" "$report"
# Logs and evaluation files as committed name no folder of this machine:
# the study ran with absolute --root, --build, --config and --data-dir.
check "the study's logs and evaluation files name no absolute path" \
  bash -c '! grep -lE "(^|[[:space:]\"=(])/[[:alnum:]_.-]+/" "$@"' _ "$study"/*/train.log "$study"/*/eval_*.json
check "epanechnikov resumed its interrupted run" grep -q "resuming from .* at step 2" "$study/epanechnikov/train.log"
for kernel in boxcar constant epanechnikov; do
  check "$kernel mode trains the $kernel kernel" grep -q -- "--kernel $kernel" "$study/$kernel/flags.txt"
  check "$kernel attention dump names its kernel" \
    grep -q "\"kernel\": \"$kernel\"" "$study/$kernel/ckpt/attention-s1/attention.json"
done
check "cosine attention dump names its metric" grep -q '"metric": "cosine"' "$study/cosine/ckpt/attention-s1/attention.json"
# The study trains and benches in the default precision, auto: bf16 on a CPU
# with native bf16, and bench names a bf16 mode so.
suffix=""
if cpu_has_bf16 "$projmt"; then suffix=" bf16"; fi
check "bench ran the pooling modes" grep -q "\"mode\":\"projection/projection/projection+boxcar+euclidean$suffix\"" "$study/bench.json"

# summary.json: the numbers of the run folders, for every mode.
summary_check=$(/usr/bin/python3 - "$study" "${modes[@]}" <<'PY'
import csv, json, os, re, shlex, sys
study, modes = sys.argv[1], sys.argv[2:]
s = json.load(open(os.path.join(study, "summary.json")))
bad = []
def expect(cond, what):
    if not cond: bad.append(what)
expect([m["label"] for m in s["modes"]] == modes, "modes in order")
expect(s["budget"] == {"max_steps": 4.0}, f"budget {s['budget']}")
expect(s["reference_mode"] == "standard", "reference mode")
expect("--name smoke" in s["command"], "command")
# the study ran with absolute --root, --build, --config and --data-dir
text = open(os.path.join(study, "summary.json")).read()
expect(not re.search(r'(^|[\s"`(=])/[\w.-]+/', text), "no absolute path")
expect(s["config"].endswith("tiny.ini") and not s["config"].startswith("/"), "config relative to the repository")
by = {m["label"]: m for m in s["modes"]}
for label, m in by.items():
    folder = os.path.join(study, label)
    expect(set(m) == set(s["keys"]), f"{label}: keys documented")
    expect(m["steps"] == 4, f"{label}: steps {m['steps']}")
    rows = list(csv.DictReader(open(os.path.join(folder, "train.tsv")), delimiter="\t"))
    expect(abs(m["minutes"] - max(float(r["elapsed_s"]) for r in rows) / 60) < 1e-9, f"{label}: minutes")
    expect(m["flags"] == shlex.split(open(os.path.join(folder, "flags.txt")).read()), f"{label}: flags")
    test = json.loads(open(os.path.join(folder, "eval_test.json")).read())
    valid = json.loads(open(os.path.join(folder, "eval_valid.json")).read())
    bleu = json.loads(open(os.path.join(folder, "eval_bleu_test.json")).read())
    expect(m["parameters"] == test["params"], f"{label}: parameters")
    expect(m["valid_accuracy"] == valid["accuracy"], f"{label}: valid accuracy")
    expect(m["test_bleu"] == bleu["bleu"]["score"] and m["test_chrf"] == bleu["chrf"]["score"], f"{label}: BLEU/chrF")
    expect(m["test_sentences"] == 6 and m["beam_size"] == 2, f"{label}: BLEU scope")
    # A few steps can log 0.0 s (elapsed_s has 0.1 s resolution): no ratio then.
    ref_ms = by["standard"]["ms_per_step"]
    expect(m["step_time_ratio"] == (m["ms_per_step"] / ref_ms if ref_ms else None), f"{label}: step-time ratio")
    expect((m["bench_time_ratio"] is None) == (label == "wide"), f"{label}: bench ratio only for named modes")
expect(by["standard"]["bench_time_ratio"] == 1.0, "standard bench ratio 1")
# cosine adds one radius per head (NH = 2) at each of the 3 projection sites; boxcar and constant add nothing
expect(by["cosine"]["parameters"] - by["projection"]["parameters"] == 6, "cosine parameters")
expect(by["boxcar"]["parameters"] == by["projection"]["parameters"] == by["constant"]["parameters"], "kernel parameters")
print("ok" if not bad else "; ".join(bad))
PY
)
check "summary.json matches the run folders ($summary_check)" [ "$summary_check" = ok ]
check "bench.json for the named modes" grep -q "\"mode\":\"projection/projection/projection$suffix\"" "$study/bench.json"
speed_row=$(grep -m 1 "^| projection |" "$report")
check "bench ratio in the report ($speed_row)" grep -q '^ [0-9]*\.[0-9]\{3\} $' <<< "$(cut -d'|' -f13 <<< "$speed_row")"
check "translation speed in the report" grep -q '^ [0-9.,]* (beam 2) $' <<< "$(cut -d'|' -f14 <<< "$speed_row")"
check "no bench for the custom mode" grep -q '^ — $' <<< "$(grep -m 1 "^| wide |" "$report" | cut -d'|' -f13)"
for name in accuracy loss valid_time; do
  for fmt in png svg; do check "plot $name.$fmt" [ -s "$study/plots/$name.$fmt" ]; done
done
for k in 1 2 3; do
  for site in encoder_self decoder_self decoder_cross cross_mean; do
    check "attention picture s${k}_$site.png" [ -s "$study/attention/s${k}_$site.png" ]
  done
done
check "report links the plots" grep -q "(plots/accuracy.png)" "$report"
local_md=$study/local.md
check "local.md links the attention pictures" grep -q "(attention/s1_cross_mean.png)" "$local_md"
check "report.md does not (they quote the test split)" bash -c '! grep -q "attention/" "$1"' _ "$report"
check "report records the command" grep -qF -- "--name smoke" "$report"
check "command.txt written" grep -qF -- "--max-steps 4" "$study/command.txt"
check "report names the machine" grep -q "cores (nproc)" "$report"
# Files are named relative to the repository: the study ran with absolute
# --root, --build, --config and --data-dir, none of which may show.
no_absolute_paths() { ! grep -nE '(^|[[:space:]`(=])/[[:alnum:]_.-]+/' "$1"; }
check "report names no absolute path" no_absolute_paths "$report"
check "report names the config relative to the repository" \
  grep -qF "Config: \`$(realpath --relative-to="$here/.." "$tmp/tiny.ini")\`" "$report"
check "local.md has 5 samples" [ "$(grep -c '^[0-9]\. \*\*source:\*\*' "$local_md")" -eq 5 ]
check "samples show every mode" [ "$(grep -c '^   \*\*wide:\*\*' "$local_md")" -eq 5 ]
check "report.md has no test sentence" bash -c '! grep -q "source:" "$1"' _ "$report"
check "git ignores local.md" git -C "$here/.." check-ignore -q eval/runs/x/local.md
check "...and the attention pictures" git -C "$here/.." check-ignore -q eval/runs/x/attention/s1_cross_mean.png

# Second run: nothing is retrained; the report is written again.
before=$(md5sum "$study/standard/train.tsv")
bash "$here/../scripts/compare.sh" "${args[@]}" > "$tmp/again.log" 2>&1
status=$?   # saved first: a $(...) in check's arguments would reset $?
check "second run exits 0 ($(tail -n 2 "$tmp/again.log" | tr '\n' ' '))" [ $status -eq 0 ]
check "second run reuses finished runs" [ "$(grep -c 'finished run in' "$tmp/again.log")" -eq ${#modes[@]} ]
check "train.tsv untouched" [ "$before" = "$(md5sum "$study/standard/train.tsv")" ]

# A sitting that ends before its mode finishes: status 75, nothing marked
# done; the same command without the limit then finishes the study.
sitting=(--name sitting --root "$tmp/runs" --build "$build" --config "$tmp/tiny.ini" --data-dir "$tmp/data"
         --max-steps 4 --modes dot --flores none --bleu-sentences 0 --bench-steps 0)
bash "$here/../scripts/compare.sh" "${sitting[@]}" --session-minutes 0.0001 > "$tmp/sitting.log" 2>&1
status=$?
check "a used-up sitting exits 75 (got $status)" [ $status -eq 75 ]
check "...saying how to go on" grep -q "run the same command again" "$tmp/sitting.log"
check "...with the mode not done" [ ! -f "$tmp/runs/sitting/dot/done" ]
bash "$here/../scripts/compare.sh" "${sitting[@]}" > "$tmp/sitting2.log" 2>&1
status=$?
check "the next sitting finishes ($(tail -n 2 "$tmp/sitting2.log" | tr '\n' ' '))" [ $status -eq 0 ]
check "...the mode" [ -f "$tmp/runs/sitting/dot/done" ]
check "...and writes its summary.json" [ -s "$tmp/runs/sitting/summary.json" ]

# Per-mode step budgets (equal wall-clock time set from quiet step times;
# steps that train.tsv logs, log_every 2):
# each mode stops at its own --max-steps, and report.md and summary.json say
# so, with the budget note, instead of claiming one budget for every mode.
own=(--name own --root "$tmp/runs" --build "$build" --config "$tmp/tiny.ini" --data-dir "$tmp/data"
     --modes "fast=--attention projection --max-steps 4 --epochs 0 --minutes 0; slow=--attention standard --max-steps 2 --epochs 0 --minutes 0"
     --budget-note "Steps worth 1 minute at each mode's quiet speed." --flores none --bleu-sentences 4 --bench-steps 0)
bash "$here/../scripts/compare.sh" "${own[@]}" > "$tmp/own.log" 2>&1
status=$?
check "a study with per-mode step budgets runs ($(tail -n 2 "$tmp/own.log" | tr '\n' ' '))" [ $status -eq 0 ]
for pair in fast:4 slow:2; do
  check "${pair%:*} trained its own ${pair#*:} steps" \
    [ "$(awk -F'\t' '$1 == "train" { s = $2 } END { print s }' "$tmp/runs/own/${pair%:*}/train.tsv")" = "${pair#*:}" ]
done
own_budget=$(/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(json.dumps(s["budget"], sort_keys=True), s["budget_note"])' \
  "$tmp/runs/own/summary.json" 2>&1)
check "summary.json gives each mode's budget and the note ($own_budget)" \
  [ "$own_budget" = '{"max_steps_per_mode": {"fast": 4, "slow": 2}} Steps worth 1 minute at each mode'"'"'s quiet speed.' ]
check "report.md names each mode's step budget" grep -qF 'each mode has its own step budget (`--max-steps` in its flags: fast 4, slow 2). Steps worth 1 minute' "$tmp/runs/own/report.md"
check "...and does not claim one budget for all" bash -c '! grep -q "budget for every mode" "$1"' _ "$tmp/runs/own/report.md"
# Equal-time budgets and test BLEU: the speed/quality front (fast is the
# reference, the first mode; slow's budget is half, so its steps take twice as long).
check "report.md has the front" grep -qF '## Speed and quality at equal time' "$tmp/runs/own/report.md"
check "...with each mode's step time from the budgets" grep -qE '^\| slow \| 2\.000 \| -100\.0 % \|' "$tmp/runs/own/report.md"
for fmt in png svg; do check "plots/front.$fmt written" [ -s "$tmp/runs/own/plots/front.$fmt" ]; done
own_front=$(/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(" ".join("%s:%s:%s" % (m["label"], m["budget_time_ratio"], m["on_front"]) for m in s["modes"]))' \
  "$tmp/runs/own/summary.json" 2>&1)
check "summary.json has the budget time ratios ($own_front)" [ "${own_front% *}" = "fast:1.0:True" ]
check "the common-budget study says its budget" grep -qF 'Same seed, data order and budget (`--max-steps 4`) for every mode.' "$report"

# A committed study on a fresh clone: results without checkpoints (never
# committed). A new mode joins it; the finished modes keep their results and
# their attention column comes from train.log.
mkdir -p "$tmp/clone"
tar -C "$tmp/runs" --exclude=ckpt -cf - own | tar -C "$tmp/clone" -xf -
cloned=(--name own --root "$tmp/clone" --build "$build" --config "$tmp/tiny.ini" --data-dir "$tmp/data"
        --modes "fast=--attention projection --max-steps 4 --epochs 0 --minutes 0; slow=--attention standard --max-steps 2 --epochs 0 --minutes 0; late=--attention projection --kernel boxcar --max-steps 2 --epochs 0 --minutes 0"
        --flores none --bleu-sentences 0 --bench-steps 0)
before=$(md5sum < "$tmp/clone/own/fast/train.tsv")
check "the clone has no checkpoint" [ -z "$(find "$tmp/clone" -name '*.ckpt')" ]
bash "$here/../scripts/compare.sh" "${cloned[@]}" > "$tmp/clone.log" 2>&1
status=$?
check "a new mode joins a cloned study ($(tail -n 2 "$tmp/clone.log" | tr '\n' ' '))" [ $status -eq 0 ]
check "...keeping the finished modes' results" [ "$(grep -c 'no checkpoint in .*; keeping its results' "$tmp/clone.log")" -eq 2 ]
check "...without retraining them" [ "$before" = "$(md5sum < "$tmp/clone/own/fast/train.tsv")" ]
check "...training the new one" [ -f "$tmp/clone/own/late/done" ]
check "report attention of a cloned standard mode, from train.log" grep -q '^| slow | std / std / std |' "$tmp/clone/own/report.md"
check "...and of a cloned projection mode" grep -q '^| fast | proj / proj / proj |' "$tmp/clone/own/report.md"
check "...and of the new boxcar mode" grep -q '^| late | proj / proj / proj, boxcar/euclidean |' "$tmp/clone/own/report.md"
rm "$tmp/clone/own/slow/eval_test.json"
bash "$here/../scripts/compare.sh" "${cloned[@]}" > "$tmp/clone2.log" 2>&1
status=$?
check "a cloned mode missing its results and checkpoint fails (status $status)" [ $status -ne 0 ]
check "...saying to retrain it" grep -q "slow: no checkpoint in .* and no .*eval_test.json; retrain it with --force" "$tmp/clone2.log"

# projmt bench takes every named mode of compare.sh in one run (it used to
# stop silently after 8), and refuses more than it can hold.
named=standard,projection,proj-self,proj-cross,learned,boxcar,constant,epanechnikov,diagonal,cosine,dot
"$projmt" bench --config "$tmp/tiny.ini" --synthetic --steps 1 --warmup 0 --json --modes "$named" > "$tmp/bench11.log" 2>&1
check "bench runs all 11 named modes" [ "$(grep -o '"mode":' "$tmp/bench11.log" | wc -l)" -eq 11 ]
"$projmt" bench --config "$tmp/tiny.ini" --synthetic --steps 1 --warmup 0 --modes "$named,$named" > "$tmp/bench22.log" 2>&1
status=$? refused=0
[ $status -eq 2 ] && grep -q "at most 16 modes" "$tmp/bench22.log" && refused=1
check "bench refuses 22 modes, naming its limit (status $status)" [ $refused -eq 1 ]

bash "$here/../scripts/compare.sh" --name bad --root "$tmp/runs" --build "$build" --modes "nonsense" \
  --data-dir "$tmp/data" > "$tmp/bad.log" 2>&1
check "unknown mode fails" [ $? -ne 0 ]
check "...naming it" grep -q "unknown mode 'nonsense'" "$tmp/bad.log"

finish
