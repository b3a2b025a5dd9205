#!/usr/bin/python3
"""plot_curves.py — training curves of one or more runs from their train.tsv.

    /usr/bin/python3 scripts/plot_curves.py --out DIR LABEL=path/train.tsv [LABEL=...]

Writes into DIR, each as PNG (for looking) and SVG (for papers):
  accuracy     token accuracy (teacher-forced) vs epoch and vs step, train and valid
  loss         cross-entropy per token vs epoch and vs step, train and valid
  valid_time   validation BLEU vs wall-clock training time when the logs have
               BLEU values, otherwise validation loss vs wall-clock time
All runs share each figure: one colour per run, solid = train, dashed = valid.
"""
import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

FORMATS = ("png", "svg")


def number(text):
    """A TSV field as a float; empty fields (not applicable) become NaN."""
    return float(text) if text not in ("", None) else math.nan


def read_log(path):
    """Rows of a train.tsv as {kind: {column: [values]}}."""
    runs = {"train": {}, "valid": {}}
    with open(path, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            columns = runs.setdefault(row["kind"], {})
            for key, value in row.items():
                if key != "kind":
                    columns.setdefault(key, []).append(number(value))
    return runs


def parse_runs(specs):
    runs = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            sys.exit(f"plot_curves: expected LABEL=path/train.tsv, got '{spec}'")
        if not os.path.isfile(path):
            sys.exit(f"plot_curves: {path}: no such file (train the run first)")
        runs.append((label, read_log(path)))
    return runs


def has_values(values):
    return any(not math.isnan(v) for v in values)


def plot_pairs(ax, runs, x_key, y_key, scale=1.0):
    """One line per run and kind: train solid, valid dashed, same colour per run."""
    for i, (label, log) in enumerate(runs):
        colour = f"C{i}"
        for kind, style in (("train", "-"), ("valid", "--")):
            columns = log.get(kind, {})
            xs, ys = columns.get(x_key, []), columns.get(y_key, [])
            points = [(x, y * scale) for x, y in zip(xs, ys) if not (math.isnan(x) or math.isnan(y))]
            if points:
                ax.plot(*zip(*points), style, color=colour, marker="." if kind == "valid" else None,
                        label=f"{label} ({kind})")
    ax.grid(True, alpha=0.3)


def save(fig, out_dir, name):
    for fmt in FORMATS:
        fig.savefig(os.path.join(out_dir, f"{name}.{fmt}"), dpi=120, bbox_inches="tight")
    plt.close(fig)


def metric_figure(runs, out_dir, name, y_key, y_label, title, scale=1.0):
    """Two panels (vs epoch, vs step) of one metric."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (x_key, x_label) in zip(axes, (("epoch", "epoch"), ("step", "optimizer step"))):
        plot_pairs(ax, runs, x_key, y_key, scale)
        ax.set_xlabel(x_label)
        ax.set_ylabel(y_label)
        ax.set_title(f"{title} vs {x_label}")
    axes[0].legend(fontsize="small")
    save(fig, out_dir, name)


def time_figure(runs, out_dir):
    """Validation BLEU (or loss, when no BLEU was logged) vs training minutes."""
    use_bleu = any(has_values(log.get("valid", {}).get("bleu", [])) for _, log in runs)
    key, y_label = ("bleu", "validation BLEU") if use_bleu else ("loss", "validation cross-entropy (nats/token)")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, log) in enumerate(runs):
        valid = log.get("valid", {})
        points = [(t / 60.0, y) for t, y in zip(valid.get("elapsed_s", []), valid.get(key, []))
                  if not (math.isnan(t) or math.isnan(y))]
        if points:
            ax.plot(*zip(*points), "-", marker=".", color=f"C{i}", label=label)
    ax.set_xlabel("wall-clock training time (minutes)")
    ax.set_ylabel(y_label)
    ax.set_title(f"{y_label} vs training time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    save(fig, out_dir, "valid_time")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the figures (created if missing)")
    parser.add_argument("runs", nargs="+", metavar="LABEL=TSV", help="a run's label and its train.tsv")
    args = parser.parse_args()
    runs = parse_runs(args.runs)
    os.makedirs(args.out, exist_ok=True)
    metric_figure(runs, args.out, "accuracy", "accuracy", "token accuracy (%)", "Token accuracy", scale=100.0)
    metric_figure(runs, args.out, "loss", "loss", "label-smoothed cross-entropy (nats/token)", "Cross-entropy")
    time_figure(runs, args.out)
    print(f"plot_curves: wrote {', '.join(n + '.{png,svg}' for n in ('accuracy', 'loss', 'valid_time'))} "
          f"in {args.out}")


if __name__ == "__main__":
    main()
