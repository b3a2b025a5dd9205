#!/usr/bin/env bash
# compare.sh — the attention study: trains several attention configurations
# one after the other with the same seed, data order and budget, evaluates
# them, measures their speed, and writes plots and report.md.
#
#   bash scripts/compare.sh --name NAME [--epochs N | --minutes M | --max-steps K]
#        [--config FILE] [--modes "standard projection ..."] [--mode 'LABEL=--flag value ...']
#        [--data-dir D] [--root DIR] [--build DIR] [--flores PREFIX|none]
#        [--beam-size N] [--bleu-sentences N|all] [--bench-steps N] [--force]
#        [--session-minutes M] [--budget-note TEXT]
#
# Modes: standard, projection (all three sites), proj-self (projection in both
# self-attentions, standard cross), proj-cross (projection cross-attention
# only), learned (projection with learned sigma); the pooling family at all
# three sites with fixed sigma: boxcar, constant, epanechnikov (kernels, see
# --kernel), diagonal, cosine, dot (gaussian kernel with that --proj-metric);
# or LABEL=--flag value ... (train flags over the config). --modes separates
# entries by spaces, or by ';' when the list contains one:
# --modes "standard; wide=--d-model 512".
#
# Budget: every mode gets the same --epochs, --minutes (of training, summed
# over sessions) or --max-steps, with the same seed and so the same data
# order. --session-minutes M ends this invocation after about M minutes of
# training: the running mode is stopped as by Ctrl-C (its last.ckpt saved),
# compare.sh exits with status 75, and the same command (without --force)
# continues exactly where it stopped — how a long study is split over
# several sittings.
#
# --bleu-sentences N translates only the first N test sentences for BLEU/chrF
# (0: no translation at all — no BLEU, chrF, FLORES or samples); --bench-steps 0
# skips `projmt bench`. Without --flores, FLORES-200 dev is looked for in
# $PROJMT_FLORES, $PROJMT_DATA_DIR/flores200-dev, data/flores200-dev and
# ../shared/data/flores200-dev next to the repository (scripts/flores.sh).
#
# Per-mode budgets: give each mode its own `--max-steps N --epochs 0 --minutes 0`
# in LABEL=--flags and no common budget, e.g. steps worth the same minutes at
# each mode's quiet step time (`projmt bench`), so that other load on the
# machine cannot change what is compared; --budget-note TEXT says so in
# report.md and summary.json.
#
# Output in ROOT/NAME/ (ROOT defaults to eval/runs):
#   report.md, summary.json (per mode: flags, budget, minutes, steps, test
#   BLEU/chrF, valid accuracy, step-time ratio, parameters; see make_report.py),
#   command.txt, bench.json, plots/*.{png,svg}, attention/*.{png,svg}
#   <mode>/train.tsv, train.log, flags.txt, eval_*.json, done
#   <mode>/ckpt/  checkpoints, translations, attention dumps (not committed)
#   ckpt/         inputs cut from the corpus (not committed)
# Resumable: a mode whose folder has `done` is not retrained (nor, when its
# results exist, re-evaluated) unless --force; an interrupted run resumes
# from its last.ckpt. A finished mode without checkpoints (a study cloned from
# the repository) keeps its results, so new modes can join a committed study.
set -euo pipefail
# Paths given on the command line are relative to the current folder; the
# defaults to the repository.
repo=$(cd "$(dirname "$0")/.." && pwd)

command_line="bash scripts/compare.sh$(printf ' %q' "$@")"
name="" config=$repo/configs/base.ini data_dir=$repo/data/spa-eng root=$repo/eval/runs build=$repo/build
flores=auto beam_size=4 bleu_sentences=all bench_steps=10 force=0 session_minutes="" budget_note=""
budget=() mode_specs=()

die() { echo "compare.sh: $*" >&2; exit 1; }
usage() { sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; }

set_budget() {
  [ ${#budget[@]} -eq 0 ] || die "give only one of --epochs, --minutes, --max-steps"
  # The other two criteria are switched off so every mode gets exactly this budget.
  case "$1" in
    epochs) budget=(--epochs "$2" --minutes 0 --max-steps 0) ;;
    minutes) budget=(--minutes "$2" --epochs 0 --max-steps 0) ;;
    max-steps) budget=(--max-steps "$2" --epochs 0 --minutes 0) ;;
  esac
}

add_modes() {
  local list=$1 IFS
  if [[ $list == *";"* ]]; then IFS=';'; else IFS=$' ,\t\n'; fi
  local entry
  for entry in $list; do
    # Trim blanks and newlines (a list written one mode per line).
    entry=${entry#"${entry%%[![:space:]]*}"}
    entry=${entry%"${entry##*[![:space:]]}"}
    [[ $entry != -* ]] || die "--modes: '$entry' looks like a flag; separate modes with ';' when they carry flags"
    [ -n "$entry" ] && mode_specs+=("$entry")
  done
  return 0
}

while [ $# -gt 0 ]; do
  case "$1" in
    --name) name=$2; shift 2 ;;
    --epochs|--minutes|--max-steps) set_budget "${1#--}" "$2"; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --modes) add_modes "$2"; shift 2 ;;
    --mode) mode_specs+=("$2"); shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --flores) flores=$2; shift 2 ;;
    --beam-size) beam_size=$2; shift 2 ;;
    --bleu-sentences) bleu_sentences=$2; shift 2 ;;
    --bench-steps) bench_steps=$2; shift 2 ;;
    --force) force=1; shift ;;
    --session-minutes) session_minutes=$2; shift 2 ;;
    --budget-note) budget_note=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ -n "$name" ] || { echo "compare.sh: --name NAME is required (see --help)" >&2; exit 2; }
[[ $bleu_sentences =~ ^([0-9]+|all)$ ]] || die "--bleu-sentences takes a number or 'all'"
[[ $bench_steps =~ ^[0-9]+$ ]] || die "--bench-steps takes a number"
[ -z "$session_minutes" ] || [[ $session_minutes =~ ^[0-9]*\.?[0-9]+$ ]] || die "--session-minutes takes a number of minutes"
# This sitting's end, in seconds since the epoch (empty: no limit).
session_end=""
[ -z "$session_minutes" ] || session_end=$(awk -v now="$(date +%s)" -v m="$session_minutes" 'BEGIN { printf "%d", now + m * 60 }')
[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || die "--name '$name': use letters, digits, '.', '_' and '-'"
[ ${#mode_specs[@]} -gt 0 ] || mode_specs=(standard projection)
projmt=$build/projmt
[ -x "$projmt" ] || die "$projmt not found: build first (cmake -B $build -S . && cmake --build $build)"
[ -f "$config" ] || die "config '$config' not found"
for f in train.tok valid.tok test.tok test.en test.es; do
  [ -f "$data_dir/$f" ] || die "$data_dir/$f not found: run projmt prepare --data-dir $data_dir"
done
python=/usr/bin/python3
"$python" -c "import matplotlib" 2>/dev/null || die "$python has no matplotlib (apt-get install python3-matplotlib)"
if [ "$bleu_sentences" = 0 ]; then
  flores=none
elif [ "$flores" = auto ]; then
  . "$repo/scripts/flores.sh"
  flores=$(flores_auto "$repo")
elif [ "$flores" != none ]; then
  [ -f "$flores.en" ] && [ -f "$flores.es" ] || die "--flores $flores: $flores.en and $flores.es not found"
fi

study=$root/$name
mkdir -p "$study/ckpt"
echo "$command_line" > "$study/command.txt"

# Sentences of our own (not corpus lines) for the attention pictures, with
# reference translations so every mode is pictured on the same pieces.
attention_src=("The cat is sleeping on the red chair." "I want to drink a glass of cold water."
               "My brother works in a big hospital.")
attention_tgt=("El gato está durmiendo en la silla roja." "Quiero beber un vaso de agua fría."
               "Mi hermano trabaja en un hospital grande.")

# Mode spec -> label and train flags (in globals mode_label, mode_flags).
resolve_mode() {
  local spec=$1
  mode_label=${spec%%=*}
  # Named modes spell out the projection family too, so a config file that
  # sets another kernel or metric does not leak into them.
  local sanger=(--kernel gaussian --proj-metric euclidean)
  case "$spec" in
    *=*) read -r -a mode_flags <<< "${spec#*=}" ;;
    standard) mode_flags=(--attention standard --sigma fixed "${sanger[@]}") ;;
    projection) mode_flags=(--attention projection --sigma fixed "${sanger[@]}") ;;
    proj-self) mode_flags=(--encoder-self projection --decoder-self projection --decoder-cross standard --sigma fixed "${sanger[@]}") ;;
    proj-cross) mode_flags=(--encoder-self standard --decoder-self standard --decoder-cross projection --sigma fixed "${sanger[@]}") ;;
    learned) mode_flags=(--attention projection --sigma learned "${sanger[@]}") ;;
    boxcar|constant|epanechnikov) mode_flags=(--attention projection --sigma fixed --kernel "$spec" --proj-metric euclidean) ;;
    diagonal|cosine|dot) mode_flags=(--attention projection --sigma fixed --kernel gaussian --proj-metric "$spec") ;;
    *) die "unknown mode '$spec' (standard, projection, proj-self, proj-cross, learned, boxcar, constant, epanechnikov, diagonal, cosine, dot, or LABEL=--flag value ...)" ;;
  esac
  [[ $mode_label =~ ^[A-Za-z0-9._-]+$ ]] || die "mode label '$mode_label': use letters, digits, '.', '_' and '-'"
  [ "$mode_label" != ckpt ] && [ "$mode_label" != plots ] && [ "$mode_label" != attention ] ||
    die "mode label '$mode_label' is reserved for the study's own folders"
}

# First n lines of a file (n = all: every line) into the study's uncommitted inputs.
subset() {
  local file=$1 n=$2 out=$study/ckpt/$(basename "$1")
  if [ "$n" = all ]; then cp "$file" "$out"; else head -n "$n" "$file" > "$out"; fi
  echo "$out"
}

# Runs `projmt eval ... --json` unless out is already newer than the run; keeps the JSON line.
eval_json() {
  local out=$1 dir=$2; shift 2
  if [ -s "$out" ] && [ "$out" -nt "$dir/done" ]; then return 0; fi
  local log=$dir/ckpt/$(basename "$out" .json).log
  "$projmt" eval "$@" --json > "$log" 2>&1 || die "projmt eval failed ($log): $(tail -n 3 "$log")"
  tail -n 1 "$log" > "$out"
}

train_mode() {
  local dir=$1; shift
  if [ -f "$dir/done" ] && [ $force -eq 0 ]; then
    echo "== $mode_label: finished run in $dir (use --force to retrain)"
    return 0
  fi
  local fresh=() limit=()
  if [ $force -eq 1 ]; then fresh=(--fresh); : > "$dir/train.log"; fi
  rm -f "$dir/done"
  if [ -n "$session_end" ]; then
    local left=$(( session_end - $(date +%s) ))
    [ "$left" -gt 0 ] || session_over
    # SIGINT, as Ctrl-C: projmt saves last.ckpt and exits; resuming is exact.
    # --foreground keeps projmt in the terminal's process group, so a real
    # Ctrl-C still reaches it.
    limit=(timeout --foreground --signal=INT --kill-after=600 "$left")
  fi
  echo "== $mode_label: training ($*) -> $dir"
  printf '%s\n' "$*" > "$dir/flags.txt"
  local status=0
  # train.log is appended to: a run split over sittings keeps every session.
  ${limit[@]+"${limit[@]}"} "$projmt" train --config "$config" "$@" ${budget[@]+"${budget[@]}"} --data-dir "$data_dir" \
    --save-dir "$dir/ckpt" ${fresh[@]+"${fresh[@]}"} 2>&1 | tee -a "$dir/train.log" || status=$?
  [ $status -ne 124 ] || session_over
  [ $status -eq 0 ] || die "training $mode_label failed; see $dir/train.log (run the same command again to resume)"
  cp "$dir/ckpt/train.tsv" "$dir/train.tsv"
  date -u +%FT%TZ > "$dir/done"
  trained_any=1
}

# The sitting's time is used up: what is saved, and how to go on.
session_over() {
  echo "== session time (--session-minutes $session_minutes) used up during '$mode_label'; its last.ckpt is saved." >&2
  echo "== run the same command again (without --force) to continue exactly where it stopped." >&2
  exit 75
}

evaluate_mode() {
  local dir=$1 model=$1/ckpt/best.ckpt
  [ -f "$model" ] || model=$dir/ckpt/last.ckpt
  if [ ! -f "$model" ]; then
    # A finished run whose checkpoints are gone — a study cloned from the
    # repository has its results but never its checkpoints: the results stand.
    local kept=("$dir/eval_valid.json" "$dir/eval_test.json") f
    [ "$bleu_sentences" = 0 ] || kept+=("$dir/eval_bleu_test.json")
    [ "$flores" = none ] || kept+=("$dir/eval_bleu_flores.json")
    for f in "${kept[@]}"; do
      [ -s "$f" ] || die "$mode_label: no checkpoint in $dir/ckpt to evaluate and no $f; retrain it with --force"
    done
    echo "== $mode_label: no checkpoint in $dir/ckpt; keeping its results (no attention pictures or sample translations for it)"
    return 0
  fi
  echo "== $mode_label: evaluating $model"
  eval_json "$dir/eval_valid.json" "$dir" --model "$model" --split valid --data-dir "$data_dir"
  eval_json "$dir/eval_test.json" "$dir" --model "$model" --split test --data-dir "$data_dir"
  if [ "$bleu_sentences" != 0 ]; then
    eval_json "$dir/eval_bleu_test.json" "$dir" --model "$model" --src "$test_src" --ref "$test_ref" \
      --beam-size "$beam_size" --hyp-out "$dir/ckpt/test.hyp"
  fi
  if [ "$flores" != none ]; then
    eval_json "$dir/eval_bleu_flores.json" "$dir" --model "$model" --src "$flores.en" --ref "$flores.es" \
      --beam-size "$beam_size" --hyp-out "$dir/ckpt/flores.hyp"
  fi
  local k
  for k in "${!attention_src[@]}"; do
    "$projmt" attention --model "$model" --src "${attention_src[$k]}" --tgt "${attention_tgt[$k]}" \
      --out "$dir/ckpt/attention-s$((k + 1))" > /dev/null || die "projmt attention failed for $mode_label"
  done
}

# Speed of the named modes in one process on the same batches (custom modes
# get their speed from train.tsv only).
bench_modes() {
  local named=() label
  for label in "${labels[@]}"; do
    case "$label" in
      standard|projection|proj-self|proj-cross|learned|boxcar|constant|epanechnikov|diagonal|cosine|dot) named+=("$label") ;;
    esac
  done
  if [ "$bench_steps" -eq 0 ] || [ ${#named[@]} -eq 0 ]; then rm -f "$study/bench.json"; return 0; fi
  local list
  list=$(IFS=,; echo "${named[*]}")
  # bench.json lists results by position: reuse it only for the same modes.
  if [ -s "$study/bench.json" ] && [ "$trained_any" -eq 0 ] &&
     [ "$(cat "$study/ckpt/bench.modes" 2>/dev/null)" = "$list" ]; then
    return 0
  fi
  echo "== bench: $list ($bench_steps timed steps each)"
  "$projmt" bench --config "$config" --data-dir "$data_dir" --modes "$list" --steps "$bench_steps" --json \
    > "$study/ckpt/bench.log" 2>&1 || die "projmt bench failed: $(tail -n 3 "$study/ckpt/bench.log")"
  tail -n 1 "$study/ckpt/bench.log" > "$study/bench.json"
  echo "$list" > "$study/ckpt/bench.modes"
}

plot_all() {
  local runs=() label k dumps dump
  for label in "${labels[@]}"; do runs+=("$label=$study/$label/train.tsv"); done
  "$python" "$repo/scripts/plot_curves.py" --out "$study/plots" "${runs[@]}"
  for k in "${!attention_src[@]}"; do
    dumps=()
    for label in "${labels[@]}"; do
      dump=$study/$label/ckpt/attention-s$((k + 1))/attention.json
      [ ! -f "$dump" ] || dumps+=("$label=$dump")
    done
    [ ${#dumps[@]} -eq 0 ] || "$python" "$repo/scripts/plot_attention.py" --out "$study/attention" --name "s$((k + 1))" "${dumps[@]}"
  done
}

test_src=$(subset "$data_dir/test.en" "$bleu_sentences")
test_ref=$(subset "$data_dir/test.es" "$bleu_sentences")
labels=() trained_any=0
for spec in "${mode_specs[@]}"; do
  resolve_mode "$spec"
  for seen in ${labels[@]+"${labels[@]}"}; do [ "$seen" != "$mode_label" ] || die "mode '$mode_label' given twice"; done
  labels+=("$mode_label")
  mkdir -p "$study/$mode_label/ckpt"
  train_mode "$study/$mode_label" "${mode_flags[@]}"
  evaluate_mode "$study/$mode_label"
done
bench_modes
plot_all
"$python" "$repo/scripts/make_report.py" --study "$study" --command "$command_line" --config "$config" \
  --test-src "$test_src" --test-ref "$test_ref" --flores "$flores" --budget "${budget[*]:0:2}" --budget-note "$budget_note" "${labels[@]}"
# The logs and evaluation files name the model and data by the paths given
# here; as committed they name them from the repository the study is in.
study_repo=$(git -C "$study" rev-parse --show-toplevel 2>/dev/null || echo "$repo")
"$python" "$repo/scripts/repo_paths.py" --repo "$study_repo" "$study"/*/train.log "$study"/*/eval_*.json ||
  die "could not rewrite the study's paths"
echo "== done: $study/report.md, $study/summary.json"
