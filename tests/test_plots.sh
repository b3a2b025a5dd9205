#!/usr/bin/env bash
# test_plots.sh — scripts/plot_curves.py and scripts/plot_attention.py on
# small hand-written inputs: every figure is written as PNG and SVG, the SVGs
# carry the axis labels and legend entries, BLEU is plotted against time when
# the log has it (loss otherwise), and bad arguments fail with a message.
# SKIPPED when /usr/bin/python3 has no matplotlib.
# Usage: bash test_plots.sh <build-dir>   (the build is not used)
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

python=/usr/bin/python3
if ! "$python" -c "import matplotlib, numpy" 2>/dev/null; then
  echo "SKIPPED: $python has no matplotlib/numpy (apt-get install python3-matplotlib)"
  exit 77
fi
scripts=$(cd "$(dirname "$0")/../scripts" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-plots-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

header=$'kind\tstep\tepoch\tloss\taccuracy\tperplexity\tlr\tgrad_norm\ttokens_per_s\telapsed_s\tbleu\tchrf'
{
  echo "$header"
  printf 'train\t10\t0.5\t5.0\t0.10\t150\t0.001\t1.2\t1000\t10.0\t\t\n'
  printf 'valid\t10\t0.5\t4.8\t0.12\t120\t\t\t\t11.0\t\t\n'
  printf 'train\t20\t1.0\t4.0\t0.20\t60\t0.001\t1.1\t1000\t20.0\t\t\n'
  printf 'valid\t20\t1.0\t3.9\t0.22\t50\t\t\t\t21.0\t\t\n'
} > "$tmp/a.tsv"
sed 's/^valid\t10\t\(.*\)\t\t$/valid\t10\t\1\t3.5\t20.1/; s/^valid\t20\t\(.*\)\t\t$/valid\t20\t\1\t7.5\t30.2/' \
  "$tmp/a.tsv" > "$tmp/b.tsv"

"$python" "$scripts/plot_curves.py" --out "$tmp/plots" standard="$tmp/a.tsv" > "$tmp/log" 2>&1
rc=$?
check "plot_curves exits 0 ($(tail -n 2 "$tmp/log"))" [ $rc -eq 0 ]
for name in accuracy loss valid_time; do
  for fmt in png svg; do check "plot_curves wrote $name.$fmt" [ -s "$tmp/plots/$name.$fmt" ]; done
done
check "PNG is a PNG" grep -q PNG <(head -c 8 "$tmp/plots/accuracy.png")
check "accuracy axis label" grep -q "token accuracy (%)" "$tmp/plots/accuracy.svg"
check "legend names the run" grep -q "standard (valid)" "$tmp/plots/loss.svg"
check "loss vs time without BLEU" grep -q "validation cross-entropy" "$tmp/plots/valid_time.svg"

"$python" "$scripts/plot_curves.py" --out "$tmp/plots2" standard="$tmp/a.tsv" projection="$tmp/b.tsv" > "$tmp/log" 2>&1
check "two runs: exits 0" [ $? -eq 0 ]
check "two runs share a figure" grep -q "projection (train)" "$tmp/plots2/accuracy.svg"
check "BLEU vs time when logged" grep -q "validation BLEU" "$tmp/plots2/valid_time.svg"
check "time axis in minutes" grep -q "wall-clock training time (minutes)" "$tmp/plots2/valid_time.svg"

"$python" "$scripts/plot_curves.py" --out "$tmp/bad" "$tmp/a.tsv" > "$tmp/log" 2>&1
check "spec without a label fails" [ $? -ne 0 ]
check "...saying what it expected" grep -q "expected LABEL=path/train.tsv" "$tmp/log"
"$python" "$scripts/plot_curves.py" --out "$tmp/bad" x="$tmp/none.tsv" > "$tmp/log" 2>&1
check "missing TSV fails naming it" grep -q "$tmp/none.tsv" "$tmp/log"

# A dump as `projmt attention` writes it: 1 layer, 2 heads, 3 source and 3 target positions.
write_dump() {
  cat > "$1" <<JSON
{"source": "Hi there.", "target": "Hola.", "n_heads": 2, "sigma": "fixed",
 "attention": {"encoder_self": "$2", "decoder_self": "$2", "decoder_cross": "$2"},
 "src_pieces": ["\u2581Hi", "\u2581there.", "</s>"], "tgt_in_pieces": ["<s>", "\u2581Ho", "la."],
 "tgt_out_pieces": ["\u2581Ho", "la.", "</s>"],
 "sites": [
  {"site": "encoder_self", "layer": 0, "kind": "$2", "queries": "src", "keys": "src", "weights": [
    [[0.5, 0.25, 0.25], [0.2, 0.6, 0.2], [0.1, 0.1, 0.8]], [[1, 0, 0], [0, 1, 0], [0, 0, 1]]]},
  {"site": "decoder_self", "layer": 0, "kind": "$2", "queries": "tgt_out", "keys": "tgt_in", "weights": [
    [[1, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]], [[1, 0, 0], [0.9, 0.1, 0], [0.1, 0.1, 0.8]]]},
  {"site": "decoder_cross", "layer": 0, "kind": "$2", "queries": "tgt_out", "keys": "src", "weights": [
    [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]], [[0.3, 0.3, 0.4], [0.3, 0.4, 0.3], [0.4, 0.3, 0.3]]]}]}
JSON
}
write_dump "$tmp/std.json" standard
write_dump "$tmp/proj.json" projection
"$python" "$scripts/plot_attention.py" --out "$tmp/att" --name s1 standard="$tmp/std.json" \
  projection="$tmp/proj.json" > "$tmp/log" 2>&1
rc=$?
check "plot_attention exits 0 ($(tail -n 2 "$tmp/log"))" [ $rc -eq 0 ]
for name in s1_encoder_self s1_decoder_self s1_decoder_cross s1_cross_mean; do
  for fmt in png svg; do check "plot_attention wrote $name.$fmt" [ -s "$tmp/att/$name.$fmt" ]; done
done
check "both modes side by side" grep -q "projection L0 H1" "$tmp/att/s1_decoder_cross.svg"
check "pieces label the axes" grep -q "_there." "$tmp/att/s1_encoder_self.svg"
echo '{"broken": ' > "$tmp/broken.json"
"$python" "$scripts/plot_attention.py" --out "$tmp/att" x="$tmp/broken.json" > "$tmp/log" 2>&1
check "broken dump fails naming the file" grep -q "$tmp/broken.json" "$tmp/log"

# plot_front.py: a study at equal wall-clock time (per-mode step budgets).
cat > "$tmp/summary.json" <<'JSON'
{"reference_mode": "sss", "budget": {"max_steps_per_mode": {"sss": 100, "pps": 120, "spp": 110, "ppp": 130}},
 "modes": [{"label": "sss", "test_bleu": 40.0}, {"label": "pps", "test_bleu": 39.5},
           {"label": "spp", "test_bleu": 39.0}, {"label": "ppp", "test_bleu": 37.0}]}
JSON
"$python" "$scripts/plot_front.py" --summary "$tmp/summary.json" --out "$tmp/front" > "$tmp/log" 2>&1
rc=$?
check "plot_front exits 0 ($(tail -n 2 "$tmp/log"))" [ $rc -eq 0 ]
for fmt in png svg; do check "plot_front wrote front.$fmt" [ -s "$tmp/front/front.$fmt" ]; done
check "front axis names the reference" grep -q "step time relative to sss" "$tmp/front/front.svg"
front=$(cd "$scripts" && "$python" -c 'import json, sys; import plot_front as p
s = json.load(open(sys.argv[1]))
rows = p.front_rows(p.budgets_from_summary(s), "sss")
print(" ".join("%s:%.3f:%d" % (r["label"], r["time_ratio"], r["on_front"]) for r in rows))' "$tmp/summary.json" 2>&1)
# spp (slower and worse than pps) is the one mode off the front.
check "front: budgets give step times, spp is dominated ($front)" \
  [ "$front" = "sss:1.000:1 pps:0.833:1 spp:0.909:0 ppp:0.769:1" ]
# make_report.py: setups repeated with other seeds are grouped, averaged and
# paired seed by seed; the front is over the setups' means.
seeds=$(cd "$scripts" && "$python" -c 'import types, make_report as m
def run(label, flags, bleu):
    return {"label": label, "flags": flags.split(), "bleu_test": {"bleu": {"score": bleu}}}
b, p = "--lr 1e-3 --max-steps ", "--attention projection --lr 1e-3 --max-steps "
runs = [run("sss", b + "100 --seed 1", 40.0), run("pps", p + "120 --seed 1", 39.0),
        run("sss-seed2", b + "100 --seed 2", 41.0), run("pps-seed2", p + "120 --seed 2", 40.5)]
print(" ".join("%s=%s:%.2f:%.2f:%+.2f" % (r["label"], ",".join(r["modes"]), r["mean"], r["spread"], r["delta_mean"])
               for r in m.seed_rows(runs)))
print(" ".join("%s:%.3f:%.2f" % (r["label"], r["time_ratio"], r["bleu"]) for r in m.study_front(runs)))
print(m.budget_sentence(types.SimpleNamespace(budget="", budget_note=""), runs))
print(len(m.seed_rows(runs[:2])), len(m.seeds_section(runs[:2])))' 2>&1)
check "seeds: setups grouped, mean, spread, paired difference ($seeds)" \
  [ "$(sed -n 1p <<<"$seeds")" = "sss=sss,sss-seed2:40.50:1.00:+0.00 pps=pps,pps-seed2:39.75:1.50:-0.75" ]
check "seeds: the front is over the setups' means" [ "$(sed -n 2p <<<"$seeds")" = "sss:1.000:40.50 pps:0.833:39.75" ]
check "seeds: the report says the seeds differ" grep -q "^Seeds 1, 2 (" <<<"$(sed -n 3p <<<"$seeds")"
check "seeds: one seed each, no seed table" [ "$(sed -n 4p <<<"$seeds")" = "0 0" ]
# A seed trained in another --precision joins its setup and is named; two
# precisions at one seed (a precision study) stay two setups.
mixed=$(cd "$scripts" && "$python" -c 'import make_report as m
def run(label, flags, bleu):
    return {"label": label, "flags": flags.split(), "bleu_test": {"bleu": {"score": bleu}}}
b, p = "--precision bf16 --max-steps 100 ", "--attention projection --precision bf16 --max-steps 120 "
runs = [run("sss", b + "--seed 1", 40.0), run("pps", p + "--seed 1", 39.0),
        run("sss-seed2", b + "--seed 2", 41.0), run("pps-seed2", p.replace("bf16", "fp32") + "--seed 2", 40.0)]
print(" ".join("%s=%s:%.2f:%s" % (r["label"], ",".join(r["modes"]), r["mean"], r["precisions"]) for r in m.seed_rows(runs)))
print([l for l in m.seeds_section(runs) if l.startswith("| pps")][0])
same = [run("bf16", "--precision bf16 --seed 1", 40.0), run("fp32", "--precision fp32 --seed 1", 40.2),
        run("bf16-seed2", "--precision bf16 --seed 2", 41.0)]
print(" ".join("%s=%s" % (r["label"], ",".join(r["modes"])) for r in m.seed_rows(same)))' 2>&1)
check "seeds: a seed in another precision joins its setup ($mixed)" \
  [ "$(sed -n 1p <<<"$mixed")" = "sss=sss,sss-seed2:40.50:None pps=pps,pps-seed2:39.50:['bf16', 'fp32']" ]
check "seeds: ...and the table names its precision" grep -qF "| 39.00 (seed 1, bf16), 40.00 (seed 2, fp32) |" <<<"$(sed -n 2p <<<"$mixed")"
check "seeds: two precisions at one seed stay two setups" [ "$(sed -n 3p <<<"$mixed")" = "bf16=bf16,bf16-seed2 fp32=fp32" ]
echo '{"modes": []}' > "$tmp/nobudget.json"
"$python" "$scripts/plot_front.py" --summary "$tmp/nobudget.json" --out "$tmp/front2" > "$tmp/log" 2>&1
check "no budgets: plot_front fails" [ $? -ne 0 ]
check "...saying what it needs" grep -q "no per-mode step budgets" "$tmp/log"

finish
