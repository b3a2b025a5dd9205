#!/usr/bin/env bash
# test_dist_train.sh — `projmt train` data-parallel under `mpirun -np 2` on a
# made-up corpus with a tiny model (dropout 0, so masks cannot differ):
#   - 2 ranks x 1 thread log the same train and valid losses, accuracies and
#     gradient norms as 1 process on the same global batches, to fp tolerance
#     (only the float summation order differs);
#   - only rank 0 writes: one train.tsv row per step, one set of messages;
#   - a run started by 1 process resumes on 2 ranks from its last.ckpt and
#     continues exactly as the 1-process run;
#   - a rank killed with SIGKILL ends the job (non-zero, with a message), and
#     the last checkpoint rank 0 wrote is intact: the next run resumes from it.
# $1 = build dir. SKIPPED (77) without mpirun or an MPI build.
set -u
build_dir=${1:?usage: test_dist_train.sh BUILD_DIR}
source "$(dirname "$0")/dist_common.sh"
dist_require "$build_dir"
projmt="$build_dir/projmt"
work=$(mktemp -d "${TMPDIR:-/tmp}/projmt-dist-train-XXXXXX")
trap 'rm -rf "$work"' EXIT

# Made-up pairs: numbers and colours, no corpus text.
awk 'BEGIN {
  split("one|two|three|four|five|six", ne, "|"); split("uno|dos|tres|cuatro|cinco|seis", ns, "|");
  split("red|green|blue|black|white", ce, "|"); split("rojos|verdes|azules|negros|blancos", cs, "|");
  split("cats|dogs|birds|cars|houses|trees|books", oe, "|"); split("gatos|perros|pájaros|coches|casas|árboles|libros", os, "|");
  for (i = 0; i < 210; i++) {
    a = i % 6 + 1; b = int(i / 6) % 5 + 1; c = int(i / 30) % 7 + 1;
    if (i % 3 == 0) printf "I have %s %s %s.\tTengo %s %s %s.\n", ne[a], ce[b], oe[c], ns[a], os[c], cs[b];
    else printf "%s %s %s.\t%s %s %s.\n", ne[a], ce[b], oe[c], ns[a], os[c], cs[b];
  }
}' >"$work/pairs.tsv"
if ! "$projmt" prepare --config configs/tiny.ini --corpus "$work/pairs.tsv" --data-dir "$work/data" \
    --valid-size 24 --test-size 10 --vocab-size 90 >"$work/prepare.log" 2>&1; then
    cat "$work/prepare.log" >&2
    fail "projmt prepare failed"
    finish
    exit 1
fi

common=(--config configs/tiny.ini --data-dir "$work/data" --threads 1 --dropout 0 --log-every 1 --valid-every 4
        --epochs 0)

# rows FILE: "kind step loss accuracy grad_norm" per row of train.tsv.
rows() { awk -F'\t' 'NR > 1 { print $1, $2, $4, $5, $8 }' "$1"; }

# same_rows A B FIRST_STEP: every row of A from FIRST_STEP on matches B's row of
# that kind and step: losses and norms to 1e-4 relative, accuracies to 1e-3.
same_rows() {
    awk -v first="$3" '
        NR == FNR { want[$1 " " $2] = $0; next }
        $2 >= first {
            n++
            key = $1 " " $2
            if (!(key in want)) { print "no " key " row in the 1-process log"; bad++; next }
            split(want[key], w, " ")
            for (f = 3; f <= 5; f++) {
                if ($f == "" && w[f] == "") continue
                d = $f - w[f]; if (d < 0) d = -d
                tol = f == 4 ? 1e-3 : 1e-4 * (w[f] < 0 ? -w[f] : w[f]) + 1e-6
                if (d > tol) { print key ": column " f " is " $f ", 1 process had " w[f]; bad++ }
            }
        }
        END { if (n == 0) { print "no rows compared"; bad++ } exit bad > 0 }' <(rows "$2") <(rows "$1")
}

"$projmt" train "${common[@]}" --save-dir "$work/one" --max-steps 10 >"$work/one.log" 2>&1 ||
    fail "1-process run failed: $(tail -3 "$work/one.log")"
dist_mpirun 2 "$projmt" train "${common[@]}" --save-dir "$work/two" --max-steps 10 >"$work/two.log" 2>&1 ||
    fail "2-rank run failed: $(tail -3 "$work/two.log")"
if diff=$(same_rows "$work/two/train.tsv" "$work/one/train.tsv" 1); then pass; else fail "2 ranks differ from 1 process: $diff"; fi
[ "$(grep -c $'^train\t' "$work/two/train.tsv")" -eq 10 ] && pass || fail "expected 10 train rows (only rank 0 writes)"
[ "$(grep -c $'^valid\t' "$work/two/train.tsv")" -eq 3 ] && pass || fail "expected 3 valid rows"
[ "$(grep -c '^data-parallel: 2 ranks' "$work/two.log")" -eq 1 ] && pass || fail "no single data-parallel line in the 2-rank log"
[ "$(grep -c '^all-reduce: 10 steps' "$work/two.log")" -eq 1 ] && pass || fail "no single all-reduce summary in the 2-rank log"
[ "$(grep -c '^done:' "$work/two.log")" -eq 1 ] && pass || fail "messages printed by more than rank 0"
[ -s "$work/two/last.ckpt" ] && [ -s "$work/two/best.ckpt" ] && pass || fail "2-rank run wrote no checkpoints"
echo "steps 1-10, 2 ranks vs 1 process (kind step loss accuracy grad_norm):"
paste -d'|' <(rows "$work/one/train.tsv") <(rows "$work/two/train.tsv") | head -14

# Resume with another rank count: 1 process to step 4, then 2 ranks to 10.
"$projmt" train "${common[@]}" --save-dir "$work/switch" --max-steps 4 >"$work/switch1.log" 2>&1 ||
    fail "1-process first half failed"
dist_mpirun 2 "$projmt" train "${common[@]}" --save-dir "$work/switch" --max-steps 10 >"$work/switch2.log" 2>&1 ||
    fail "2-rank resume failed: $(tail -3 "$work/switch2.log")"
grep -q "resuming from $work/switch/last.ckpt at step 4" "$work/switch2.log" && pass || fail "2-rank run did not resume"
if diff=$(same_rows "$work/switch/train.tsv" "$work/one/train.tsv" 5); then pass; else fail "resumed on 2 ranks: $diff"; fi

# A rank dies mid-run: the job ends with a message; rank 0's last checkpoint survives.
dist_mpirun 2 "$projmt" train "${common[@]}" --save-dir "$work/die" --valid-every 2 --max-steps 1000000 \
    >"$work/die.log" 2>&1 &
job=$!
for _ in $(seq 1 300); do
    n=$(grep -c $'^valid\t' "$work/die/train.tsv" 2>/dev/null)
    [ "${n:-0}" -ge 2 ] && break
    sleep 0.1
done
victim=""
for pid in $(pgrep -f -- "--save-dir $work/die"); do
    # mpirun and timeout carry the same arguments; the ranks are the projmt processes.
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = projmt ] && victim=$pid
done
if [ -n "$victim" ]; then
    kill -KILL "$victim"
    wait "$job"
    status=$?
    [ $status -ne 0 ] && [ $status -ne 124 ] && pass || fail "job with a killed rank exited $status"
    grep -q "exited on signal 9" "$work/die.log" && pass || fail "no message about the killed rank: $(tail -5 "$work/die.log")"
    "$projmt" train "${common[@]}" --save-dir "$work/die" --max-steps 1 >"$work/after.log" 2>&1
    grep -q "resuming from $work/die/last.ckpt" "$work/after.log" && pass ||
        fail "checkpoint unusable after the crash: $(tail -3 "$work/after.log")"
else
    kill "$job" 2>/dev/null
    wait "$job"
    fail "no rank of the 2-rank run found to kill"
fi

finish
