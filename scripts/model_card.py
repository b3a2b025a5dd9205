#!/usr/bin/env python3
"""model_card.py — writes the model card (models/README.md) of a shipped
model from its results file (NAME.results.json, written by
scripts/release_results.py at the end of scripts/train_release.sh). Every
number on the card is read from that file; only words are written here, so
the card cannot drift from what was measured. Python 3 standard library only.

  model_card.py models/en-es.results.json [--out models/README.md]

Without --out the card goes to standard output.
"""
import argparse
import json
import os
import sys

FORMAT = "projmt-release-results"

# What projmt knows of the corpora it can fetch (scripts/get_data.sh,
# scripts/get_extra_data.sh), by file name: where the text comes from, its
# licence and the credit it asks for. A source not listed here is named on the
# card with its licence "not recorded".
KNOWN_SOURCES = {
    "spa.txt": {
        "what": "[Tatoeba Project](https://tatoeba.org) sentences as exported by "
                "[manythings.org/anki](https://www.manythings.org/anki/): short everyday sentences",
        "licence": "[CC-BY 2.0 FR](https://creativecommons.org/licenses/by/2.0/fr/)",
        "credit": "The exported model is a derivative of the Tatoeba data: whoever redistributes or uses it "
                  "should credit the Tatoeba Project and manythings.org/anki (attribution: "
                  "www.manythings.org/anki and tatoeba.org) under the same licence."},
    "pydocs.en-es.tsv.gz": {
        "what": "the Python documentation and its Spanish translation "
                "([python-docs-es](https://github.com/python/python-docs-es)), paragraphs",
        "licence": "translations contributed under [CC0](https://creativecommons.org/publicdomain/zero/1.0/)"},
    "lohelp.en-es.tsv.gz": {
        "what": "LibreOffice help pages 7.4.7 (Debian packages libreoffice-help-en-us and libreoffice-help-es)",
        "licence": "[MPL-2.0](https://www.mozilla.org/en-US/MPL/2.0/)",
        "credit": "LibreOffice help text © The Document Foundation and contributors, MPL-2.0 "
                  "(Debian's copyright file of libreoffice-help-es)."},
    "bible.en-es.tsv.gz": {
        "what": "the Bible: World English Bible and Reina-Valera 1909 (archaic Spanish), from Debian's "
                "sword-text-web and sword-text-sparv",
        "licence": "public domain"},
}


def fail(msg):
    sys.exit(f"model_card: {msg}")


def f2(x):
    return "—" if x is None else f"{x:.2f}"


def count(x):
    return f"{x:,}"


def minutes_text(m):
    h, rest = divmod(round(m), 60)
    return f"{h} h {rest:02d} min" if h else f"{m:.1f} min"


def mb(n_bytes):
    return f"{n_bytes / 1e6:.2f} MB"


def attention_text(model):
    sites = [model.get(k) for k in ("encoder_self", "decoder_self", "decoder_cross")]
    if len(set(sites)) == 1:
        return f"{sites[0]} attention at all three sites"
    return f"attention: encoder self {sites[0]}, decoder self {sites[1]}, decoder cross {sites[2]}"


def origin_text(start):
    """A started-from model: its path, the committed release it is a file of
    (release_results.released_as) and its sha256."""
    release, commit = start.get("release"), start.get("commit")
    if release:
        what = (f"the fp32 export of `{release['shipped_path']}`" if release["weights"] == "fp32"
                else f"`{release['shipped_path']}`")
        where = f" ({what} of commit `{release['commit']}`)"
    else:
        where = f" of commit `{commit}`" if commit and commit != "unknown" else " (no committed release)"
    return f"`{start['path']}`{where}, sha256 {start['sha256'][:12]}…"


def schedule_text(train):
    """The lr schedule after warm-up, as projmt train's --lr-schedule says it."""
    kind = train.get("lr_schedule", "inverse-sqrt")
    if kind == "inverse-sqrt":
        return "inverse-sqrt decay"
    end = train.get("decay_steps") or train.get("max_steps")
    return f"{kind} decay to {train.get('min_lr', 0):g} at step {count(end) if end else 'the budget end'}"


def budget_text(budget):
    if "max_steps" in budget:
        return f"{count(budget['max_steps'])} steps"
    if "minutes" in budget:
        return f"{budget['minutes']:g} minutes of wall-clock time (summed over sittings)"
    return "—"


def data_sources(data):
    """The per-source rows of the results file; a results file written before
    they existed (one corpus) gets the one row its totals give."""
    if data.get("sources"):
        return data["sources"]
    if not data.get("corpus_file"):
        return []
    return [{"name": data["corpus_file"], "role": "primary", "weight": 1, "files": [data["corpus_file"]],
             "input_lines": data["input_lines"], "kept_pairs": data["kept_pairs"],
             "train_pairs": data["pairs"]["train"]}]


def source_names(data):
    names = [src["name"] for src in data_sources(data)]
    if not names:
        return "one corpus"
    return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1]


def primary_name(data):
    """The source the test split comes from, as the card names it."""
    primary = [src for src in data_sources(data) if src["role"] == "primary"]
    files = primary[0]["files"] if primary else []
    if files[:1] == ["spa.txt"]:
        return "Tatoeba (spa.txt)"
    return f"`{files[0]}`" if files and files[0] else "the primary corpus"


def card(r):
    w = r["weights"]
    kinds = ("fp32", w)
    files, tr, cfg, data = r["files"], r["training"], r["config"], r["data"]
    model, train = cfg.get("model", {}), cfg.get("train", {})
    shipped = files[w]["path"]
    shipped_name = os.path.basename(shipped)
    out = []
    add = out.append
    add(f"# {r['name']}: English→Spanish translation model ({shipped_name})")
    add("")
    add(f"*Generated by `scripts/model_card.py` from `{r['name']}.results.json` (written by "
        "`scripts/train_release.sh`); do not edit by hand.*")
    add("")
    add(f"A {count(r['parameters'])}-parameter encoder–decoder Transformer ({attention_text(model)}) "
        f"trained by projmt on English–Spanish sentence pairs ({source_names(data)}), exported with {w} weights: "
        f"`{shipped_name}`, {mb(files[w]['bytes'])}. Right after the build:")
    add("")
    add("```sh")
    add(f"echo \"Where is the train station?\" | ./build/projmt translate --model {shipped}")
    add(f"./build/projmt translate --model {shipped}        # interactive")
    add("```")
    add("")

    add("## Training data and credit")
    add("")
    sources = data_sources(data)
    # Known by the first file's name; a row without file names (its specs
    # could not be matched to the manifest) is unknown, not skipped.
    known = [KNOWN_SOURCES.get(src["files"][0]) if src["files"] else None for src in sources]
    if sources:
        add("| source | file | text | licence | weight | lines read | pairs kept | training pairs |")
        add("|---|---|---|---|---|---|---|---|")
        for src, k in zip(sources, known):
            file_list = " + ".join(f"`{f}`" for f in src["files"]) or "—"
            add(f"| {src['name']}{' (primary: valid/test)' if src['role'] == 'primary' else ''} | {file_list} | "
                f"{k['what'] if k else '—'} | {k['licence'] if k else 'not recorded: check its terms'} | "
                f"{src['weight']} | {count(src['input_lines'])} | {count(src['kept_pairs'])} | "
                f"{count(src['train_pairs'])} |")
        add("")
        credits = [k["credit"] for k in known if k and k.get("credit")]
        if credits:
            add(" ".join(credits))
            add("")
    pairs = data["pairs"]
    add(f"`projmt prepare` kept {count(data['kept_pairs'])} of {count(data['input_lines'])} lines"
        + (f" of `{data['corpus_file']}`" if data.get("corpus_file") and len(sources) <= 1 else "")
        + (f" (sha256 `{data['corpus_sha256']}`)" if data.get("corpus_sha256") and len(sources) <= 1 else "")
        + f" and split them into {count(pairs['train'])} training pairs"
        + (" (a pair counted once per unit of its source's weight)" if any(s["weight"] != 1 for s in sources)
           else "")
        + f", {count(pairs['valid'])} validation and {count(pairs['test'])} test pairs (from the primary "
        "source only; all translations of one English sentence in one split); "
        f"joint {data['spm_model_type']} SentencePiece vocabulary of {count(data['vocab_size'])} pieces "
        "trained on the training split."
        + (" The sha256 of each input file is in the results file." if len(sources) > 1 else ""))
    add("")

    add("## Model and training")
    add("")
    add("| | |")
    add("|---|---|")
    add(f"| architecture | d_model {model.get('d_model')}, {model.get('n_heads')} heads, FFN {model.get('d_ff')}, "
        f"{model.get('enc_layers')}+{model.get('dec_layers')} layers, pre-LayerNorm, tied embeddings, "
        f"max_len {model.get('max_len')} |")
    add(f"| parameters | {count(r['parameters'])} |")
    add(f"| training precision | {tr['precision']} |")
    add(f"| batches | {count(train.get('batch_tokens'))} tokens, Adam lr {train.get('lr'):g}, "
        f"{count(train.get('warmup'))} warm-up steps, {schedule_text(train)}, dropout {model.get('dropout'):g}, "
        f"label smoothing {model.get('label_smoothing'):g}, seed {cfg.get('data', {}).get('seed')} |")
    add(f"| budget | {budget_text(tr['budget'])} |")
    add(f"| trained | {count(tr['steps'])} steps, {tr['epochs']:.2f} epochs, {minutes_text(tr['wall_minutes'])} "
        f"of wall-clock time"
        + (f" in {tr['sittings']} sitting(s)" if tr.get("sittings") else "")
        + f", {str(tr['threads']) + ' thread(s)' if tr['threads'] else 'all cores'} on "
        f"{r['machine']['cpu'] or 'an unknown CPU'} ({r['machine']['cores']} cores) |")
    ft, start = r.get("finetune"), r.get("started_from")
    # The model fine-tuned when there was no main run (results from before
    # "stage" was recorded knew no other start).
    fine_tuned = start if start and start.get("stage", "finetune") == "finetune" else None
    if fine_tuned:
        add(f"| started from | {origin_text(start)}: the rows below are its fine-tuning on {primary_name(data)} "
            f"alone ({count(ft['train_pairs'])} training pairs, its vocabulary) |")
    elif start:
        add(f"| started from | {origin_text(start)}: the run above began from its weights (train --init-from; "
            f"a new optimizer, schedule and data position) |")
    if ft and not fine_tuned:
        add(f"| fine-tuning | then {count(ft['steps'])} steps on {primary_name(data)} alone "
            f"({count(ft['train_pairs'])} training pairs, the main data's vocabulary) from the main run's "
            f"moving average, Adam lr {ft['lr']:g}, {count(ft['warmup'])} warm-up steps, "
            f"{minutes_text(ft['wall_minutes'])} |")
    ema = tr.get("ema") or 0
    add(f"| moving average | {'decay ' + format(ema, 'g') if ema else 'none'}"
        f"{' (validation, best.ckpt and export use it)' if ema else ''} |")
    add(f"| checkpoint averaging | the newest {tr.get('keep_last')} numbered checkpoints |"
        if tr.get("keep_last") else "| checkpoint averaging | none |")
    s = r["selection"]
    chosen = next(c for c in s["candidates"] if c["label"] == s["chosen"])
    add(f"| shipped weights | `{chosen['label']}`: the best of {len(s['candidates'])} candidates by validation "
        f"BLEU ({count(s['sentences'])} sentences, beam {s['beam_size']}; chrF breaks a tie) |")
    add("")
    add("| candidate | what | validation BLEU | validation chrF |")
    add("|---|---|---|---|")
    what = {"best": "best.ckpt (best validation during training)", "avg": "mean of the newest numbered checkpoints",
            "last-ema": "last.ckpt, moving average", "last-raw": "last.ckpt, raw weights", "last": "last.ckpt"}
    if ft:
        what = {"best": "the fine-tuning's best.ckpt (best validation)",
                "avg": "mean of the fine-tuning's newest numbered checkpoints",
                "last-ema": "the fine-tuning's last.ckpt, moving average",
                "last-raw": "the fine-tuning's last.ckpt, raw weights", "last": "the fine-tuning's last.ckpt",
                "main": f"`{fine_tuned['path']}`, the model fine-tuned" if fine_tuned
                        else "the main run's last.ckpt (moving average), before fine-tuning"}
    for c in s["candidates"]:
        mark = " **(shipped)**" if c["label"] == s["chosen"] else ""
        add(f"| `{c['label']}`{mark} | {what.get(c['label'], c['checkpoint'])} | {f2(c['bleu'])} | {f2(c['chrf'])} |")
    add("")

    add(f"## Quality: fp32 vs {w}")
    add("")
    test = r["eval"]["test"]
    flores = r["eval"].get("flores200_dev")
    beam = test["fp32"]["beam_size"]
    add(f"sacreBLEU-exact corpus BLEU and chrF2 (`projmt eval --json`), beam {beam}, of the shipped "
        f"`{shipped_name}` and of the same weights exported in fp32.")
    add("")
    add(f"| | fp32 | {w} |")
    add("|---|---|---|")
    add(f"| test split BLEU ({count(test['fp32']['sentences'])} sentences of {primary_name(data)}) | "
        + " | ".join(f2(test[k]["bleu"]) for k in kinds) + " |")
    add("| test split chrF | " + " | ".join(f2(test[k]["chrf"]) for k in kinds) + " |")
    add("| test split loss / token accuracy (teacher-forced) | "
        + " | ".join(f"{test[k]['loss']:.3f} / {100 * test[k]['token_accuracy']:.1f} %" for k in kinds) + " |")
    if flores:
        add(f"| FLORES-200 dev BLEU ({count(flores['fp32']['sentences'])} sentences, out of domain) | "
            + " | ".join(f2(flores[k]["bleu"]) for k in kinds) + " |")
        add("| FLORES-200 dev chrF | " + " | ".join(f2(flores[k]["chrf"]) for k in kinds) + " |")
    else:
        add("| FLORES-200 dev | not scored (not found) | not scored |")
    add("| file size | " + " | ".join(mb(files[k]["bytes"]) for k in kinds) + " |")
    add("")
    add(f"Signatures: `{test['fp32']['bleu_signature']}`, `{test['fp32']['chrf_signature']}`. "
        f"The checkpoint with Adam state (`last.ckpt`) is {mb(files['last_checkpoint_bytes'])}.")
    add("")

    add("## Decoding speed")
    add("")
    sp = r["speed"]
    add(f"`projmt bench --decode --model FILE`: the first {count(sp['fp32']['sentences'])} test sentences, "
        f"batches of {sp['fp32']['batch']}, the model's length limits, {sp['fp32']['threads']} thread(s), "
        f"the median of {sp['fp32'].get('rounds', 1)} alternating run(s) each on the machine above at the end of "
        f"training ({r['machine']['cores']} cores; 1-minute load average at most "
        f"{sp['fp32']['load_average_1min']:.2f} and {sp[w]['load_average_1min']:.2f} as the fp32 and {w} "
        f"timings started; a load above the core count means the machine was shared).")
    add("")
    add("| | sentences/s | source words/s | output tokens/s |")
    add("|---|---|---|---|")
    for k in kinds:
        for key, label in (("greedy", "greedy"), ("beam4", "beam 4")):
            x = sp[k][key]
            add(f"| {k}, {label} | {x['sentences_per_s']:,.1f} | {x['src_words_per_s']:,.0f} | "
                f"{x['tokens_per_s']:,.0f} |")
    add("")

    if r.get("samples"):
        add("## The quick start's sentences")
        add("")
        add(f"The sentences of `scripts/quickstart.en` as `{shipped_name}` translates them (beam {beam}); "
            "`bash scripts/quickstart.sh` ends with the same.")
        add("")
        add("| English | Spanish (this model) |")
        add("|---|---|")
        for x in r["samples"]:
            add(f"| {x['en']} | {x['es']} |")
        add("")

    add("## Reproduce")
    add("")
    add("From a checkout of the commit below, after `bash scripts/setup.sh --all` and the build:")
    add("")
    add("```sh")
    add(r["command"])
    add("```")
    add("")
    g = r["git"]
    add(f"Code: commit `{g['commit'] or 'unknown'}`"
        + (f" with {g['modified_files']} modified file(s)" if g.get("modified_files") else "")
        + f"; results written {r['created_utc']}. "
        + ("" if "max_steps" in tr["budget"] else
           f"The time budget stopped training at step {count(tr['steps'])}; adding `--max-steps {tr['steps']}` "
           "trains the same number of steps on a faster or slower machine. ")
        + "`--session-minutes M` splits the run into sittings (status 75; the same command continues).")
    add("")

    add("## Limitations")
    add("")
    source_files = {f for src in data_sources(data) for f in src["files"]}
    kinds_of_text = ["short everyday sentences from Tatoeba (a median of about six words)" if "spa.txt" in source_files
                     else f"the text of {source_names(data)}"]
    if source_files & {"pydocs.en-es.tsv.gz", "lohelp.en-es.tsv.gz"}:
        kinds_of_text.append("software documentation")
    if "bible.en-es.tsv.gz" in source_files:
        kinds_of_text.append("the Bible in archaic Spanish (it may answer in that register)")
    add(f"- It learned from {', '.join(kinds_of_text[:-1]) + ' and ' if len(kinds_of_text) > 1 else ''}"
        f"{kinds_of_text[-1]}: it is for short sentences of that kind. It has seen no news or literary prose, "
        "and no documents.")
    if flores:
        add(f"- Out of domain it is weak: FLORES-200 dev (Wikinews, Wikivoyage, Wikijunior) scores "
            f"{f2(flores[w]['bleu'])} BLEU against {f2(test[w]['bleu'])} on the test split of "
            f"{primary_name(data)}.")
    add("- English→Spanish only; one sentence per line; input longer than the model's max_len tokens is cut.")
    add("- The training text contains errors and reflects its authors; the model reproduces both, and a "
        "small model trained in a short budget makes its own mistakes. Do not use its output where a "
        "mistranslation matters without a human check.")
    add("")

    add("## This folder")
    add("")
    add(f"Only `{shipped_name}`, `{r['name']}.results.json` and this README are committed here. Training runs "
        "(`last.ckpt`, `best.ckpt`, `step-N.ckpt`, `train.tsv`, logs) also land in `models/` and are ignored by "
        "git: a checkpoint is never committed.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--out")
    a = ap.parse_args()
    try:
        with open(a.results, encoding="utf-8") as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"cannot read {a.results}: {e}")
    if r.get("format") != FORMAT:
        fail(f"{a.results} is not a {FORMAT} file")
    text = card(r)
    if not a.out:
        sys.stdout.write(text)
        return
    tmp = a.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, a.out)


if __name__ == "__main__":
    main()
