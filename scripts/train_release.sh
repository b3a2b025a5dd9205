#!/usr/bin/env bash
# train_release.sh — the recipe of the shipped English→Spanish model
# (models/en-es.int8.pmt and its card models/README.md), one command from the
# prepared corpus to the committed files:
#
#   1. trains the base config (standard attention) in fp32 with an
#      exponential moving average of the weights (--ema 0.999) and numbered
#      checkpoints (--keep-last 5) for a wall-clock budget (120 minutes,
#      summed over sittings);
#   2. scores the candidates — best.ckpt (its moving average at the best
#      validation), the mean of the last N numbered checkpoints, last.ckpt's
#      moving average and its raw weights — by BLEU on the validation split
#      (beam 4) and keeps the best;
#   3. exports it with int8 weights (the shipped file, with a vocabulary
#      shortlist from the training split for translate --shortlist K) and fp32
#      (for the comparison), scores both (over the whole vocabulary) on the test split and FLORES-200 dev (BLEU and
#      chrF, beam 4), measures their decoding speed (projmt bench --decode,
#      greedy and beam 4), and translates the quick start's sentences
#      (scripts/quickstart.en) with the shipped file;
#   4. writes NAME.results.json (scripts/release_results.py) and the model
#      card README.md generated from it (scripts/model_card.py).
#
#   bash scripts/train_release.sh [options] [-- extra projmt train flags]
#
# Budget and sittings:
#   --minutes M            training minutes, summed over sittings (default 120)
#   --max-steps N          a step budget instead of minutes
#   --session-minutes M    end this sitting after about M minutes of training:
#                          projmt saves last.ckpt as on Ctrl-C and the script
#                          exits 75; the same command continues exactly there
#                          (the evaluation after training is not counted: it
#                          takes a few minutes more on this machine)
#   --fresh                start the training over (ignores last.ckpt)
# Recipe (release defaults):
#   --config FILE          configs/base.ini
#   --attention KIND       standard | projection (standard)
#   --ema DECAY            0.999 (0: no moving average)
#   --keep-last N          5: numbered checkpoints kept, and averaged
#   --valid-every N        500 steps (a numbered checkpoint at each)
#   --valid-bleu-sentences N  500 (validation BLEU picks best.ckpt)
#   --precision P          passed to projmt train only when given (fp32|bf16)
#   --threads N            threads of training and evaluation (0 = all cores)
# Fine-tuning (off by default): after the main training, continue from its
# moving average on spa.txt alone, the test split's own domain (prepared with
# the main data's vocabulary, prepare --spm-model: the same valid/test
# split), in a run folder of its own (RUN/finetune, train --init-from):
#   --finetune-steps N     steps of fine-tuning (0: none)
#   --finetune-lr X        its peak lr (default 2e-4, about where the main
#                          run's inverse-sqrt schedule is after 10k steps)
#   --finetune-warmup N    its warm-up steps (default 200), then inverse-sqrt
#                          decay (the main run's --lr-schedule does not apply)
#   --finetune-from FILE   fine-tune this model (a checkpoint or an exported
#                          file, e.g. the shipped one) instead of training a
#                          main run; it is copied into RUN first, and the
#                          card names it with the copy's sha256 and the
#                          committed release that lists it
# The candidates are then the fine-tuned run's, plus the model it started
# from (so fine-tuning is kept only when validation says it helps).
# Evaluation and output:
#   --data-dir D           prepared data (data/release-mix; prepared when missing)
#   --corpora all|spa      what D is prepared from when missing: all (spa.txt,
#                          weight 3, gives valid/test; the extra corpora of
#                          scripts/get_extra_data.sh: pydocs without markup,
#                          lohelp, bible) or spa (spa.txt alone). An existing D
#                          is used as it is, its sources printed; given
#                          explicitly, --corpora refuses a D prepared otherwise
#   --flores DIR|PREFIX|none  FLORES-200 dev (default: $PROJMT_FLORES, then
#                          $PROJMT_DATA_DIR/flores200-dev, data/flores200-dev,
#                          ../shared/data/flores200-dev next to the repository)
#   --select-sentences N   validation sentences that choose the candidate (all)
#   --beam-size N          beam of selection and scores (4)
#   --bench-sentences N    test sentences timed by bench --decode (1000)
#   --bench-threads N      threads of the decode-speed measurement (all cores)
#   --bench-rounds N       decode-speed rounds, fp32 and the shipped type
#                          alternating; the card quotes each run's median (3)
#   --run DIR              training run and work files (models/release-run)
#   --out-dir DIR          exported model, results JSON and card (models)
#   --name NAME            file stem: NAME.int8.pmt, NAME.results.json (en-es)
#   --weights int8|bf16    type of the shipped file (int8)
#   --max-mb MB            refuse a shipped file larger than this (20)
#   --build DIR            where projmt is built (build)
#
# Logs (train.log, one per step of the pipeline) go to RUN/logs/, ignored by
# git like everything in models/ but the shipped file, its results JSON and
# README.md. Exit status: 0 done, 75 sitting over (run it again), 1 failure,
# 2 bad usage.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"

# The command for the card, without what does not change the result: the
# sitting limit and this machine's folders (run, output, build).
command_line="bash scripts/train_release.sh"
skip_next=0 past_options=0
for a in "$@"; do
  if [ $skip_next -eq 1 ]; then skip_next=0; continue; fi
  if [ $past_options -eq 0 ]; then
    case "$a" in
      --session-minutes|--run|--out-dir|--build) skip_next=1; continue ;;
      --) past_options=1 ;;
    esac
  fi
  command_line+=$(printf ' %q' "$a")
done

minutes=120 max_steps="" session_minutes="" fresh=0
config=configs/base.ini attention=standard ema=0.999 keep_last=5 valid_every=500 valid_bleu_sentences=500
precision=() threads=0
corpora=all corpora_given=0 data_dir=data/release-mix flores=auto select_sentences=all beam_size=4 bench_sentences=1000 bench_threads=$(nproc) bench_rounds=3
run=models/release-run out_dir=models name=en-es weights=int8 max_mb=20 build=build
finetune_steps=0 finetune_lr=2e-4 finetune_warmup=200 finetune_from=""
extra=()
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --max-steps) max_steps=$2; shift 2 ;;
    --session-minutes) session_minutes=$2; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --config) config=$2; shift 2 ;;
    --attention) attention=$2; shift 2 ;;
    --ema) ema=$2; shift 2 ;;
    --keep-last) keep_last=$2; shift 2 ;;
    --valid-every) valid_every=$2; shift 2 ;;
    --valid-bleu-sentences) valid_bleu_sentences=$2; shift 2 ;;
    --precision) precision=(--precision "$2"); shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --corpora) corpora=$2 corpora_given=1; shift 2 ;;
    --flores) flores=$2; shift 2 ;;
    --select-sentences) select_sentences=$2; shift 2 ;;
    --beam-size) beam_size=$2; shift 2 ;;
    --bench-sentences) bench_sentences=$2; shift 2 ;;
    --bench-threads) bench_threads=$2; shift 2 ;;
    --bench-rounds) bench_rounds=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --weights) weights=$2; shift 2 ;;
    --max-mb) max_mb=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --finetune-steps) finetune_steps=$2; shift 2 ;;
    --finetune-lr) finetune_lr=$2; shift 2 ;;
    --finetune-warmup) finetune_warmup=$2; shift 2 ;;
    --finetune-from) finetune_from=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "train_release: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
bad_usage() { echo "train_release: $*" >&2; exit 2; }
die() { echo "train_release: $*" >&2; exit 1; }
step() { printf '\n== %s\n' "$*"; }
is_count() { [[ $1 =~ ^[0-9]+$ ]]; }
is_number() { [[ $1 =~ ^[0-9]*\.?[0-9]+$ ]]; }

is_number "$minutes" || bad_usage "--minutes takes a number of minutes (got '$minutes')"
[ -z "$max_steps" ] || is_count "$max_steps" || bad_usage "--max-steps takes a count (got '$max_steps')"
[ -z "$session_minutes" ] || is_number "$session_minutes" || bad_usage "--session-minutes takes a number of minutes"
for v in keep_last valid_every valid_bleu_sentences threads beam_size bench_sentences bench_threads bench_rounds \
         finetune_steps finetune_warmup; do
  is_count "${!v}" || bad_usage "--${v//_/-} takes a count (got '${!v}')"
done
[ "$select_sentences" = all ] || is_count "$select_sentences" || bad_usage "--select-sentences takes a count or 'all'"
is_number "$max_mb" || bad_usage "--max-mb takes a number of megabytes"
[ -z "$finetune_from" ] || [ "$finetune_steps" -gt 0 ] || bad_usage "--finetune-from needs --finetune-steps N"
[ -z "$finetune_from" ] || [ -f "$finetune_from" ] || bad_usage "--finetune-from $finetune_from: no such file"
[[ $finetune_lr =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]] || bad_usage "--finetune-lr takes a number (got '$finetune_lr')"
[[ $name =~ ^[A-Za-z0-9._-]+$ ]] || bad_usage "--name '$name': use letters, digits, '.', '_' and '-'"
case "$corpora" in all|spa) ;; *) bad_usage "--corpora must be all or spa (got '$corpora')" ;; esac
case "$weights" in int8|bf16) ;; *) bad_usage "--weights must be int8 or bf16 (fp32 is exported for the comparison)" ;; esac
[ -f "$config" ] || bad_usage "config '$config' not found"
projmt=$build/projmt
[ -x "$projmt" ] || die "$projmt not built (cmake -B $build -S . -DCMAKE_BUILD_TYPE=Release && cmake --build $build)"
python=/usr/bin/python3
[ -x "$python" ] || die "$python not found (apt-get install python3)"

# The sitting's end in seconds since the epoch (empty: no limit).
session_end=""
[ -z "$session_minutes" ] ||
  session_end=$(awk -v now="$(date +%s)" -v m="$session_minutes" 'BEGIN { printf "%d", now + m * 60 }')
if [ -n "$max_steps" ]; then
  budget=(--max-steps "$max_steps" --epochs 0 --minutes 0)
else
  budget=(--minutes "$minutes" --epochs 0 --max-steps 0)
fi

logs=$run/logs work=$run/release
mkdir -p "$logs" "$work" "$out_dir"
out=$out_dir/$name.$weights.pmt
fp32_file=$work/$name.fp32.pmt
results=$out_dir/$name.results.json

. "$repo/scripts/flores.sh"
case "$flores" in
  none) ;;
  auto)
    flores=$(flores_auto "$repo")
    [ "$flores" != none ] || echo "train_release: FLORES-200 dev not found (set PROJMT_FLORES=DIR); not scored" >&2 ;;
  *) flores=$(flores_prefix "$flores") || bad_usage "--flores $flores: no flores200-dev.en/.es (or PREFIX.en/.es) there" ;;
esac

step "data"
if [ -f "$data_dir/manifest.json" ]; then
  # What the data dir holds, as 'name:weight' per source ('' for a manifest
  # from before sources were recorded), against what --corpora asks for.
  held=$("$python" -c 'import json, sys
print(" ".join("%s:%s" % (s["name"], s["weight"]) for s in json.load(open(sys.argv[1])).get("sources", [])))' \
    "$data_dir/manifest.json") || die "$data_dir/manifest.json is not readable JSON: prepare the data again"
  echo "prepared: $data_dir (sources: ${held:-not recorded})"
  case "$corpora" in
    all) wanted="spa:3 pydocs:1 lohelp:1 bible:1" ;;
    spa) wanted=$(printf '%s' "$held" | grep -E '^[^ ]+:1$' || true) ;;   # one source, any name
  esac
  if [ $corpora_given -eq 1 ] && [ "$held" != "$wanted" ]; then
    bad_usage "--corpora $corpora: $data_dir was prepared from other sources (${held:-not recorded}); give" \
      "another --data-dir (it is prepared there), remove $data_dir, or leave out --corpora to use it as it is"
  fi
else
  corpus=$(bash scripts/get_data.sh | tail -n 1)
  sources=(--corpus "$corpus")
  if [ "$corpora" = all ]; then
    extra_dir=$(bash scripts/get_extra_data.sh | tail -n 1)
    sources=(--source "$corpus:primary,weight=3,name=spa")
    for spec in pydocs.en-es.tsv.gz:markup=drop,name=pydocs lohelp.en-es.tsv.gz:name=lohelp \
                bible.en-es.tsv.gz:en=2,es=3,name=bible; do
      [ -f "$extra_dir/${spec%%:*}" ] || die "$extra_dir/${spec%%:*} not found: the release mix needs it" \
        "(bash scripts/get_extra_data.sh --help; or --corpora spa)"
      sources+=(--source "$extra_dir/$spec")
    done
  fi
  # The config's [data] settings (split sizes, vocabulary) apply, as in projmt train.
  "$projmt" prepare --config "$config" "${sources[@]}" --data-dir "$data_dir" 2>&1 | tee "$logs/prepare.log" ||
    die "projmt prepare failed; see $logs/prepare.log"
fi
for f in train.tok valid.tok valid.en valid.es test.tok test.en test.es manifest.json; do
  [ -f "$data_dir/$f" ] || die "$data_dir/$f not found: prepare the data again (projmt prepare --data-dir $data_dir)"
done

train_flags=(--config "$config" --attention "$attention" --data-dir "$data_dir" --save-dir "$run" "${budget[@]}"
             --ema "$ema" --keep-last "$keep_last" --valid-every "$valid_every"
             --valid-bleu-sentences "$valid_bleu_sentences" --early-stopping-metric bleu --threads "$threads"
             ${precision[@]+"${precision[@]}"} ${extra[@]+"${extra[@]}"})
# The effective settings, for the card (and to stop early on a bad flag).
"$projmt" train "${train_flags[@]}" --dump-config > "$logs/config.ini" 2> "$logs/config.err" ||
  die "projmt train refused the recipe's flags: $(cat "$logs/config.err")"

# The sitting's time is used up: what is saved, and how to go on.
session_over() {
  echo "== session time (--session-minutes $session_minutes) used up; $run/last.ckpt is saved." >&2
  echo "== run the same command again to continue exactly where it stopped." >&2
  exit 75
}

# limit: the command prefix that ends a training at the sitting's end (empty
# without --session-minutes; a sitting already over stops here, status 75).
# SIGINT, as Ctrl-C: projmt saves last.ckpt and exits; resuming is exact.
# --foreground keeps projmt in the terminal's process group, so a real
# Ctrl-C still reaches it.
sitting_limit() {
  limit=()
  [ -n "$session_end" ] || return 0
  local left=$(( session_end - $(date +%s) ))
  [ "$left" -gt 0 ] || session_over
  limit=(timeout --foreground --signal=INT --kill-after=600 "$left")
}

# Training is skipped when a finished run of this recipe is there (a sitting
# that starts after it finished must not stop as unfinished).
trained_marker=$logs/trained main_trained_now=0
recipe=$(printf '%q ' "${train_flags[@]}")
[ $fresh -eq 0 ] || rm -f "$trained_marker"
start_model=$run/last.ckpt start_commit=""
if [ -n "$finetune_from" ]; then
  # The starting model is copied: a release written over it (--out-dir
  # models) must not change what a later sitting fine-tunes.
  start_model=$run/start.pmt
  [ -f "$start_model" ] && cmp -s "$start_model" "$finetune_from" || cp "$finetune_from" "$start_model"
  start_commit=$(git -C "$repo" log -1 --format=%h -- "$finetune_from" 2>/dev/null || true)
  step "train: none (fine-tuning $finetune_from${start_commit:+, last changed in commit $start_commit})"
elif [ -f "$trained_marker" ] && [ "$(cat "$trained_marker")" = "$recipe" ] && [ -f "$run/last.ckpt" ]; then
  step "train: finished earlier ($run/last.ckpt; --fresh to start over)"
else
  step "train (${budget[*]:0:2}, $config, $attention attention, --ema $ema, --keep-last $keep_last${precision[*]:+, ${precision[*]}})"
  fresh_flag=()
  [ $fresh -eq 0 ] || fresh_flag=(--fresh)
  sitting_limit
  rm -f "$trained_marker"
  status=0
  # train.log is appended to: a run split over sittings keeps every one.
  ${limit[@]+"${limit[@]}"} "$projmt" train "${train_flags[@]}" ${fresh_flag[@]+"${fresh_flag[@]}"} 2>&1 |
    tee -a "$logs/train.log" || status=$?
  [ $status -ne 124 ] || session_over
  # 0 only when the budget is reached (an interrupted projmt train exits 128 + signal).
  [ $status -eq 0 ] || die "training stopped (status $status); see $logs/train.log (run the same command again to resume)"
  printf '%s' "$recipe" > "$trained_marker"
  main_trained_now=1
fi

# Fine-tuning on spa.txt alone (--finetune-steps): its own data dir (the
# main data's vocabulary; prepare gives the same valid/test split as with
# spa.txt primary in the mix), its own run folder and trained marker, the
# main run's flags but for the data, the budget and the lr, whose schedule
# is its own (inverse-sqrt after its warm-up, whatever the main run's).
final_run=$run
if [ "$finetune_steps" -gt 0 ]; then
  ft_data=$data_dir-finetune-spa ft_run=$run/finetune final_run=$run/finetune
  step "fine-tuning data ($ft_data: spa.txt with $data_dir/spm.model)"
  if [ ! -f "$ft_data/manifest.json" ]; then
    corpus=$(bash scripts/get_data.sh | tail -n 1)
    # The main data's split settings, so valid/test come out the same.
    split_flags=$("$python" -c 'import json, sys
c = json.load(open(sys.argv[1]))["config"]
print(" ".join("--%s %s" % (k.replace("_", "-"), c[k]) for k in ("valid_size", "test_size", "max_words", "max_ratio", "seed")))' \
      "$data_dir/manifest.json") || die "$data_dir/manifest.json has no split settings: prepare the data again"
    # shellcheck disable=SC2086  # split_flags is flag/number words
    "$projmt" prepare --config "$config" --corpus "$corpus" $split_flags --spm-model "$data_dir/spm.model" \
      --data-dir "$ft_data" \
      2>&1 | tee "$logs/prepare-finetune.log" || die "projmt prepare of $ft_data failed; see $logs/prepare-finetune.log"
  fi
  cmp -s "$ft_data/spm.model" "$data_dir/spm.model" ||
    die "$ft_data/spm.model is not $data_dir/spm.model: remove $ft_data and run again"
  for f in valid.tok test.tok; do
    cmp -s "$ft_data/$f" "$data_dir/$f" ||
      die "$ft_data/$f differs from $data_dir/$f (the fine-tuning data must share the main data's valid/test split)"
  done
  mkdir -p "$ft_run/logs"
  ft_flags=("${train_flags[@]}" --data-dir "$ft_data" --save-dir "$ft_run" --max-steps "$finetune_steps" --epochs 0
            --minutes 0 --init-from "$start_model" --lr "$finetune_lr" --warmup "$finetune_warmup"
            --lr-schedule inverse-sqrt --decay-steps 0 --min-lr 0)
  "$projmt" train "${ft_flags[@]}" --dump-config > "$ft_run/logs/config.ini" 2> "$logs/config-finetune.err" ||
    die "projmt train refused the fine-tuning flags: $(cat "$logs/config-finetune.err")"
  ft_marker=$ft_run/logs/trained ft_recipe=$(printf '%q ' "${ft_flags[@]}")
  ft_fresh=()
  # A main run trained (further) in this sitting is a new starting point.
  [ $fresh -eq 0 ] && [ $main_trained_now -eq 0 ] || { ft_fresh=(--fresh); rm -f "$ft_marker"; }
  if [ -f "$ft_marker" ] && [ "$(cat "$ft_marker")" = "$ft_recipe" ] && [ -f "$ft_run/last.ckpt" ]; then
    step "fine-tune: finished earlier ($ft_run/last.ckpt)"
  else
    step "fine-tune ($finetune_steps steps from $start_model on $ft_data, lr $finetune_lr, warm-up $finetune_warmup)"
    sitting_limit
    rm -f "$ft_marker"
    status=0
    ${limit[@]+"${limit[@]}"} "$projmt" train "${ft_flags[@]}" ${ft_fresh[@]+"${ft_fresh[@]}"} 2>&1 | tee -a "$ft_run/logs/train.log" || status=$?
    [ $status -ne 124 ] || session_over
    [ $status -eq 0 ] || die "fine-tuning stopped (status $status); see $ft_run/logs/train.log (run the same command again to resume)"
    printf '%s' "$ft_recipe" > "$ft_marker"
  fi
fi

# Runs `projmt eval ... --json`, keeping its log and its JSON line in OUT.
eval_json() {
  local out=$1; shift
  local log=$logs/$(basename "$out" .json).log
  "$projmt" eval "$@" --threads "$threads" --json > "$log" 2>&1 ||
    die "projmt eval $* failed ($log): $(tail -n 3 "$log")"
  tail -n 1 "$log" > "$out"
}
# First n lines of a file (n = all: the file itself).
subset() {
  local file=$1 n=$2 out=$work/$(basename "$1").$2
  if [ "$n" = all ]; then echo "$file"; else head -n "$n" "$file" > "$out"; echo "$out"; fi
}

step "candidates, scored on the validation split (beam $beam_size)"
valid_src=$(subset "$data_dir/valid.en" "$select_sentences")
valid_ref=$(subset "$data_dir/valid.es" "$select_sentences")
has_ema=$(awk -F' = ' '$1 == "ema" { print ($2 > 0) }' "$logs/config.ini")
candidates=()      # label:checkpoint:export flag
[ ! -f "$final_run/best.ckpt" ] || candidates+=("best:$final_run/best.ckpt:")
n_steps=$(find "$final_run" -maxdepth 1 -name 'step-*.ckpt' | wc -l)
rm -f "$work/avg.ckpt"
if [ "$keep_last" -gt 0 ] && [ "$n_steps" -ge 2 ]; then
  n_avg=$(( n_steps < keep_last ? n_steps : keep_last ))
  "$projmt" average --out "$work/avg.ckpt" --last "$n_avg" --dir "$final_run" > "$logs/average.log" 2>&1 ||
    die "projmt average failed: $(tail -n 3 "$logs/average.log")"
  candidates+=("avg:$work/avg.ckpt:")
fi
if [ "$has_ema" = 1 ]; then
  # Early in training the moving average lags behind the raw weights.
  candidates+=("last-ema:$final_run/last.ckpt:" "last-raw:$final_run/last.ckpt:--raw")
else
  candidates+=("last:$final_run/last.ckpt:")
fi
# Fine-tuned: the model it started from stays a candidate.
[ "$final_run" = "$run" ] || candidates+=("main:$start_model:")
best="" best_bleu=-1 best_chrf=-1
for c in "${candidates[@]}"; do
  IFS=: read -r label ckpt raw <<< "$c"
  "$projmt" export --model "$ckpt" $raw --out "$work/candidate-$label.fp32.pmt" --weights fp32 \
    > "$logs/export-$label.log" 2>&1 || die "projmt export of $label failed: $(tail -n 3 "$logs/export-$label.log")"
  eval_json "$work/select-$label.json" --model "$work/candidate-$label.fp32.pmt" --src "$valid_src" \
    --ref "$valid_ref" --beam-size "$beam_size"
  bleu=$(sed -n 's/.*"bleu": {"score": \([0-9.e+-]*\).*/\1/p' "$work/select-$label.json")
  chrf=$(sed -n 's/.*"chrf": {"score": \([0-9.e+-]*\).*/\1/p' "$work/select-$label.json")
  [ -n "$bleu" ] && [ -n "$chrf" ] || die "no BLEU or chrF in $work/select-$label.json"
  echo "$label ($ckpt${raw:+ $raw}): valid BLEU $bleu, chrF $chrf"
  # Higher BLEU wins; chrF breaks a tie; the earlier candidate stays on a full tie.
  if awk -v a="$bleu" -v b="$best_bleu" -v c="$chrf" -v d="$best_chrf" 'BEGIN { exit !(a > b || (a == b && c > d)) }'
  then best=$c best_bleu=$bleu best_chrf=$chrf; fi
done
IFS=: read -r chosen chosen_ckpt chosen_raw <<< "$best"
echo "chosen: $chosen"
printf '%s\n' "${candidates[@]}" > "$work/candidates.txt"
echo "$chosen" > "$work/chosen.txt"

step "export ($weights -> $out; fp32 -> $fp32_file)"
"$projmt" export --model "$chosen_ckpt" $chosen_raw --out "$out" --weights "$weights" --shortlist "$data_dir" \
  | tee "$logs/export.log"
cp "$work/candidate-$chosen.fp32.pmt" "$fp32_file"

step "scores and decoding speed of the exported files (beam $beam_size; bench with $bench_threads thread(s))"
for w in fp32 "$weights"; do
  file=$fp32_file
  [ "$w" = fp32 ] || file=$out
  eval_json "$work/eval-test-$w.json" --model "$file" --src "$data_dir/test.en" --ref "$data_dir/test.es" \
    --beam-size "$beam_size" --hyp-out "$work/test-$w.hyp"
  eval_json "$work/eval-test-loss-$w.json" --model "$file" --split test --data-dir "$data_dir"
  if [ "$flores" != none ]; then
    eval_json "$work/eval-flores-$w.json" --model "$file" --src "$flores.en" --ref "$flores.es" \
      --beam-size "$beam_size" --hyp-out "$work/flores-$w.hyp"
  fi
  echo "$w, test split:"
  grep '^BLEU\|^chrF' "$logs/eval-test-$w.log" || true
  if [ "$flores" != none ]; then
    echo "$w, FLORES-200 dev:"
    grep '^BLEU\|^chrF' "$logs/eval-flores-$w.log" || true
  fi
done

# The quick start's sentences (scripts/quickstart.en), translated by the
# shipped file: the card shows what a newcomer will read first.
step "the quick start's sentences, translated by $out (beam $beam_size)"
"$projmt" translate --model "$out" --beam-size "$beam_size" --threads "$threads" < scripts/quickstart.en \
  > "$work/samples.es" 2> "$logs/samples.log" || die "projmt translate failed: $(tail -n 3 "$logs/samples.log")"
paste scripts/quickstart.en "$work/samples.es" | tee "$work/samples.tsv"

# Timings on a shared or busy machine vary from run to run: alternating
# rounds of both files, each run's median quoted (scripts/release_results.py).
step "decoding speed: $bench_rounds round(s) of fp32 and $weights, alternating"
for w in fp32 "$weights"; do : > "$work/bench-$w.json"; : > "$work/bench-$w.loadavg"; done
for ((round = 1; round <= bench_rounds; round++)); do
  for w in fp32 "$weights"; do
    file=$fp32_file
    [ "$w" = fp32 ] || file=$out
    # The 1-minute load average as the timing starts: how busy the machine was.
    read -r load_1min _ < /proc/loadavg
    echo "$load_1min" >> "$work/bench-$w.loadavg"
    log=$logs/bench-$w-$round.log
    "$projmt" bench --decode --model "$file" --data-dir "$data_dir" --sentences "$bench_sentences" \
      --threads "$bench_threads" --json > "$log" 2>&1 || die "projmt bench --decode failed: $(tail -n 3 "$log")"
    echo "round $round, $w:"
    grep 'sentences/s' "$log" || true
    tail -n 1 "$log" >> "$work/bench-$w.json"
    sed -n 's/^projmt bench --decode: .* \([0-9]*\) threads, .*/\1/p' "$log" > "$work/bench-$w.threads"
  done
done

step "results and model card"
ft_args=()
results_run=$run
if [ -n "$finetune_from" ]; then
  # No main run here: the card's training is the fine-tuning run's.
  results_run=$final_run
  ft_args=(--finetune "$final_run" --finetune-data-dir "$ft_data" --finetune-from "$finetune_from"
           --finetune-from-copy "$start_model")
elif [ "$final_run" != "$run" ]; then
  ft_args=(--finetune "$final_run" --finetune-data-dir "$ft_data")
fi
"$python" scripts/release_results.py --run "$results_run" --work "$work" ${ft_args[@]+"${ft_args[@]}"} --data-dir "$data_dir" --flores "$flores" \
  --out-file "$out" --fp32-file "$fp32_file" --weights "$weights" --name "$name" --beam-size "$beam_size" \
  --max-mb "$max_mb" --command "$command_line" --output "$results"
"$python" scripts/model_card.py "$results" --out "$out_dir/README.md"
echo "wrote $results and $out_dir/README.md"
size_ok=$(awk -v b="$(stat -c %s "$out")" -v m="$max_mb" 'BEGIN { print (b <= m * 1e6) }')
[ "$size_ok" = 1 ] || die "$out is larger than --max-mb $max_mb MB; it must not be committed (use --weights int8)"
echo "== done: $out ($(stat -c %s "$out") bytes), $results, $out_dir/README.md"
