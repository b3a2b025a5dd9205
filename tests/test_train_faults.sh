#!/usr/bin/env bash
# test_train_faults.sh — training survives faults while it saves:
#   1. SIGKILL at 100 random moments (seeded delays after the run has
#      resumed) of a tiny run that validates and saves last.ckpt + best.ckpt
#      every step, so most kills land inside a checkpoint write: after
#      every kill last.ckpt loads
#      (translate opens it), the next run resumes from it at a step no
#      earlier than before, and a final run resumes and finishes;
#   2. a write that fails: RLIMIT_FSIZE (ulimit -f, SIGXFSZ ignored, so
#      write() gets EFBIG) and, where this user may mount one, a full tmpfs
#      (ENOSPC): the save fails with exit 1 and a message naming the file
#      and the reason, no temporary file is left, and the previous
#      last.ckpt still loads and resumes at its step;
#   3. a run removes the temporaries a killed save left (its own names
#      only), and a second run on a folder in use is refused (exit 1).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"
build=${1:?usage: test_train_faults.sh <build-dir>}
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-faults-XXXXXX")
bg="" mounted=""
trap '[ -n "$bg" ] && kill -KILL "$bg" 2>/dev/null; [ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT

awk -f tests/fixtures/made_up_pairs.awk > "$tmp/pairs.tsv"
"$projmt" prepare --config configs/tiny.ini --corpus "$tmp/pairs.tsv" --data-dir "$tmp/data" \
  --valid-size 20 --test-size 20 --vocab-size 100 > "$tmp/prepare.log" 2>&1 ||
  { cat "$tmp/prepare.log"; echo "FAIL: prepare"; exit 1; }
common=(--config configs/tiny.ini --data-dir "$tmp/data" --threads 1 --log-every 1 --valid-every 1
        --valid-bleu-sentences 0 --epochs 0)
loads() { "$projmt" translate --model "$1" --threads 1 < /dev/null > /dev/null 2> "$tmp/load.err"; }
resumed_step() { sed -n '/resuming from .* at step [0-9]* /{s/.* at step \([0-9]*\) .*/\1/p;q;}' "$1"; }

# ---- 1. SIGKILL during saves ----
run="$tmp/run"
"$projmt" train "${common[@]}" --save-dir "$run" --max-steps 2 > "$tmp/first.log" 2>&1
check "first run saves last.ckpt" [ -s "$run/last.ckpt" ]
RANDOM=2026
trials=100 loaded=0 mid_write=0 resumes=0 last_step=2 monotone=1
for trial in $(seq $trials); do
  : > "$tmp/kill.log"   # emptied here, not by the background job's redirection: the wait below must not see the last run's lines
  "$projmt" train "${common[@]}" --save-dir "$run" --max-steps 2000000000 > "$tmp/kill.log" 2>&1 &
  bg=$!
  # Once it has resumed (so start-up time does not decide what is tested),
  # a random moment among its steps, validations and saves.
  for _ in $(seq 3000); do
    grep -q "resuming from" "$tmp/kill.log" && break
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.01
  done
  sleep "0.$(printf '%02d' $((RANDOM % 30 + 1)))"
  kill -KILL "$bg" 2>/dev/null
  wait "$bg" 2>/dev/null
  bg=""
  grep -q '\.tmp$' <<<"$(ls "$run")" && mid_write=$((mid_write + 1))
  if loads "$run/last.ckpt"; then loaded=$((loaded + 1)); else echo "trial $trial: $(cat "$tmp/load.err")"; fi
  step=$(resumed_step "$tmp/kill.log")
  [ -n "$step" ] || echo "trial $trial did not resume; its log: $(tail -c 600 "$tmp/kill.log")"
  if [ -n "$step" ]; then
    resumes=$((resumes + 1))
    [ "$step" -ge "$last_step" ] || { monotone=0; echo "trial $trial resumed at step $step < $last_step"; }
    last_step=$step
  fi
  grep -q "cannot resume\|corrupt\|truncated" "$tmp/kill.log" && { echo "trial $trial: $(grep -m1 'cannot resume\|corrupt\|truncated' "$tmp/kill.log")"; monotone=0; }
done
echo "SIGKILL: $loaded of $trials kills left a loadable last.ckpt; $mid_write landed inside a checkpoint write; $resumes runs got far enough to resume (last at step $last_step)"
check "every kill left a loadable last.ckpt ($loaded of $trials)" [ $loaded -eq $trials ]
check "some kills landed inside a checkpoint write ($mid_write)" [ $mid_write -gt 0 ]
check "resumes never went back and never failed" [ $monotone -eq 1 ]
check "every run resumed before it was killed ($resumes)" [ $resumes -eq $trials ]
"$projmt" train "${common[@]}" --save-dir "$run" --max-steps $((last_step + 50)) > "$tmp/final.log" 2>&1
status=$?
check "final run exits 0 (got $status: $(tail -1 "$tmp/final.log"))" [ $status -eq 0 ]
final_step=$(resumed_step "$tmp/final.log")
check "final run resumes (at step ${final_step:-none})" [ -n "$final_step" ] && [ "${final_step:-0}" -ge "$last_step" ]
check "no temporary file left after a clean run" [ -z "$(ls "$run" | grep '\.tmp$')" ]

# ---- 2. a save that cannot be written ----
# save_fails NAME DIR REASON -- command...: the run fails cleanly, the old last.ckpt survives.
save_fails() {
  local name=$1 dir=$2 reason=$3; shift 4
  local before
  before=$(md5sum < "$dir/last.ckpt")
  "$@" > "$tmp/$name.log" 2>&1
  local status=$?
  check "$name: exit 1 (got $status)" [ $status -eq 1 ]
  check "$name: message names the file and '$reason' ($(grep -m1 'projmt train:' "$tmp/$name.log"))" \
    grep -q "projmt train: .*$dir/\(last\|best\)\.ckpt.*$reason" "$tmp/$name.log"
  check "$name: no temporary file left" [ -z "$(ls "$dir" | grep '\.tmp$')" ]
  check "$name: previous last.ckpt unchanged" [ "$(md5sum < "$dir/last.ckpt")" = "$before" ]
  check "$name: previous last.ckpt loads" loads "$dir/last.ckpt"
}
full="$tmp/full"
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 3 > "$tmp/full0.log" 2>&1
check "run before the fault saves" [ -s "$full/last.ckpt" ]
save_fails fsize "$full" "File too large" -- \
  bash -c 'trap "" XFSZ; ulimit -f 64; exec "$@"' _ "$projmt" train "${common[@]}" --save-dir "$full" --max-steps 9
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 4 > "$tmp/after.log" 2>&1
check "after the failed save training resumes at step 3" [ "$(resumed_step "$tmp/after.log")" = 3 ]

mnt="$tmp/tmpfs"
mkdir -p "$mnt"
need_kib=$(( ($(stat -c %s "$full/last.ckpt") + $(stat -c %s "$full/best.ckpt")) / 1024 ))
if mount -t tmpfs -o size=$((need_kib + need_kib / 3 + 16))k tmpfs "$mnt" 2>/dev/null; then
  mounted=$mnt
  cp "$full"/last.ckpt "$full"/best.ckpt "$full"/train.tsv "$mnt"/
  save_fails tmpfs "$mnt" "No space left on device" -- \
    "$projmt" train "${common[@]}" --save-dir "$mnt" --max-steps 12
  umount "$mnt" && mounted=""
else
  echo "note: cannot mount a tmpfs as $(id -un) here; the full-disk case ran through RLIMIT_FSIZE only"
fi

# ---- 3. one run per folder; what a killed save left is cleaned up ----
# A kill inside best.ckpt's or a step-<N>.ckpt's save leaves its .tmp, which
# the next run may never overwrite: that run removes the trainer's own
# temporaries (and nothing else), which is safe only because a second run
# on the folder is refused.
for f in last.ckpt.tmp best.ckpt.tmp step-12.ckpt.tmp; do printf 'partial save' > "$full/$f"; done
for f in notes.tmp step-x.ckpt.tmp avg.ckpt.tmp; do printf 'not a save of train' > "$full/$f"; done
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 5 > "$tmp/stale.log" 2>&1
status=$?
check "run over a killed save's leftovers exits 0 (got $status: $(tail -1 "$tmp/stale.log"))" [ $status -eq 0 ]
for f in last.ckpt.tmp best.ckpt.tmp step-12.ckpt.tmp; do
  check "the killed save's $f is removed" [ ! -e "$full/$f" ]
  check "and the removal is said ($f)" grep -q "removed '$full/$f', left by a save that was interrupted" "$tmp/stale.log"
done
for f in notes.tmp step-x.ckpt.tmp avg.ckpt.tmp; do check "$f, not a save of train, is kept" [ -e "$full/$f" ]; done

: > "$tmp/owner.log"
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 2000000000 > "$tmp/owner.log" 2>&1 &
bg=$!
for _ in $(seq 3000); do grep -q "resuming from" "$tmp/owner.log" && break; kill -0 "$bg" 2>/dev/null || break; sleep 0.01; done
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 2000000000 > "$tmp/second.log" 2>&1
status=$?
check "a second run on a folder in use exits 1 (got $status)" [ $status -eq 1 ]
check "and says the folder is in use ($(grep -m1 'projmt train:' "$tmp/second.log"))" \
  grep -q "projmt train: save_dir '$full' is in use by another projmt train" "$tmp/second.log"
check "the first run is still training" kill -0 "$bg"
kill -INT "$bg" 2>/dev/null
wait "$bg"
bg=""
check "the first run then stops cleanly and saves ($(tail -1 "$tmp/owner.log"))" grep -q "saved $full/last.ckpt" "$tmp/owner.log"
check "its last.ckpt loads" loads "$full/last.ckpt"
"$projmt" train "${common[@]}" --save-dir "$full" --max-steps 1 --fresh > "$tmp/after-owner.log" 2>&1
status=$?
check "once it ended, the folder is free again (got $status: $(tail -1 "$tmp/after-owner.log"))" [ $status -eq 0 ]

finish
