#!/usr/bin/env bash
# test_train_release.sh — scripts/train_release.sh end to end on a made-up
# corpus with a tiny config and a few steps (no spa.txt needed): an earlier
# sitting is resumed, a used-up --session-minutes stops with status 75 and
# the same command then finishes; the run produces the int8 file, the
# results JSON and the model card; every number in the JSON is the one its
# source file holds (train.tsv, eval and bench JSON lines, the files
# themselves), the chosen candidate is the best by validation BLEU (chrF on
# a tie), the card is exactly what model_card.py writes from the JSON and
# shows its numbers; the exported file translates; a second run reuses the
# finished training; --precision reaches projmt train only when given;
# --max-mb refuses a file too large; an existing data dir is used as it is,
# and an explicit --corpora refuses one prepared from other sources;
# --finetune-steps adds a fine-tuning run on the primary corpus; bad usage
# exits 2.
# FLORES is found through $PROJMT_FLORES (a made-up pair of files here).
# Usage: bash test_train_release.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=$(cd "${1:?usage: test_train_release.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
[ -x /usr/bin/python3 ] || { echo "SKIPPED: /usr/bin/python3 not installed (apt-get install python3)"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
release=$here/../scripts/train_release.sh
source "$here/study_fixture.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-release-XXXXXX")
trap '[ -n "${KEEP_TMP:-}" ] || rm -rf "$tmp"' EXIT
last_lines() { tail -n 3 "$1" | tr '\n' ' '; }

make_tiny_data "$projmt" "$tmp" || { echo "FAIL: prepare"; exit 1; }
mkdir -p "$tmp/flores"
cp "$tmp/data/test.en" "$tmp/flores/flores200-dev.en"
cp "$tmp/data/test.es" "$tmp/flores/flores200-dev.es"
export PROJMT_FLORES=$tmp/flores
run=$tmp/run out=$tmp/out
args=(--config "$tmp/tiny.ini" --data-dir "$tmp/data" --run "$run" --out-dir "$out" --build "$build"
      --max-steps 12 --valid-every 3 --valid-bleu-sentences 10 --threads 1 --select-sentences 16
      --bench-sentences 12)

# A sitting with no time left stops before training, with status 75.
bash "$release" "${args[@]}" --session-minutes 0.0001 > "$tmp/sitting0.log" 2>&1
status=$?
check "a used-up sitting exits 75 (got $status: $(last_lines "$tmp/sitting0.log"))" [ $status -eq 75 ]
check "...saying how to go on" grep -q "run the same command again" "$tmp/sitting0.log"
check "...without results" [ ! -e "$out/en-es.results.json" ]

# An earlier sitting trained 6 of the 12 steps (the recipe's flags).
mkdir -p "$run/logs"
"$projmt" train --config "$tmp/tiny.ini" --attention standard --data-dir "$tmp/data" --save-dir "$run" \
  --max-steps 6 --epochs 0 --minutes 0 --ema 0.999 --keep-last 5 --valid-every 3 --valid-bleu-sentences 10 \
  --early-stopping-metric bleu --threads 1 >> "$run/logs/train.log" 2>&1
status=$?
check "earlier sitting trained" [ $status -eq 0 ]

bash "$release" "${args[@]}" > "$tmp/release.log" 2>&1
status=$?
check "train_release.sh exits 0 (got $status: $(last_lines "$tmp/release.log"))" [ $status -eq 0 ]
check "it resumed the earlier sitting" grep -q "resuming from .* at step 6" "$run/logs/train.log"
check "it found FLORES through PROJMT_FLORES" grep -q "FLORES-200 dev:" "$tmp/release.log"
for f in "$out/en-es.int8.pmt" "$out/en-es.results.json" "$out/README.md" "$run/release/en-es.fp32.pmt" \
         "$run/logs/train.log" "$run/logs/config.ini" "$run/release/test-int8.hyp" "$run/release/flores-fp32.hyp"; do
  check "$f written" [ -s "$f" ]
done
check "no checkpoint in the output folder" [ -z "$(find "$out" -name '*.ckpt')" ]
check "only the shipped file, results and card in the output folder" \
  [ "$(cd "$out" && ls | tr '\n' ' ')" = "README.md en-es.int8.pmt en-es.results.json " ]

# The recipe trains in the default precision, auto: what this CPU runs best.
expect_precision=fp32
if cpu_has_bf16 "$projmt"; then expect_precision=bf16; fi
export expect_precision
# The JSON holds the numbers of the files it was made from.
json_check=$(repo="$here/.." /usr/bin/python3 - "$run" "$out" <<'PY'
import csv, gzip, hashlib, json, os, sys
run, out = sys.argv[1:]
work = os.path.join(run, "release")
r = json.load(open(os.path.join(out, "en-es.results.json")))
bad = []
def expect(cond, what):
    if not cond: bad.append(what)
def line(name): return json.loads(open(os.path.join(work, name)).read())
rows = list(csv.DictReader(open(os.path.join(run, "train.tsv")), delimiter="\t"))
t = r["training"]
expect(r["format"] == "projmt-release-results" and r["weights"] == "int8", "format")
expect(t["steps"] == 12 == int(rows[-1]["step"]), f"steps {t['steps']}")
expect(abs(t["wall_minutes"] - float(rows[-1]["elapsed_s"]) / 60) < 1e-9, "wall minutes")
expect(t["sittings"] == 2, f"sittings {t['sittings']}")
expect(t["precision"] == os.environ["expect_precision"] and t["ema"] == 0.999 and t["keep_last"] == 5,
       f"recipe (precision {t['precision']})")
expect(t["budget"] == {"max_steps": 12}, f"budget {t['budget']}")
expect(r["config"]["model"]["d_model"] == 16, "config")
s = r["selection"]
labels = [c["label"] for c in s["candidates"]]
expect(labels == ["best", "avg", "last-ema", "last-raw"], f"candidates {labels}")
for c in s["candidates"]:
    j = line(f"select-{c['label']}.json")
    expect(c["bleu"] == j["bleu"]["score"] and c["chrf"] == j["chrf"]["score"], f"{c['label']} scores")
    expect(j["sentences"] == 16 and j["beam_size"] == 4, f"{c['label']} scope")
# the first candidate with the highest (BLEU, chrF), as max() returns
top = max(s["candidates"], key=lambda c: (c["bleu"], c["chrf"]))
expect(s["chosen"] == top["label"], f"chosen {s['chosen']}, best {top['label']}")
expect(s["sentences"] == 16, "selection sentences")
for split, name in (("test", "test"), ("flores200_dev", "flores")):
    for w in ("fp32", "int8"):
        j = line(f"eval-{name}-{w}.json")
        e = r["eval"][split][w]
        expect(e["bleu"] == j["bleu"]["score"] and e["chrf"] == j["chrf"]["score"], f"{split} {w} scores")
        expect(e["sentences"] == 20 and e["beam_size"] == 4, f"{split} {w} scope")
for w in ("fp32", "int8"):
    j = line(f"eval-test-loss-{w}.json")
    expect(r["eval"]["test"][w]["loss"] == j["loss"], f"test loss {w}")
    rounds = [json.loads(x) for x in open(os.path.join(work, f"bench-{w}.json")) if x.strip()]
    sp = r["speed"][w]
    expect(len(rounds) == 3 and sp["rounds"] == 3 and len(sp["all_runs"]) == 3, f"three bench rounds {w}")
    expect(sp["threads"] == len(os.sched_getaffinity(0)) and sp["sentences"] == 12, f"speed scope {w}")
    loads = [float(x) for x in open(os.path.join(work, f"bench-{w}.loadavg")).read().split()]
    expect(len(loads) == 3 and sp["load_average_1min"] == max(loads), f"load {w}")
    for key, label in (("greedy", "greedy, limits"), ("beam4", "beam 4, limits")):
        runs = sorted((x for j in rounds for x in j["runs"] if x["run"] == label), key=lambda x: x["sentences_per_s"])
        expect(sp[key]["sentences_per_s"] == runs[1]["sentences_per_s"] and
               sp[key]["src_words_per_s"] == runs[1]["src_words_per_s"], f"{key} speed {w}: the median round")
expect(r["parameters"] == line("eval-test-loss-int8.json")["params"], "parameters")
for w, path in (("int8", os.path.join(out, "en-es.int8.pmt")), ("fp32", os.path.join(work, "en-es.fp32.pmt"))):
    f = r["files"][w]
    data = open(path, "rb").read()
    expect(f["bytes"] == len(data) and f["sha256"] == hashlib.sha256(data).hexdigest(), f"{w} file facts")
    expect(gzip.open(path).read(8) == b"PMTMODEL", f"{w} is an exported model file")
expect(r["files"]["int8"]["bytes"] < r["files"]["fp32"]["bytes"], "int8 smaller than fp32")
expect(r["data"]["pairs"] == {"train": 240, "valid": 20, "test": 20}, "data")
src = r["data"]["sources"]
expect(len(src) == 1 and src[0]["files"] == ["pairs.tsv"] and src[0]["role"] == "primary"
       and src[0]["train_pairs"] == 240 and src[0]["weight"] == 1, f"sources {src}")
expect(src[0]["sha256"] == [hashlib.sha256(open(os.path.join(os.path.dirname(run), "pairs.tsv"), "rb").read())
                            .hexdigest()], "source sha256")
quick = [x.rstrip("\n") for x in open(os.path.join(os.environ["repo"], "scripts", "quickstart.en"))]
hyps = [x.rstrip("\n") for x in open(os.path.join(work, "samples.es"))]
expect([x["en"] for x in r["samples"]] == quick and [x["es"] for x in r["samples"]] == hyps
       and len(hyps) == len(quick) == 5, f"samples {r['samples']}")
expect("--max-steps 12" in r["command"] and "--session-minutes" not in r["command"], "command")
expect(all(f not in r["command"] for f in ("--run", "--out-dir", "--build")), "command names no local folder")
# a committed results file names no machine's absolute path (FLORES here is in $TMPDIR)
def strings(x):
    if isinstance(x, dict): return [s for v in x.values() for s in strings(v)]
    if isinstance(x, list): return [s for v in x for s in strings(v)]
    return [x] if isinstance(x, str) else []
absolute = [s for s in strings(r) if s.startswith("/")]
expect(not absolute, f"absolute paths {absolute}")
expect(r["flores"] == "flores200-dev", f"flores shown as {r['flores']}")
print("ok" if not bad else "; ".join(bad))
PY
)
check "results JSON matches its sources ($json_check)" [ "$json_check" = ok ]

# The card is model_card.py's rendering of the JSON, and shows its numbers.
card=$out/README.md
/usr/bin/python3 "$here/../scripts/model_card.py" "$out/en-es.results.json" > "$tmp/card.md"
check "card is generated from the JSON (no hand edits)" cmp -s "$tmp/card.md" "$card"
card_numbers=$(/usr/bin/python3 - "$out/en-es.results.json" "$card" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1])); card = open(sys.argv[2]).read()
missing = []
def want(text):
    if text not in card: missing.append(text)
for split in ("test", "flores200_dev"):
    e = r["eval"][split]
    want(" | ".join(f"{e[w]['bleu']:.2f}" for w in ("fp32", "int8")) + " |")
    want(" | ".join(f"{e[w]['chrf']:.2f}" for w in ("fp32", "int8")) + " |")
for w in ("fp32", "int8"):
    want(f"| {w}, greedy | {r['speed'][w]['greedy']['sentences_per_s']:,.1f} |")
    want(f"| {w}, beam 4 | {r['speed'][w]['beam4']['sentences_per_s']:,.1f} |")
    want(f"{r['files'][w]['bytes'] / 1e6:.2f} MB")
want(f"{r['training']['steps']:,} steps")
want(f"{r['parameters']:,}")
want(r["command"])
want("| pairs (primary: valid/test) | `pairs.tsv` | — | not recorded: check its terms | 1 |")
for x in r["samples"]:
    want(f"| {x['en']} | {x['es']} |")
want("decay 0.999"); want("newest 5 numbered checkpoints"); want("training precision | " + os.environ["expect_precision"])
print("ok" if not missing else "missing: " + "; ".join(missing))
PY
)
check "card shows the JSON's numbers ($card_numbers)" [ "$card_numbers" = ok ]

# A model trained on several known corpora credits each one with its licence.
card_sources=$(/usr/bin/python3 - "$out/en-es.results.json" "$here/../scripts" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
import model_card
r = json.load(open(sys.argv[1]))
row = dict(r["data"]["sources"][0], role="extra", weight=1)
r["data"]["sources"] = [dict(row, name="spa", role="primary", weight=3, files=["spa.txt"])] + [
    dict(row, name=n, files=[f]) for n, f in (("pydocs", "pydocs.en-es.tsv.gz"), ("lohelp", "lohelp.en-es.tsv.gz"),
                                               ("bible", "bible.en-es.tsv.gz"), ("mine", "mine.en+mine.es"))]
r["data"]["sources"][-1]["files"] = ["mine.en", "mine.es"]
card = model_card.card(r)
missing = [t for t in ("CC-BY 2.0 FR", "derivative of the Tatoeba data", "manythings.org", "| spa (primary: valid/test) |",
                       "| 3 |", "CC0", "MPL-2.0", "The Document Foundation", "public domain", "archaic Spanish",
                       "| mine | `mine.en` + `mine.es` | — | not recorded", "spa, pydocs, lohelp, bible and mine",
                       "counted once per unit of its source's weight", "test split of Tatoeba (spa.txt)")
           if t not in card]
# a row whose files could not be matched is unknown, and the rows after it keep their own licences
r["data"]["sources"][1]["files"] = []
card = model_card.card(r)
missing += [t for t in ("| pydocs | — | — | not recorded", "| lohelp | `lohelp.en-es.tsv.gz` | LibreOffice help")
            if t not in card]
print("ok" if not missing else "missing: " + "; ".join(missing))
PY
)
check "a card of several corpora credits each with its licence ($card_sources)" [ "$card_sources" = ok ]

printf 'I see the apple.\nTom wants the book.\n' | "$projmt" translate --model "$out/en-es.int8.pmt" \
  > "$tmp/translated.txt" 2> "$tmp/translate.err"
status=$?
check "the int8 file translates (status $status: $(last_lines "$tmp/translate.err"))" [ $status -eq 0 ]
check "...one line per input line" [ "$(wc -l < "$tmp/translated.txt")" -eq 2 ]

# Again: the finished training is reused, even in a used-up sitting; results are rewritten.
before=$(md5sum < "$run/train.tsv")
cp "$out/en-es.results.json" "$tmp/results-first.json"
bash "$release" "${args[@]}" --session-minutes 0.0001 > "$tmp/again.log" 2>&1
status=$?
check "second run exits 0 (got $status: $(last_lines "$tmp/again.log"))" [ $status -eq 0 ]
check "...reusing the finished training" grep -q "train: finished earlier" "$tmp/again.log"
check "...train.tsv untouched" [ "$before" = "$(md5sum < "$run/train.tsv")" ]
# (all but the time of writing and the measured speed)
same=$(/usr/bin/python3 - "$tmp/results-first.json" "$out/en-es.results.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for r in (a, b):
    del r["created_utc"], r["speed"]
print("same" if a == b else "different")
PY
)
check "...the same training facts, choice and scores ($same)" [ "$same" = same ]

# --fresh starts over: the old run's numbered checkpoints (step 12 and
# before) are not kept in place of the new run's, nor averaged.
bash "$release" "${args[@]}" --run "$tmp/run-fresh" --out-dir "$tmp/out-fresh" > "$tmp/fresh0.log" 2>&1
bash "$release" "${args[@]}" --run "$tmp/run-fresh" --out-dir "$tmp/out-fresh" --max-steps 6 --fresh \
  > "$tmp/fresh.log" 2>&1
status=$?
check "--fresh run exits 0 ($(last_lines "$tmp/fresh.log"))" [ $status -eq 0 ]
check "...trained 6 steps" [ "$(awk -F'\t' 'END { print $2 }' "$tmp/run-fresh/train.tsv")" = 6 ]
check "...keeps only its own numbered checkpoints ($(cd "$tmp/run-fresh" && ls step-*.ckpt | tr '\n' ' '))" \
  [ "$(cd "$tmp/run-fresh" && ls step-*.ckpt | tr '\n' ' ')" = "step-3.ckpt step-6.ckpt " ]
check "...and averages them" grep -q "average of 2 checkpoint(s): .*step-3.ckpt, .*step-6.ckpt" \
  "$tmp/run-fresh/logs/average.log"

# --max-mb: a file over the limit is refused (after the results are written).
bash "$release" "${args[@]}" --max-mb 0.01 > "$tmp/big.log" 2>&1
status=$?
check "--max-mb refuses a larger file (status $status)" [ $status -eq 1 ]
check "...naming the limit" grep -q "larger than --max-mb 0.01" "$tmp/big.log"

# --precision reaches projmt train only when given: a build whose train knows
# the flag records it in the effective config; one that does not refuses it.
if grep -q -- "--precision" <<< "$("$projmt" train --help 2>&1)"; then
  bash "$release" "${args[@]}" --run "$tmp/run-precision" --out-dir "$tmp/out-precision" --precision fp32 \
    > "$tmp/precision.log" 2>&1
  status=$?
  check "--precision fp32 run exits 0 ($(last_lines "$tmp/precision.log"))" [ $status -eq 0 ]
  check "...and reaches train's config" grep -q "^precision = fp32" "$tmp/run-precision/logs/config.ini"
else
  bash "$release" "${args[@]}" --run "$tmp/run-precision" --out-dir "$tmp/out-precision" --precision fp32 \
    > "$tmp/precision.log" 2>&1
  status=$?
  check "--precision goes to a train without the flag, which refuses it (status $status)" [ $status -eq 1 ]
  check "...saying so" grep -q "projmt train refused the recipe's flags" "$tmp/precision.log"
fi
check "the finished run's recipe is recorded" [ -s "$run/logs/trained" ]
check "without --precision, train gets no such flag" [ -z "$(grep -e '--precision' "$run/logs/trained")" ]

# A data dir not prepared yet: --corpora all (the default) prepares spa.txt
# (weight 3, valid/test) with the three extra corpora; spa prepares it alone.
# The corpora here are made-up stand-ins found through the usual variables.
extra=$tmp/extra
mkdir -p "$extra"
awk -F'\t' 'NR <= 40 { print $1 " one\t" $2 " uno" }' "$tmp/pairs.tsv" | gzip > "$extra/pydocs.en-es.tsv.gz"
awk -F'\t' 'NR <= 40 { print $1 " two\t" $2 " dos" }' "$tmp/pairs.tsv" | gzip > "$extra/lohelp.en-es.tsv.gz"
awk -F'\t' 'NR <= 40 { print "Gen 1:" NR "\t" $1 " three\t" $2 " tres" }' "$tmp/pairs.tsv" |
  gzip > "$extra/bible.en-es.tsv.gz"
(cat "$tmp/tiny.ini"; printf '[data]\nvalid_size = 20\ntest_size = 20\nvocab_size = 100\n') > "$tmp/tiny-data.ini"
for corpora in all spa; do
  PROJMT_CORPUS=$tmp/pairs.tsv PROJMT_EXTRA_DIR=$extra bash "$release" --config "$tmp/tiny-data.ini" --build "$build" \
    --corpora $corpora --data-dir "$tmp/data-$corpora" --run "$tmp/run-$corpora" --session-minutes 0.0001 \
    > "$tmp/corpora-$corpora.log" 2>&1
  status=$?
  check "--corpora $corpora prepares the data, then the sitting ends (status $status: $(last_lines "$tmp/corpora-$corpora.log"))" \
    [ $status -eq 75 ]
done
sources=$(/usr/bin/python3 - "$tmp/data-all/manifest.json" "$tmp/data-spa/manifest.json" <<'PY'
import json, sys
def table(path): return [(s["name"], s["role"], s["weight"], s["kept_pairs"] > 0) for s in json.load(open(path))["sources"]]
print(table(sys.argv[1]), len(table(sys.argv[2])))
PY
)
check "...all: spa.txt weight 3 with pydocs, lohelp and bible; spa: one source ($sources)" [ "$sources" = \
  "[('spa', 'primary', 3, True), ('pydocs', 'extra', 1, True), ('lohelp', 'extra', 1, True), ('bible', 'extra', 1, True)] 1" ]
check "...the test split is the same either way" cmp -s "$tmp/data-all/test.es" "$tmp/data-spa/test.es"
# An existing data dir is used as it is; a --corpora given explicitly must be
# what it was prepared from (a mixed dir under --corpora spa was once taken
# silently).
corpora_run() {   # corpora_run LOG [release options]: the release's status
  local log=$1; shift
  PROJMT_CORPUS=$tmp/pairs.tsv PROJMT_EXTRA_DIR=$extra bash "$release" --config "$tmp/tiny-data.ini" --build "$build" \
    --run "$tmp/run-reuse" --session-minutes 0.0001 "$@" > "$log" 2>&1
}
corpora_run "$tmp/reuse-spa.log" --corpora spa --data-dir "$tmp/data-all"
status=$?
check "--corpora spa on a dir prepared from all four sources is refused (status $status)" [ $status -eq 2 ]
check "...naming the dir and what it holds" \
  grep -q "data-all was prepared from other sources (spa:3 pydocs:1 lohelp:1 bible:1)" "$tmp/reuse-spa.log"
corpora_run "$tmp/reuse-all-spa.log" --corpora all --data-dir "$tmp/data-spa"
status=$?
check "--corpora all on a spa.txt-only dir is refused (status $status)" [ $status -eq 2 ]
for case in "all data-all" "spa data-spa"; do
  read -r corpora dir <<< "$case"
  corpora_run "$tmp/reuse-$corpora.log" --corpora "$corpora" --data-dir "$tmp/$dir"
  status=$?
  check "--corpora $corpora on the dir it prepared is used (status $status)" [ $status -eq 75 ]
done
check "...printing its sources" grep -q "prepared: $tmp/data-all (sources: spa:3 pydocs:1 lohelp:1 bible:1)" \
  "$tmp/reuse-all.log"
corpora_run "$tmp/reuse-any.log" --data-dir "$tmp/data-spa"
status=$?
check "without --corpora any prepared dir is used (status $status)" [ $status -eq 75 ]
rm "$extra/bible.en-es.tsv.gz"
PROJMT_CORPUS=$tmp/pairs.tsv PROJMT_EXTRA_DIR=$extra bash "$release" --config "$tmp/tiny-data.ini" --build "$build" \
  --data-dir "$tmp/data-nobible" --run "$tmp/run-nobible" > "$tmp/corpora-nobible.log" 2>&1
status=$?
check "a missing extra corpus stops it (status $status)" [ $status -ne 0 ] && [ $status -ne 75 ]
check "...naming the file" grep -q "bible.en-es.tsv.gz" "$tmp/corpora-nobible.log"
check "...and preparing nothing" [ ! -e "$tmp/data-nobible/manifest.json" ]

# Fine-tuning (--finetune-steps): after the main run, a run of its own on the
# primary corpus alone, prepared with the main data's vocabulary and split;
# the candidates are the fine-tuned run's and the main run's model.
ft_args=("${args[@]}" --run "$tmp/run-ft" --out-dir "$tmp/out-ft" --finetune-steps 4 --finetune-warmup 2)
PROJMT_CORPUS=$tmp/pairs.tsv bash "$release" "${ft_args[@]}" > "$tmp/ft.log" 2>&1
status=$?
check "with --finetune-steps it exits 0 (got $status: $(last_lines "$tmp/ft.log"))" [ $status -eq 0 ]
check "...the fine-tuning data has the main data's vocabulary" cmp -s "$tmp/data/spm.model" "$tmp/data-finetune-spa/spm.model"
check "...and its validation split" cmp -s "$tmp/data/valid.tok" "$tmp/data-finetune-spa/valid.tok"
check "...the fine-tuning run starts from the main run's model" \
  grep -q "fine-tuning from $tmp/run-ft/last.ckpt (its moving average)" "$tmp/run-ft/finetune/logs/train.log"
check "...and trains its 4 steps" grep -q "max_steps reached at step 4" "$tmp/run-ft/finetune/logs/train.log"
check "...the results record it, the main run's model among the candidates" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
ft = r["finetune"]
assert ft["steps"] == 4 and ft["lr"] == 2e-4 and ft["warmup"] == 2, ft
assert "main" in [c["label"] for c in r["selection"]["candidates"]], r["selection"]
assert r["training"]["steps"] == 12, r["training"]' "$tmp/out-ft/en-es.results.json"
check "...and the card says so" grep -q "| fine-tuning | then 4 steps on .pairs.tsv. alone" "$tmp/out-ft/README.md"
PROJMT_CORPUS=$tmp/pairs.tsv bash "$release" "${ft_args[@]}" > "$tmp/ft-again.log" 2>&1
check "...run again, both trainings are reused" \
  bash -c "grep -q 'train: finished earlier' '$tmp/ft-again.log' && grep -q 'fine-tune: finished earlier' '$tmp/ft-again.log'"
# --finetune-from: no main run; the given model (here the release above) is
# copied into the run folder and fine-tuned; the card names it. The file is
# the one this release writes over (as with --finetune-from models/… and the
# default --out-dir models): the results must give the sha256 of the file
# that was fine-tuned, not of the new one (they did before).
cp "$out/en-es.int8.pmt" "$tmp/start.int8.pmt"
mkdir -p "$tmp/out-from"
cp "$out/en-es.int8.pmt" "$tmp/out-from/en-es.int8.pmt"
from_args=("${args[@]}" --run "$tmp/run-from" --out-dir "$tmp/out-from" --finetune-steps 3
           --finetune-from "$tmp/out-from/en-es.int8.pmt")
PROJMT_CORPUS=$tmp/pairs.tsv bash "$release" "${from_args[@]}" > "$tmp/from.log" 2>&1
status=$?
check "with --finetune-from it exits 0 (got $status: $(last_lines "$tmp/from.log"))" [ $status -eq 0 ]
check "...training no main run" bash -c "grep -q 'train: none (fine-tuning $tmp/out-from/en-es.int8.pmt' '$tmp/from.log' && [ ! -e '$tmp/run-from/last.ckpt' ]"
check "...fine-tuning a copy of the file" cmp -s "$tmp/start.int8.pmt" "$tmp/run-from/start.pmt"
check "...from its weights" grep -q "fine-tuning from $tmp/run-from/start.pmt" "$tmp/run-from/finetune/logs/train.log"
check "...writing the new model over it" bash -c "! cmp -s '$tmp/start.int8.pmt' '$tmp/out-from/en-es.int8.pmt'"
check "...the results name the file fine-tuned by its sha256 and give the fine-tuning run's steps" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["started_from"]
assert s["sha256"] == sys.argv[2] and s["stage"] == "finetune" and s["release"] is None, s
assert r["training"]["steps"] == 3 and r["finetune"]["steps"] == 3, (r["training"], r["finetune"])' \
  "$tmp/out-from/en-es.results.json" "$(sha256sum "$tmp/start.int8.pmt" | cut -d' ' -f1)"
check "...and the card says where it started" \
  grep -q "| started from | .en-es.int8.pmt. (no committed release), sha256 $(sha256sum "$tmp/start.int8.pmt" | cut -c1-12)…: the rows below are its fine-tuning" \
  "$tmp/out-from/README.md"
check "...and names it as the candidate 'main'" grep -q "| \`main\` | \`en-es.int8.pmt\`, the model fine-tuned |" \
  "$tmp/out-from/README.md"
# A main run that starts from another model (-- --init-from FILE, e.g. to
# train a shipped model further on the mix): the results and the card name
# the file and the run's schedule.
"$projmt" export --model "$run/last.ckpt" --out "$tmp/init.fp32.pmt" --weights fp32 > "$tmp/init-export.log" 2>&1
init_args=("${args[@]}" --run "$tmp/run-init" --out-dir "$tmp/out-init" --max-steps 4 --finetune-steps 2 --
           --init-from "$tmp/init.fp32.pmt" --warmup 2 --lr-schedule linear --min-lr 1e-4)
bash "$release" "${init_args[@]}" > "$tmp/init.log" 2>&1
status=$?
check "a main run with --init-from exits 0 (got $status: $(last_lines "$tmp/init.log"))" [ $status -eq 0 ]
check "...starting from the file's weights" grep -q "fine-tuning from $tmp/init.fp32.pmt" "$tmp/run-init/logs/train.log"
check "...the results name it for the main run" /usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["started_from"]
assert s["sha256"] == sys.argv[2] and s["stage"] == "main" and r["finetune"]["steps"] == 2, (s, r["finetune"])
assert r["config"]["train"]["init_from"] == s["path"] and s["path"].endswith("init.fp32.pmt"), (r["config"]["train"], s)' \
  "$tmp/out-init/en-es.results.json" "$(sha256sum "$tmp/init.fp32.pmt" | cut -d' ' -f1)"
check "...and the card gives it and the schedule" bash -c "grep -q '| started from | .*init.fp32.pmt. (no committed release), sha256 .*: the run above began from its weights' '$tmp/out-init/README.md' &&
  grep -q 'warm-up steps, linear decay to 0.0001 at step 4,' '$tmp/out-init/README.md' &&
  grep -q '| fine-tuning | then 2 steps on' '$tmp/out-init/README.md' &&
  grep -q \"| \\\`main\\\` | the main run's last.ckpt (moving average), before fine-tuning |\" '$tmp/out-init/README.md'"
check "...its fine-tuning has its own schedule, not the main run's" \
  grep -qx "lr_schedule = inverse-sqrt" "$tmp/run-init/finetune/logs/config.ini"
# The release a started-from file belongs to is found through the committed
# results files: a made-up history of two releases.
check "a started-from file is found in the committed release it belongs to" /usr/bin/python3 - "$here/../scripts" "$tmp/git" <<'PY'
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
import release_results as rr
repo = sys.argv[2]
os.makedirs(os.path.join(repo, "models"))
def commit(files, message):
    with open(os.path.join(repo, "models", "m.results.json"), "w") as f:
        json.dump({"weights": "int8", "files": files}, f)
    for cmd in (["add", "models"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", repo, *cmd], check=True)
    return subprocess.run(["git", "-C", repo, "log", "-1", "--format=%h"], capture_output=True, text=True).stdout.strip()
subprocess.run(["git", "init", "-q", repo], check=True)
first = commit({"int8": {"path": "models/m.int8.pmt", "sha256": "aa"}, "fp32": {"path": "x.pmt", "sha256": "bb"}}, "one")
second = commit({"int8": {"path": "models/m.int8.pmt", "sha256": "cc"}, "fp32": {"path": "x.pmt", "sha256": "dd"}}, "two")
rr.REPO = repo
results = os.path.join(repo, "models", "m.results.json")
got = [rr.released_as(d, results) for d in ("aa", "bb", "dd", "ee")]
want = [{"commit": first, "weights": "int8", "shipped_path": "models/m.int8.pmt"},
        {"commit": first, "weights": "fp32", "shipped_path": "models/m.int8.pmt"},
        {"commit": second, "weights": "fp32", "shipped_path": "models/m.int8.pmt"}, None]
assert got == want, (got, want)
assert rr.released_as("aa", "/elsewhere/m.results.json") is None
PY
bash "$release" --finetune-from "$tmp/start.int8.pmt" > "$tmp/usage-from.log" 2>&1
status=$?
check "--finetune-from without --finetune-steps exits 2 (got $status)" [ $status -eq 2 ]
bash "$release" --finetune-lr fast > "$tmp/usage-ft.log" 2>&1
status=$?
check "bad --finetune-lr exits 2 (got $status)" [ $status -eq 2 ]

bash "$release" --weights fp16 > "$tmp/usage.log" 2>&1
status=$?
check "bad --weights exits 2 (got $status)" [ $status -eq 2 ]
bash "$release" --no-such-option > "$tmp/usage2.log" 2>&1
status=$?
check "unknown option exits 2 (got $status)" [ $status -eq 2 ]
bash "$release" --help > "$tmp/help.log" 2>&1
check "--help describes --session-minutes" grep -q -- "--session-minutes M" "$tmp/help.log"

finish
