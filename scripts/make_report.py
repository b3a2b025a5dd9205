#!/usr/bin/python3
"""make_report.py — report.md and summary.json of a compare.sh study.

    /usr/bin/python3 scripts/make_report.py --study DIR --command CMD [--config FILE]
        [--test-src F --test-ref F] [--flores PREFIX|none] [--budget "--minutes 15"]
        [--budget-note TEXT] LABEL [LABEL ...]

Reads, for each mode LABEL, DIR/LABEL/{train.tsv, flags.txt, eval_valid.json,
eval_test.json, eval_bleu_test.json, eval_bleu_flores.json} and
DIR/LABEL/ckpt/test.hyp, plus DIR/bench.json, and writes DIR/report.md:
speed and quality tables, the plots, the machine and the exact command.
A study at equal wall-clock time (each mode's own --max-steps, set from its
quiet step time) with test BLEU also gets its speed/quality front: a table
and DIR/plots/front.{png,svg} (plot_front.py). Modes whose flags differ
only in --seed are one setup: a table of its BLEU by seed, mean and
spread, and the front over the setups' means.
Missing inputs show as "—". Files are named relative to the repository
root, never by absolute paths. What quotes the test split stays out of
report.md, which is committed: ~5 sample translations side by side and
the attention pictures (teacher-forced on test sentences) go to
DIR/local.md, which git ignores, as it does DIR/attention/.

DIR/summary.json is the same study for programs: the study's command,
config, budget (the common budget flag, or each mode's own --max-steps
when its flags carry one: equal wall-clock time set from quiet step times),
the budget note, and machine, and per mode (in the order given) its flags,
seed,
training minutes and steps, test BLEU and chrF (sacreBLEU-exact, beam
search), validation accuracy, the step-time ratio to the reference mode
(`standard` when present, else the first) and the parameter count. Missing
values are null. Keys are described in SUMMARY_KEYS below; seed_groups
(one entry per setup, when some have several seeds) in SEED_GROUP_KEYS.
"""
import argparse
import csv
import datetime
import json
import math
import os
import re
import shlex
import statistics
import subprocess

from plot_front import front_rows, plot_front
from repo_paths import repo_relative, repo_relative_text

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_MODES = ("standard", "projection", "proj-self", "proj-cross", "learned", "boxcar", "constant", "epanechnikov",
               "diagonal", "cosine", "dot")
N_SAMPLES = 5
DASH = "—"
SHORT_KIND = {"standard": "std", "projection": "proj"}


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_tsv(path):
    """train.tsv rows split by kind, numbers as floats (NaN when empty)."""
    rows = {"train": [], "valid": []}
    with open(path, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            rows.setdefault(row["kind"], []).append(
                {k: float(v) if v else math.nan for k, v in row.items() if k != "kind"})
    return rows


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except OSError:
        return None


def fmt(value, spec, scale=1.0):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    return format(value * scale if scale != 1.0 else value, spec)


def duration(seconds):
    if seconds is None or math.isnan(seconds):
        return DASH
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}h{rest // 60:02d}m" if h else f"{rest // 60}m{rest % 60:02d}s"


def ms_per_step(train_rows, valid_rows):
    """Training time per step over the log windows without a validation in
    them, as a ratio of sums: elapsed_s has 0.1 s resolution, and summing
    contiguous windows keeps that error from adding up."""
    valid_steps = [r["step"] for r in valid_rows]
    seconds = steps = 0.0
    all_seconds = all_steps = 0.0
    prev_step, prev_time = 0.0, 0.0
    for row in train_rows:
        d_steps, d_seconds = row["step"] - prev_step, row["elapsed_s"] - prev_time
        all_steps, all_seconds = all_steps + d_steps, all_seconds + d_seconds
        if not any(prev_step <= v <= row["step"] for v in valid_steps):
            steps, seconds = steps + d_steps, seconds + d_seconds
        prev_step, prev_time = row["step"], row["elapsed_s"]
    if steps <= 0:
        steps, seconds = all_steps, all_seconds
    return 1000.0 * seconds / steps if steps > 0 else math.nan


def attention_setup(folder):
    """A run's attention per site, projection kernel, metric and σ mode: from
    its attention dump, or — when its checkpoints are gone, as in a study
    cloned from the repository — from the lines train.log starts with."""
    dump = read_json(os.path.join(folder, "ckpt", "attention-s1", "attention.json"))
    if dump:
        return {"kinds": [dump["attention"][s] for s in ("encoder_self", "decoder_self", "decoder_cross")],
                "kernel": dump.get("kernel", "gaussian"), "metric": dump.get("metric", "euclidean"),
                "sigma": dump["sigma"]}
    setup = None
    for line in read_lines(os.path.join(folder, "train.log")) or []:
        model = re.search(r"attention enc-self (\w+), dec-self (\w+), dec-cross (\w+)\)", line)
        sites = re.search(r"^projection sites: kernel (\w+), metric (\w+), sigma (\w+)", line)
        if model:  # a log appended over sittings repeats these lines; the last run's win
            setup = {"kinds": list(model.groups()), "kernel": "gaussian", "metric": "euclidean", "sigma": "fixed"}
        elif sites and setup:
            setup.update(zip(("kernel", "metric", "sigma"), sites.groups()))
    return setup


def summarize_run(study, label):
    """Everything the tables need about one mode, None where missing."""
    folder = os.path.join(study, label)
    log = read_tsv(os.path.join(folder, "train.tsv"))
    train, valid = log.get("train", []), log.get("valid", [])
    every = train + valid
    run = {"label": label}
    run["steps"] = max((r["step"] for r in every), default=math.nan)
    run["epochs"] = max((r["epoch"] for r in every), default=math.nan)
    run["elapsed"] = max((r["elapsed_s"] for r in every), default=math.nan)
    run["epoch_time"] = run["elapsed"] / run["epochs"] if run["epochs"] and run["epochs"] > 0 else math.nan
    speeds = [r["tokens_per_s"] for r in train if not math.isnan(r["tokens_per_s"])]
    run["tokens_per_s"] = statistics.median(speeds) if speeds else math.nan
    run["ms_per_step"] = ms_per_step(train, valid)
    run["final_valid"] = valid[-1] if valid else None
    run["best_loss"] = min((r["loss"] for r in valid), default=math.nan)
    run["best_accuracy"] = max((r["accuracy"] for r in valid), default=math.nan)
    for key in ("valid", "test", "bleu_test", "bleu_flores"):
        run[key] = read_json(os.path.join(folder, f"eval_{key}.json"))
    setup = attention_setup(folder)
    if setup:
        kinds, family = setup["kinds"], (setup["kernel"], setup["metric"])
        run["attention"] = (" / ".join(SHORT_KIND.get(k, k) for k in kinds)
                            + (f", {family[0]}/{family[1]}" if "projection" in kinds and family != ("gaussian", "euclidean") else "")
                            + (", learned σ" if setup["sigma"] == "learned" else ""))
    else:
        run["attention"] = DASH
    flags = read_lines(os.path.join(folder, "flags.txt"))
    run["flags"] = shlex.split(flags[0]) if flags else []
    run["hyps"] = read_lines(os.path.join(folder, "ckpt", "test.hyp"))
    run["commits"] = training_commits(read_lines(os.path.join(folder, "train.log")))
    return run


TRAINED_BY = re.compile(r"^projmt \S+ \(commit (\S+)\), built for")


def training_commits(log_lines):
    """The commits of the binaries that trained a run, in the order they ran
    (train prints one line per session; a resumed run may change binary).
    Empty for a log from before train printed it."""
    commits = []
    for line in log_lines:
        m = TRAINED_BY.match(line)
        if m and m.group(1) not in commits:
            commits.append(m.group(1))
    return commits


def attach_bench(runs, bench):
    """bench.json lists the named modes in the order compare.sh passed them."""
    named = [r for r in runs if r["label"] in BENCH_MODES]
    results = bench.get("modes", []) if bench else []
    for run, result in zip(named, results):
        run["bench"] = result


def get(obj, *keys):
    for key in keys:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def translation_speed(run):
    """Sentences per second translating the test sentences, with the beam."""
    seconds, sentences = get(run, "bleu_test", "seconds"), get(run, "bleu_test", "sentences")
    if not seconds or not sentences:
        return DASH
    return f"{sentences / seconds:,.1f} (beam {get(run, 'bleu_test', 'beam_size')})"


def speed_table(runs):
    ref = next((r for r in runs if r["label"] == "standard"), runs[0])
    lines = ["| mode | attention (enc self / dec self / cross) | parameters | MFLOP/token (train) "
             "| tokens/s | ms/step | time/epoch | training time | time ratio | bench ms/step | bench tokens/s "
             "| bench ratio | translation sent./s |",
             "|" + "---|" * 13]
    for r in runs:
        params = get(r, "test", "params")
        flops = get(r, "test", "train_flops_per_token")
        bench_ms, ref_bench = get(r, "bench", "ms_per_step"), get(ref, "bench", "ms_per_step")
        ratio = r["ms_per_step"] / ref["ms_per_step"] if ref["ms_per_step"] else math.nan
        bench_ratio = bench_ms / ref_bench if bench_ms and ref_bench else None
        lines.append(f"| {r['label']} | {r['attention']} | {fmt(params, ',d')} "
                     f"| {fmt(flops, '.2f', 1e-6)} | {fmt(r['tokens_per_s'], ',.0f')} | {fmt(r['ms_per_step'], '.1f')} "
                     f"| {duration(r['epoch_time'])} | {duration(r['elapsed'])} | {fmt(ratio, '.3f')} "
                     f"| {fmt(bench_ms, '.1f')} | {fmt(get(r, 'bench', 'tokens_per_s'), ',.0f')} "
                     f"| {fmt(bench_ratio, '.3f')} | {translation_speed(r)} |")
    note = (f"Time ratio: ms/step relative to `{ref['label']}`. From train.tsv: tokens/s is the median over "
            "its log windows (non-pad source + target tokens per second of training steps), ms/step the "
            "training time per step over the windows without a validation; time/epoch and training time "
            "include validation. Bench columns: `projmt bench` on the same batches in one process. Translation: "
            "the test sentences translated for BLEU, model loading excluded.")
    return lines, note


def quality_table(runs):
    lines = ["| mode | steps | epochs | final valid loss | final valid acc. | best valid loss | best valid acc. "
             "| test loss | test acc. | test ppl | test BLEU | test chrF | FLORES BLEU | FLORES chrF |",
             "|" + "---|" * 14]
    for r in runs:
        final = r["final_valid"] or {}
        lines.append(
            f"| {r['label']} | {fmt(r['steps'], '.0f')} | {fmt(r['epochs'], '.2f')} "
            f"| {fmt(final.get('loss'), '.4f')} | {fmt(final.get('accuracy'), '.2f', 100)}% "
            f"| {fmt(r['best_loss'], '.4f')} | {fmt(r['best_accuracy'], '.2f', 100)}% "
            f"| {fmt(get(r, 'test', 'loss'), '.4f')} | {fmt(get(r, 'test', 'accuracy'), '.2f', 100)}% "
            f"| {fmt(get(r, 'test', 'perplexity'), '.2f')} "
            f"| {fmt(get(r, 'bleu_test', 'bleu', 'score'), '.2f')} | {fmt(get(r, 'bleu_test', 'chrf', 'score'), '.2f')} "
            f"| {fmt(get(r, 'bleu_flores', 'bleu', 'score'), '.2f')} "
            f"| {fmt(get(r, 'bleu_flores', 'chrf', 'score'), '.2f')} |")
    note = ("Loss: label-smoothed cross-entropy per target token (nats), as training logs it; accuracy: "
            "teacher-forced argmax = reference over non-pad target tokens; test numbers and BLEU/chrF "
            "(sacreBLEU-exact) come from the best checkpoint (`projmt eval`). FLORES-200 dev is out of domain.")
    return lines, note


def samples(runs, src_path, ref_path):
    src, ref = read_lines(src_path) if src_path else None, read_lines(ref_path) if ref_path else None
    if not src or not ref:
        return ["(no test sentences given)"]
    n = min(len(src), len(ref))
    picks = sorted({round(i * (n - 1) / (N_SAMPLES - 1)) for i in range(N_SAMPLES)}) if n > 1 else [0]
    lines = []
    for k, i in enumerate(picks, 1):
        lines.append(f"{k}. **source:** {src[i]}  ")
        lines.append(f"   **reference:** {ref[i]}  ")
        for r in runs:
            hyp = r["hyps"][i] if r["hyps"] and i < len(r["hyps"]) else DASH
            lines.append(f"   **{r['label']}:** {hyp}  ")
    return lines


def bleu_scope(n_test, flores):
    if n_test is None:
        return "BLEU/chrF were not computed (no translations)."
    where = "not run" if flores == "none" else f"`{repo_relative(flores)}.{{en,es}}`"
    return f"BLEU/chrF on {n_test} test sentences (beam search); FLORES dev: {where}."


def machine(runs):
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), model)
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                check=True, cwd=REPO).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    # The binaries that trained, from train.log; the repository's commit when
    # the report is written may be newer (a study built in a separate --build).
    trained = []
    for r in runs:
        trained += [c for c in r.get("commits", []) if c not in trained]
    by = (f"trained by projmt commit{'s' if len(trained) > 1 else ''} {', '.join(trained)}; " if trained
          else "the training binary's commit is not in its train.log; ")
    return f"{model}, {os.cpu_count()} cores (nproc); {by}report written at projmt commit {commit}"


def figure_links(study):
    lines = []
    for name, caption in (("accuracy", "Token accuracy vs epoch and step"), ("loss", "Cross-entropy vs epoch and step"),
                          ("valid_time", "Validation vs wall-clock time")):
        if os.path.exists(os.path.join(study, "plots", f"{name}.png")):
            lines.append(f"![{caption}](plots/{name}.png)  \n*{caption}* ([SVG](plots/{name}.svg))\n")
    return lines


# The attention pictures: teacher-forced on test sentences, so local.md only.
def attention_links(study):
    lines = []
    attention = os.path.join(study, "attention")
    if os.path.isdir(attention):
        for png in sorted(f for f in os.listdir(attention) if f.endswith("_cross_mean.png")):
            lines.append(f"![{png}](attention/{png})\n")
        lines.append("Every layer and head per site: `attention/s*_{encoder_self,decoder_self,decoder_cross}"
                     ".{png,svg}` (teacher-forced on fixed sentences and their reference translations).\n")
    return lines


# summary.json, per mode: key -> (meaning, how it is computed from a run).
SUMMARY_KEYS = {
    "label": "mode label (folder name)",
    "flags": "train flags of the mode over the study's config (flags.txt)",
    "attention": "attention at encoder self / decoder self / cross, projection kernel/metric, σ",
    "minutes": "training wall-clock minutes incl. validation, summed over sessions (train.tsv elapsed_s)",
    "steps": "optimizer steps trained",
    "epochs": "epochs trained",
    "test_bleu": "sacreBLEU-exact BLEU on the test split, beam search, best checkpoint",
    "test_chrf": "chrF on the same translations",
    "test_sentences": "test sentences translated for BLEU/chrF",
    "beam_size": "beam size of those translations",
    "valid_accuracy": "teacher-forced token accuracy on the validation split, best checkpoint (projmt eval)",
    "final_valid_accuracy": "last validation row of train.tsv",
    "best_valid_accuracy": "best validation row of train.tsv",
    "test_accuracy": "teacher-forced token accuracy on the test split, best checkpoint",
    "test_loss": "label-smoothed cross-entropy per target token on the test split",
    "ms_per_step": "training ms per step from train.tsv (windows without validation)",
    "step_time_ratio": "ms_per_step / the reference mode's (train.tsv)",
    "bench_ms_per_step": "projmt bench median ms per step (same batches, one process), named modes only",
    "bench_time_ratio": "bench_ms_per_step / the reference mode's",
    "parameters": "trainable parameters",
    "flores_bleu": "BLEU on FLORES-200 dev (out of domain), when run",
    "flores_chrf": "chrF on FLORES-200 dev, when run",
    "seed": "--seed in the mode's flags (null: the config's)",
    "budget_time_ratio": "equal-time step budgets only: the reference's --max-steps / this mode's, i.e. its quiet "
                         "step time relative to the reference's",
    "on_front": "equal-time step budgets only: no other mode has a budget_time_ratio and test BLEU both at least "
                "as good, one of them better (with seed_groups: of its setup's mean test BLEU among the setups')",
}

SEED_GROUP_KEYS = {
    "label": "the setup: its first mode's label",
    "modes": "its modes: the same flags but --seed (and --precision for a seed trained in another one)",
    "seeds": "their seeds, in the same order",
    "precisions": "their --precision, in the same order, when they differ (else null)",
    "test_bleu": "test BLEU by seed (seeds with a result)",
    "mean": "mean test BLEU over those seeds",
    "spread": "largest minus smallest of them",
    "deltas": "test BLEU minus the reference setup's, seed by seed (seeds both have)",
    "delta_mean": "mean of those differences",
}


def finite(value):
    """JSON-safe number: None for missing or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value


def parse_budget(text):
    """'--minutes 15' -> {'minutes': 15.0}; '' -> {} (the config's own stop criteria)."""
    words = text.split()
    if len(words) == 2 and words[0].startswith("--"):
        return {words[0][2:].replace("-", "_"): float(words[1])}
    return {}


def mode_step_budgets(runs):
    """{label: N} when every mode carries its own --max-steps N in its flags (no common
    budget): a study at equal wall-clock time whose step budgets were set from each
    mode's quiet step time, so that machine load cannot change what is compared."""
    budgets = {}
    for r in runs:
        flags = r["flags"] or []
        steps = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "--max-steps"]
        if not steps:
            return {}
        budgets[r["label"]] = int(steps[-1])
    return budgets


def run_seed(run):
    """The mode's --seed (the last in its flags), or None: the config's."""
    flags = run["flags"] or []
    seeds = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "--seed"]
    return int(seeds[-1]) if seeds else None


def run_precision(run):
    """The mode's --precision (the last in its flags), or None: the config's."""
    flags = run["flags"] or []
    values = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "--precision"]
    return values[-1] if values else None


def flags_without(flags, names):
    """The flags with every `NAME value` of names taken out."""
    out, i = [], 0
    while i < len(flags):
        if flags[i] in names and i + 1 < len(flags):
            i += 2
            continue
        out.append(flags[i])
        i += 1
    return tuple(out)


def flags_without_seed(flags):
    """The flags with every --seed N taken out: what defines a setup."""
    return flags_without(flags, ("--seed",))


def seed_groups(runs):
    """The setups of a study that repeats some with other seeds: modes whose flags
    differ only in --seed, as [{"label": the first mode's label, "runs": [...]}] in
    order of first appearance; [] when no setup has two seeds. A seed trained in
    another --precision (a machine without native bf16) joins its setup when that
    seed is not there already; a study that compares precisions at one seed keeps
    them apart."""
    groups = {}
    for r in runs:
        groups.setdefault(flags_without(r["flags"] or [], ("--seed", "--precision")), []).append(r)
    out = []
    for members in groups.values():
        seeds = [run_seed(r) for r in members]
        if len(set(seeds)) == len(seeds):
            out.append(members)
            continue
        split = {}
        for r in members:
            split.setdefault(flags_without_seed(r["flags"] or []), []).append(r)
        out.extend(split.values())
    out = [{"label": members[0]["label"], "runs": members} for members in out]
    return out if any(len({run_seed(r) for r in g["runs"]}) > 1 for g in out) else []


def group_bleu(group):
    """{seed: test BLEU} of a setup's modes that have one."""
    return {run_seed(r): get(r, "bleu_test", "bleu", "score") for r in group["runs"]
            if get(r, "bleu_test", "bleu", "score") is not None}


def seed_rows(runs):
    """Per setup of seed_groups(): its seeds, test BLEU per seed, mean and spread
    (max - min), and the difference to the reference setup seed by seed (only
    the seeds both have) and its mean. [] without seed groups."""
    groups = seed_groups(runs)
    if not groups:
        return []
    ref_label = reference_run(runs)["label"]
    ref = group_bleu(next(g for g in groups if any(r["label"] == ref_label for r in g["runs"])))
    rows = []
    for g in groups:
        bleu = group_bleu(g)
        deltas = {seed: bleu[seed] - ref[seed] for seed in bleu if seed in ref}
        values = list(bleu.values())
        precisions = [run_precision(r) for r in g["runs"]]
        rows.append({"label": g["label"], "modes": [r["label"] for r in g["runs"]],
                     "seeds": [run_seed(r) for r in g["runs"]], "test_bleu": bleu,
                     "precisions": precisions if len(set(precisions)) > 1 else None,
                     "mean": statistics.mean(values) if values else None,
                     "spread": max(values) - min(values) if values else None,
                     "deltas": deltas, "delta_mean": statistics.mean(deltas.values()) if deltas else None})
    return rows


def seeds_section(runs):
    """The report's table of setups trained with several seeds; [] without."""
    rows = seed_rows(runs)
    if not rows:
        return []
    ref = reference_label(runs)
    lines = ["## Seeds", "",
             f"| setup | modes | test BLEU by seed | mean | spread | vs {ref}, seed by seed | vs {ref}, mean |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        precision = dict(zip(r["seeds"], r["precisions"] or []))
        by_seed = ", ".join(f"{r['test_bleu'][s]:.2f} (seed {s}{', ' + precision[s] if s in precision else ''})"
                            for s in r["seeds"] if s in r["test_bleu"])
        deltas = ", ".join(f"{r['deltas'][s]:+.2f}" for s in r["seeds"] if s in r["deltas"])
        lines.append(f"| {r['label']} | {', '.join(r['modes'])} | {by_seed or DASH} | {fmt(r['mean'], '.2f')} "
                     f"| {fmt(r['spread'], '.2f')} | {deltas or DASH} | {fmt(r['delta_mean'], '+.2f')} |")
    mixed = any(r["precisions"] for r in rows)
    lines += ["", "Modes that differ only in `--seed` are one setup (seeds change initialisation, data order "
              "and dropout)" + ("; a seed trained in another `--precision` joins its setup, and its precision "
                                "is named" if mixed else "") + ". The spread is the largest minus the smallest "
              f"BLEU over its seeds; the difference to {ref} pairs the runs of the same seed. The front below "
              "plots each setup's mean.", ""]
    return lines


def budget_sentence(args, runs):
    """How the modes' budgets compare, for the report's first lines."""
    seeds = sorted({run_seed(r) for r in runs}, key=lambda s: (s is None, s))
    if len(seeds) > 1:
        named = ", ".join("the config's" if s is None else str(s) for s in seeds)
        same = f"Seeds {named} (`--seed` in the flags): modes of one seed share initialisation and data order"
    else:
        same = "Same seed and data order"
    if args.budget and len(seeds) <= 1:
        text = f"Same seed, data order and budget (`{args.budget}`) for every mode."
    elif args.budget:
        text = f"{same}; the same budget (`{args.budget}`) for every mode."
    elif mode_step_budgets(runs):
        steps = ", ".join(f"{label} {n:,}" for label, n in mode_step_budgets(runs).items())
        text = f"{same}; each mode has its own step budget (`--max-steps` in its flags: {steps})."
    else:
        text = f"{same}; every mode stops by the config's own criteria."
    return text + (f" {args.budget_note}" if args.budget_note else "")


def reference_run(runs):
    """The mode ratios are taken against: `standard` when present, else the first."""
    return next((r for r in runs if r["label"] == "standard"), runs[0])


def reference_label(runs):
    """The reference of ratios and differences: reference_run()'s label, or, with
    seed groups, the label of the setup it belongs to."""
    label = reference_run(runs)["label"]
    return next((r["label"] for r in seed_rows(runs) if label in r["modes"]), label)


def study_front(runs):
    """front_rows() of a study at equal wall-clock time (per-mode step budgets): one
    row per mode, or per setup (its mean test BLEU over its seeds, labelled by its
    first mode) when seed_groups() finds setups trained with several seeds."""
    budgets = mode_step_budgets(runs)
    setups = seed_rows(runs)
    if setups:
        modes = [{"label": r["label"], "budget": budgets.get(r["label"]),
                  "test_bleu": r["mean"] if len(r["test_bleu"]) == len(r["modes"]) else None} for r in setups]
        return front_rows(modes, reference_label(runs))
    modes = [{"label": r["label"], "budget": budgets.get(r["label"]),
              "test_bleu": get(r, "bleu_test", "bleu", "score")} for r in runs]
    return front_rows(modes, reference_run(runs)["label"])


def front_of_mode(runs):
    """{mode label: its study_front() row}: a mode of a seed group gets its setup's."""
    rows = {r["label"]: r for r in study_front(runs)}
    for setup in seed_rows(runs):
        for label in setup["modes"]:
            if setup["label"] in rows:
                rows[label] = rows[setup["label"]]
    return rows


def front_section(study, runs):
    """The report's front: a table and plots/front.{png,svg}, when the modes
    have equal-time step budgets and test BLEU; [] otherwise."""
    rows = study_front(runs)
    if not rows:
        return []
    ref = reference_label(runs)
    bleu = "mean test BLEU" if seed_rows(runs) else "test BLEU"
    lines = ["## Speed and quality at equal time", "",
             "| mode | step time / " + ref + " | time saved | " + bleu + " | vs " + ref + " | on the front |",
             "|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["time_ratio"]):
        lines.append(f"| {r['label']} | {r['time_ratio']:.3f} | {100 * (1 - r['time_ratio']):.1f} % "
                     f"| {r['bleu']:.2f} | {r['delta']:+.2f} | {'yes' if r['on_front'] else 'no'} |")
    lines += ["", f"Step time relative to `{ref}` is the inverse ratio of the step budgets, which were set "
              "from each mode's quiet step time. A mode is on the front when no other mode is both at "
              "least as fast and at least as good.", ""]
    try:
        plot_front(rows, os.path.join(study, "plots"), ref)
        lines.append("![Step time against test BLEU](plots/front.png)  \n*Step time against test BLEU* "
                     "([SVG](plots/front.svg))\n")
    except ImportError as e:
        print(f"make_report: no front plot ({e}); the table is in report.md")
    return lines


def summary(runs, args):
    ref = reference_run(runs)
    front = front_of_mode(runs)
    ref_bench = get(ref, "bench", "ms_per_step")
    modes = []
    for r in runs:
        final = r["final_valid"] or {}
        bench_ms = get(r, "bench", "ms_per_step")
        values = {
            "label": r["label"],
            "flags": r["flags"],
            "attention": r["attention"] if r["attention"] != DASH else None,
            "minutes": finite(r["elapsed"] / 60.0),
            "steps": finite(r["steps"]) if math.isnan(r["steps"]) else int(r["steps"]),
            "epochs": finite(r["epochs"]),
            "test_bleu": get(r, "bleu_test", "bleu", "score"),
            "test_chrf": get(r, "bleu_test", "chrf", "score"),
            "test_sentences": get(r, "bleu_test", "sentences"),
            "beam_size": get(r, "bleu_test", "beam_size"),
            "valid_accuracy": get(r, "valid", "accuracy"),
            "final_valid_accuracy": finite(final.get("accuracy")),
            "best_valid_accuracy": finite(r["best_accuracy"]),
            "test_accuracy": get(r, "test", "accuracy"),
            "test_loss": get(r, "test", "loss"),
            "ms_per_step": finite(r["ms_per_step"]),
            "step_time_ratio": finite(r["ms_per_step"] / ref["ms_per_step"]) if ref["ms_per_step"] else None,
            "bench_ms_per_step": bench_ms,
            "bench_time_ratio": bench_ms / ref_bench if bench_ms and ref_bench else None,
            "parameters": get(r, "test", "params"),
            "flores_bleu": get(r, "bleu_flores", "bleu", "score"),
            "flores_chrf": get(r, "bleu_flores", "chrf", "score"),
            "seed": run_seed(r),
            "budget_time_ratio": front[r["label"]]["time_ratio"] if r["label"] in front else None,
            "on_front": front[r["label"]]["on_front"] if r["label"] in front else None,
        }
        assert list(values) == list(SUMMARY_KEYS)
        modes.append(values)
    return {
        "study": os.path.basename(os.path.normpath(args.study)),
        "generated_utc": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}",
        "command": repo_relative_text(args.command),
        "config": repo_relative(args.config),
        "budget": parse_budget(args.budget) or
                  ({"max_steps_per_mode": mode_step_budgets(runs)} if mode_step_budgets(runs) else {}),
        "budget_note": args.budget_note or None,
        "reference_mode": ref["label"],
        "machine": machine(runs),
        "keys": SUMMARY_KEYS,
        "modes": modes,
        "seed_group_keys": SEED_GROUP_KEYS,
        "seed_groups": [dict(r, test_bleu={str(k): v for k, v in r["test_bleu"].items()},
                             deltas={str(k): v for k, v in r["deltas"].items()}) for r in seed_rows(runs)],
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", required=True)
    parser.add_argument("--command", required=True, help="the command line that produced the study")
    parser.add_argument("--config", default="")
    parser.add_argument("--test-src")
    parser.add_argument("--test-ref")
    parser.add_argument("--flores", default="none")
    parser.add_argument("--budget", default="", help="the budget flag every mode got, e.g. '--minutes 15'")
    parser.add_argument("--budget-note", default="", help="why the budgets are what they are (one sentence)")
    parser.add_argument("labels", nargs="+")
    args = parser.parse_args()

    runs = [summarize_run(args.study, label) for label in args.labels]
    attach_bench(runs, read_json(os.path.join(args.study, "bench.json")))
    speed, speed_note = speed_table(runs)
    quality, quality_note = quality_table(runs)
    n_test = get(runs[0], "bleu_test", "sentences")
    out = [f"# Attention study: {os.path.basename(os.path.normpath(args.study))}", "",
           f"Modes: {', '.join(args.labels)}. Config: `{repo_relative(args.config)}`. {budget_sentence(args, runs)} "
           f"Generated {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.", "",
           "## Speed", "", *speed, "", speed_note, "",
           "## Quality", "", *quality, "", quality_note,
           bleu_scope(n_test, args.flores), "",
           *seeds_section(runs),
           *front_section(args.study, runs),
           "## Curves", "", *figure_links(args.study), "",
           "Not committed: the attention pictures and the sample translations, which show test-split sentences "
           "(the data stay out of the repository); they are in `local.md` next to this report where the study ran.",
           "",
           "## Machine and command", "", f"- Machine: {machine(runs)}", f"- Command: `{repo_relative_text(args.command)}`",
           "- The same numbers for programs: `summary.json` (keys explained in its `keys`).", ""]
    local = [f"# Attention study: {os.path.basename(os.path.normpath(args.study))}: what quotes the test split", "",
             "Kept out of the repository (`.gitignore`): the test split is data. The numbers are in `report.md`.", "",
             "## Attention", "", *attention_links(args.study), "",
             "## Sample translations (test split)", "", *samples(runs, args.test_src, args.test_ref), ""]
    path = os.path.join(args.study, "local.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(local))
    print(f"make_report: wrote {path}")
    path = os.path.join(args.study, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print(f"make_report: wrote {path}")
    path = os.path.join(args.study, "summary.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary(runs, args), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"make_report: wrote {path}")


if __name__ == "__main__":
    main()
