#!/usr/bin/env bash
# test_eval_model_cli.sh — `projmt eval` on a checkpoint and `projmt attention`,
# on a tiny model trained here on a made-up corpus: --split gives training's
# own validation numbers back (same loss to the printed digit, perplexity =
# exp(nll)), JSON on the last line; --src translates and scores; the attention
# dump has every site, layer and head, rows that sum to 1 and a causal decoder
# self-attention; missing model, bad split and conflicting options fail clearly.
# Usage: bash test_eval_model_cli.sh <build-dir>
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/check.sh"

build=$(cd "${1:?usage: test_eval_model_cli.sh <build-dir>}" && pwd)
projmt="$build/projmt"
[ -x "$projmt" ] || { echo "FAIL: $projmt not built"; exit 1; }
source "$(dirname "$0")/study_fixture.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/projmt-eval-model-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# Value of a numeric or string field of a one-line JSON object.
field() { grep -o "\"$1\": *\"\{0,1\}[^,\"}]*" <<< "$2" | sed -n 1p | sed 's/^"[^"]*": *"\{0,1\}//'; }

make_tiny_data "$projmt" "$tmp" || { echo "FAIL: prepare"; exit 1; }
"$projmt" train --config "$tmp/tiny.ini" --data-dir "$tmp/data" --save-dir "$tmp/run" --max-steps 6 --epochs 0 \
  --quiet > "$tmp/train.log" 2>&1 || { echo "FAIL: training: $(tail -n 3 "$tmp/train.log")"; exit 1; }
model=$tmp/run/best.ckpt

# --- teacher-forced mode ------------------------------------------------------
out=$("$projmt" eval --model "$model" --split valid --data-dir "$tmp/data" --json 2>&1)
check "--split valid exits 0 ($out)" [ $? -eq 0 ]
json=$(tail -n 1 <<< "$out")
check "JSON on the last line" grep -q '^{.*}$' <<< "$json"
check "text line first" grep -q '^valid: loss [0-9.]* | perplexity' <<< "$out"
check "split field" [ "$(field split "$json")" = valid ]
check "20 valid pairs" [ "$(field pairs "$json")" = 20 ]
for key in tokens loss nll perplexity accuracy params train_flops_per_token; do
  check "JSON has $key" [ -n "$(field "$key" "$json")" ]
done
check "tokens > 20" [ "$(field tokens "$json")" -gt 20 ]
check "accuracy in [0, 1]" awk -v a="$(field accuracy "$json")" 'BEGIN { exit !(a >= 0 && a <= 1) }'
check "perplexity = exp(nll)" awk -v p="$(field perplexity "$json")" -v n="$(field nll "$json")" \
  'BEGIN { d = p - exp(n); exit !(d < 1e-3 * p && d > -1e-3 * p) }'
# best.ckpt was saved at the best validation: eval must give that row's loss back.
best_valid=$(awk -F'\t' '$1 == "valid" { if (best == "" || $4 < best) best = $4 } END { print best }' "$tmp/run/train.tsv")
check "valid loss $(field loss "$json") = training's best validation $best_valid" \
  [ "$(field loss "$json")" = "$best_valid" ]

out=$("$projmt" eval --model "$model" --split test --data-dir "$tmp/data" --json 2>&1)
check "--split test exits 0" [ $? -eq 0 ]
check "20 test pairs" [ "$(field pairs "$(tail -n 1 <<< "$out")")" = 20 ]

# --- failures -----------------------------------------------------------------
expect_fail() {  # what, expected status, expected message part, command...
  local what=$1 status=$2 message=$3; shift 3
  local got
  got=$("$@" 2>&1)
  local rc=$?
  check "$what exits $status (got $rc: $got)" [ $rc -eq "$status" ]
  check "$what says '$message'" grep -qF -- "$message" <<< "$got"
}
expect_fail "missing model" 1 "$tmp/run/none.ckpt" \
  "$projmt" eval --model "$tmp/run/none.ckpt" --split valid --data-dir "$tmp/data"
expect_fail "bad split" 2 "unknown --split 'dev'" \
  "$projmt" eval --model "$model" --split dev --data-dir "$tmp/data"
expect_fail "missing data" 1 "$tmp/nodata/valid.tok" \
  "$projmt" eval --model "$model" --split valid --data-dir "$tmp/nodata"
expect_fail "--model alone" 2 "exactly one of --split NAME or --src FILE" "$projmt" eval --model "$model"
expect_fail "--model with --hyp" 2 "exclude each other" \
  "$projmt" eval --model "$model" --hyp "$tmp/data/test.es" --ref "$tmp/data/test.es"
expect_fail "--src without --ref" 2 "--src needs --ref" "$projmt" eval --model "$model" --src "$tmp/data/test.en"
expect_fail "--split without --model" 2 "need --model" "$projmt" eval --split valid

# --- translation mode ---------------------------------------------------------
out=$("$projmt" eval --model "$model" --src "$tmp/data/test.en" --ref "$tmp/data/test.es" --beam-size 2 \
  --hyp-out "$tmp/test.hyp" --json 2>&1)
rc=$?
check "--src exits 0 ($(tail -n 2 <<< "$out"))" [ $rc -eq 0 ]
json=$(tail -n 1 <<< "$out")
check "sacreBLEU BLEU line" grep -q '^BLEU|nrefs:1|' <<< "$out"
check "sacreBLEU chrF line" grep -q '^chrF2|nrefs:1|' <<< "$out"
check "JSON has BLEU score" grep -q '"bleu": {"score": [0-9.e+-]*' <<< "$json"
check "JSON has chrF score" grep -q '"chrf": {"score": [0-9.e+-]*' <<< "$json"
check "JSON counts 20 sentences" [ "$(field sentences "$json")" = 20 ]
check "JSON names the beam" [ "$(field beam_size "$json")" = 2 ]
check "--hyp-out has one line per source" [ "$(wc -l < "$tmp/test.hyp")" -eq 20 ]
# Scoring the written hypotheses gives the same numbers as translating.
scored=$("$projmt" eval --hyp "$tmp/test.hyp" --ref "$tmp/data/test.es" --json 2>&1 | tail -n 1)
check "--hyp-out scores the same" [ "$(grep -o '"bleu": {"score": [^,]*' <<< "$scored")" = \
  "$(grep -o '"bleu": {"score": [^,]*' <<< "$json")" ]
printf 'one\ntwo\n' > "$tmp/two.es"
expect_fail "--src/--ref line mismatch" 1 "must align" \
  "$projmt" eval --model "$model" --src "$tmp/data/test.en" --ref "$tmp/two.es"

# --- attention dump -----------------------------------------------------------
out=$("$projmt" attention --model "$model" --src "The boy wants the book." --tgt "El niño quiere el libro." \
  --out "$tmp/att" 2>&1)
check "attention exits 0 ($out)" [ $? -eq 0 ]
check "attention.json written" [ -s "$tmp/att/attention.json" ]
out=$("$projmt" attention --model "$model" --src "The boy wants the book." --out "$tmp/att-greedy" 2>&1)
check "attention with the greedy translation exits 0 ($out)" [ $? -eq 0 ]
check "greedy attention.json written" [ -s "$tmp/att-greedy/attention.json" ]
expect_fail "attention without --src" 2 "are required" "$projmt" attention --model "$model" --out "$tmp/x"
expect_fail "attention, missing model" 1 "$tmp/none.ckpt" \
  "$projmt" attention --model "$tmp/none.ckpt" --src "Hi." --tgt "Hola." --out "$tmp/x"
if [ -x /usr/bin/python3 ]; then
  result=$(/usr/bin/python3 - "$tmp/att/attention.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
S, T = len(d["src_pieces"]), len(d["tgt_in_pieces"])
problems = []
if d["src_pieces"][-1] != "</s>" or d["tgt_in_pieces"][0] != "<s>" or d["tgt_out_pieces"][-1] != "</s>":
    problems.append("pieces lack </s> / <s>")
sites = [(s["site"], s["layer"]) for s in d["sites"]]
if sites != [("encoder_self", 0), ("decoder_self", 0), ("decoder_cross", 0)]:
    problems.append(f"sites {sites}")
shapes = {"encoder_self": (S, S), "decoder_self": (T, T), "decoder_cross": (T, S)}
for s in d["sites"]:
    w = s["weights"]
    if len(w) != d["n_heads"]:
        problems.append(f"{s['site']}: {len(w)} heads")
    for head in w:
        if (len(head), len(head[0])) != shapes[s["site"]]:
            problems.append(f"{s['site']}: shape {len(head)}x{len(head[0])}")
        if any(abs(sum(row) - 1) > 1e-3 for row in head):
            problems.append(f"{s['site']}: a row does not sum to 1")
        if s["site"] == "decoder_self" and any(head[q][k] > 1e-6 for q in range(T) for k in range(q + 1, T)):
            problems.append("decoder self-attention looks ahead")
print("; ".join(problems) or "ok")
PY
)
  check "attention dump is consistent ($result)" [ "$result" = ok ]
fi
finish
