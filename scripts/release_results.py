#!/usr/bin/env python3
"""release_results.py — gathers what scripts/train_release.sh measured into
one machine-readable file, NAME.results.json, from which scripts/model_card.py
writes the model card. Every number comes from a file the pipeline wrote
(train.tsv, the effective config, the prepare manifest, `projmt eval --json`
and `projmt bench --decode --json` lines, the exported files themselves), so
the card never holds a number typed by hand. Python 3 standard library only.

  release_results.py --run RUN --work RUN/release --data-dir D --flores PREFIX|none
      --out-file FILE --fp32-file FILE --weights int8 --name NAME --beam-size 4
      --max-mb 20 --command 'bash scripts/...' --output NAME.results.json

Paths are written relative to the repository when they lie inside it.
"""
import argparse
import configparser
import csv
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT = "projmt-release-results"
VERSION = 1


def fail(msg):
    sys.exit(f"release_results: {msg}")


def shown_path(path):
    """Relative to the repository when inside it or beside it (../shared, the
    data convention); else the file name alone: a committed results file
    carries no machine's absolute paths."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full, REPO)
    if rel.startswith(os.pardir + os.sep + os.pardir):
        return os.path.basename(full)
    return rel


def read_json_line(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.loads(f.read())
    except (OSError, ValueError) as e:
        fail(f"cannot read the JSON line in {path}: {e}")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_facts(path):
    return {"path": shown_path(path), "bytes": os.path.getsize(path), "sha256": sha256(path)}


def number(text):
    """An INI value as int or float when it is one, else the string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def effective_config(path):
    parser = configparser.ConfigParser(interpolation=None)
    if not parser.read(path, encoding="utf-8"):
        fail(f"cannot read the effective config {path}")
    return {section: {k: number(v) for k, v in parser[section].items()} for section in parser.sections()}


def training_facts(run):
    """The last train row's position and the last validation row's scores."""
    path = os.path.join(run, "train.tsv")
    try:
        with open(path, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError as e:
        fail(f"cannot read {path}: {e}")
    if not rows:
        fail(f"{path} has no rows")
    last = rows[-1]
    valid = [r for r in rows if r["kind"] == "valid"]
    out = {"steps": int(last["step"]), "epochs": float(last["epoch"]),
           "wall_minutes": float(last["elapsed_s"]) / 60.0, "last_valid": None}
    if valid:
        v = valid[-1]
        out["last_valid"] = {"step": int(v["step"]), "loss": float(v["loss"]), "accuracy": float(v["accuracy"]),
                             "bleu": float(v["bleu"]) if v["bleu"] else None,
                             "chrf": float(v["chrf"]) if v["chrf"] else None}
    return out


def sittings(log_path):
    """How many projmt train processes built this run: the runs logged in
    train.log since the last one that started from scratch (each logs
    'training: N pairs ...', a resumed one 'resuming from ...' before it)."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            lines = f.read().replace("\r", "\n").splitlines()
    except OSError:
        return None
    count, resumed = 0, False
    for line in lines:
        if "resuming from " in line:
            resumed = True
        elif re.search(r"training: \d+ pairs", line):
            count = count + 1 if resumed else 1
            resumed = False
    return count or None


def score(path):
    j = read_json_line(path)
    return {"bleu": j["bleu"]["score"], "chrf": j["chrf"]["score"], "sentences": j["sentences"],
            "beam_size": j["beam_size"], "bleu_signature": j["bleu"]["signature"],
            "chrf_signature": j["chrf"]["signature"]}


def speed(work, weights):
    path = os.path.join(work, f"bench-{weights}.json")
    try:
        with open(path, encoding="utf-8") as f:
            rounds = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read the JSON lines in {path}: {e}")
    if not rounds:
        fail(f"{path} holds no bench --decode run")
    with open(os.path.join(work, f"bench-{weights}.threads"), encoding="utf-8") as f:
        threads = int(f.read().strip())
    with open(os.path.join(work, f"bench-{weights}.loadavg"), encoding="utf-8") as f:
        loads = [float(x) for x in f.read().split()]
    # The uncapped runs decode with the model's own length limits, as translate does;
    # each is quoted from its median round (the lower middle for an even count).
    picked = {}
    for key, label in (("greedy", "greedy, limits"), ("beam4", "beam 4, limits")):
        runs = [r for j in rounds for r in j["runs"] if r["run"] == label]
        if len(runs) != len(rounds):
            fail(f"bench-{weights}.json: a round has no '{label}' run")
        median = sorted(runs, key=lambda r: r["sentences_per_s"])[(len(runs) - 1) // 2]
        picked[key] = {"sentences_per_s": median["sentences_per_s"], "src_words_per_s": median["src_words_per_s"],
                       "tokens_per_s": median["tokens_per_s"]}
    return {"threads": threads, "sentences": rounds[0]["sentences"], "batch": rounds[0]["batch"], "rounds": len(rounds),
            "load_average_1min": max(loads), **picked, "all_runs": [j["runs"] for j in rounds]}


def git(*args):
    """A git command's output in the repository, None when it fails."""
    r = subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def released_as(digest, results_file):
    """The committed release a model file belongs to: the newest commit whose
    results file (this release's NAME.results.json, as committed) lists a file
    with this sha256, as {commit, weights (the file of it that matched),
    shipped_path}; None when none does (a file of no committed release, or
    the results file is not in git)."""
    rel = os.path.relpath(os.path.abspath(results_file), REPO)
    if rel.startswith(os.pardir):
        return None
    for commit in (git("log", "--format=%h", "--", rel) or "").split():
        text = git("show", f"{commit}:{rel}")
        try:
            release = json.loads(text) if text else {}
        except ValueError:
            continue
        files = release.get("files", {})
        for weights in (release.get("weights"), "fp32"):
            f = files.get(weights) if weights else None
            if isinstance(f, dict) and f.get("sha256") == digest:
                shipped = files.get(release.get("weights"), {})
                return {"commit": commit, "weights": weights, "shipped_path": shipped.get("path")}
    return None


def started_from(shown, used, results_file, stage):
    """Where a run's weights came from (train --init-from): the path as the
    user gave it, the sha256 of the file actually read (train_release copies a
    --finetune-from file first: the original may be the file this release
    overwrites), and the committed release it belongs to, if any."""
    digest = sha256(used)
    return {"path": shown_path(shown), "sha256": digest, "stage": stage,
            "release": released_as(digest, results_file)}


def git_facts():
    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "modified_files": None if dirty is None else len(dirty.splitlines())}


def machine():
    cpu = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count()}


def source_paths(spec):
    """The file(s) of a `projmt prepare --source` SPEC, parsed as prepare
    does (src/data/prepare_sources.c): PATH[:OPTIONS] or EN+ES[:OPTIONS]; a
    ':' followed later by '/' belongs to a folder name."""
    colon = spec.rfind(":")
    path = spec if colon < 0 or "/" in spec[colon:] else spec[:colon]
    return path.split("+", 1) if "+" in path else [path]


def source_facts(manifest):
    """One entry per source of a multi-source prepare (manifest "sources",
    in prepare's order: --corpus or --src-file/--tgt-file first when given,
    then each --source): name, role, weight, file names with sha256 (when the
    file is at hand), and pairs read, kept, trained on and dropped. Empty for
    a manifest without a per-source table."""
    cfg = manifest.get("config", {})
    files = []
    if cfg.get("corpus"):
        files.append([cfg["corpus"]])
    elif cfg.get("src_file"):
        files.append([cfg["src_file"], cfg["tgt_file"]])
    files += [source_paths(spec) for spec in cfg.get("sources") or []]
    rows = manifest.get("sources") or []
    if len(files) != len(rows):
        files = [[] for _ in rows]
    out = []
    for paths, s in zip(files, rows):
        out.append({"name": s["name"], "role": s["role"], "weight": s["weight"],
                    "files": [os.path.basename(p) for p in paths],
                    "sha256": [sha256(p) if os.path.isfile(p) else None for p in paths],
                    "input_lines": s["input_lines"], "kept_pairs": s["kept_pairs"],
                    "train_pairs": s["split_pairs"]["train"], "dropped": sum(s["dropped"].values())})
    return out


def data_facts(data_dir):
    manifest = read_json_line(os.path.join(data_dir, "manifest.json"))
    corpus = manifest.get("config", {}).get("corpus") or None
    out = {"data_dir": shown_path(data_dir), "corpus_file": os.path.basename(corpus) if corpus else None,
           "corpus_sha256": sha256(corpus) if corpus and os.path.isfile(corpus) else None,
           "input_lines": manifest["input_lines"], "kept_pairs": manifest["kept_pairs"],
           "pairs": {s: manifest["splits"][s]["pairs"] for s in ("train", "valid", "test")},
           "train_tokens": manifest["splits"]["train"]["tokens"], "vocab_size": manifest["vocab"]["size"],
           "spm_model_type": manifest["config"]["spm_model_type"], "sources": source_facts(manifest)}
    return out


def samples(work):
    """The quick start's sentences and the shipped file's translations
    (RUN/release/samples.tsv, English TAB Spanish), or [] when not made."""
    path = os.path.join(work, "samples.tsv")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [dict(zip(("en", "es"), line.rstrip("\n").split("\t", 1))) for line in f if line.strip()]


def trained_precision(run, configured):
    """The precision the run trained in: the configured one, or for auto
    (resolved by `projmt train` per CPU) the one its log's start line names,
    the last sitting's."""
    if configured != "auto":
        return configured
    found = configured
    try:
        with open(os.path.join(run, "logs", "train.log"), encoding="utf-8") as f:
            for line in f:
                m = re.search(r"; precision (fp32|bf16)\b", line)
                if m:
                    found = m.group(1)
    except OSError:
        pass
    return found


def finetune_facts(run, data_dir):
    """The fine-tuning stage: its position, its schedule, what it trained on."""
    train_cfg = effective_config(os.path.join(run, "logs", "config.ini")).get("train", {})
    data = data_facts(data_dir)
    return {**training_facts(run), "lr": train_cfg.get("lr"), "warmup": train_cfg.get("warmup"),
            "max_steps": train_cfg.get("max_steps"), "data_dir": shown_path(data_dir),
            "train_pairs": data["pairs"]["train"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("run", "work", "data-dir", "flores", "out-file", "fp32-file", "weights", "name", "command",
                 "output"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--beam-size", type=int, required=True)
    ap.add_argument("--finetune", help="the fine-tuning run folder (train_release.sh --finetune-steps)")
    ap.add_argument("--finetune-data-dir", help="its prepared data (spa.txt with the main data's vocabulary)")
    ap.add_argument("--finetune-from", help="the model fine-tuned, when there was no main run (--run is then the "
                    "fine-tuning run)")
    ap.add_argument("--finetune-from-copy", help="the copy of that file that was fine-tuned (its sha256 is "
                    "recorded: the file itself may be the one this release overwrites)")
    ap.add_argument("--max-mb", type=float, required=True)
    a = ap.parse_args()
    work, w = a.work, a.weights

    config = effective_config(os.path.join(a.run, "logs", "config.ini"))
    for section, key in (("data", "data_dir"), ("train", "save_dir")):
        if config.get(section, {}).get(key):
            config[section][key] = shown_path(config[section][key])
    train_cfg = config.get("train", {})
    # A main run started from another model's weights (train --init-from).
    init_from = train_cfg.get("init_from") or None
    if init_from:
        if not os.path.isfile(init_from):
            fail(f"the main run started from {init_from} (train --init-from), which is gone: the card could not "
                 "name it; put it back or give it again")
        train_cfg["init_from"] = shown_path(init_from)
    with open(os.path.join(work, "chosen.txt"), encoding="utf-8") as f:
        chosen = f.read().strip()
    candidates = []
    with open(os.path.join(work, "candidates.txt"), encoding="utf-8") as f:
        for line in f:
            label, checkpoint, raw = line.rstrip("\n").split(":")
            s = score(os.path.join(work, f"select-{label}.json"))
            candidates.append({"label": label, "checkpoint": shown_path(checkpoint), "raw_weights": raw == "--raw",
                               "bleu": s["bleu"], "chrf": s["chrf"]})
    if chosen not in [c["label"] for c in candidates]:
        fail(f"chosen candidate '{chosen}' is not among {candidates}")
    select_sentences = score(os.path.join(work, f"select-{chosen}.json"))["sentences"]

    kinds = ("fp32", w)
    evals = {"test": {k: score(os.path.join(work, f"eval-test-{k}.json")) for k in kinds}, "flores200_dev": None}
    for k in kinds:
        loss = read_json_line(os.path.join(work, f"eval-test-loss-{k}.json"))
        evals["test"][k].update({"loss": loss["loss"], "token_accuracy": loss["accuracy"]})
    if a.flores != "none":
        evals["flores200_dev"] = {k: score(os.path.join(work, f"eval-flores-{k}.json")) for k in kinds}
    params = read_json_line(os.path.join(work, f"eval-test-loss-{w}.json"))["params"]

    results = {
        "format": FORMAT, "version": VERSION, "name": a.name,
        "created_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": a.command, "git": git_facts(), "machine": machine(),
        "data": data_facts(a.data_dir),
        "flores": None if a.flores == "none" else shown_path(a.flores),
        "config": config,
        "parameters": params,
        "training": {**training_facts(a.run), "sittings": sittings(os.path.join(a.run, "logs", "train.log")),
                     "precision": trained_precision(a.run, train_cfg.get("precision", "fp32")),
                     "ema": train_cfg.get("ema"),
                     "keep_last": train_cfg.get("keep_last"), "threads": train_cfg.get("threads"),
                     "budget": {k: train_cfg.get(k) for k in ("minutes", "max_steps") if train_cfg.get(k)}},
        "finetune": finetune_facts(a.finetune, a.finetune_data_dir) if a.finetune else None,
        "started_from": started_from(a.finetune_from, a.finetune_from_copy or a.finetune_from, a.output, "finetune")
                        if a.finetune_from else
                        started_from(init_from, init_from, a.output, "main") if init_from else None,
        "selection": {"split": "valid", "sentences": select_sentences, "beam_size": a.beam_size,
                      "metric": "bleu", "candidates": candidates, "chosen": chosen},
        "weights": w,
        "files": {w: file_facts(a.out_file), "fp32": file_facts(a.fp32_file),
                  "last_checkpoint_bytes": os.path.getsize(os.path.join(a.run, "last.ckpt")),
                  "max_mb": a.max_mb},
        "eval": evals,
        "speed": {k: speed(work, k) for k in kinds},
        "samples": samples(work),
    }
    tmp = a.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, a.output)


if __name__ == "__main__":
    main()
