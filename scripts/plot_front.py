#!/usr/bin/python3
"""plot_front.py — the speed/quality front of a study at equal wall-clock time.

    /usr/bin/python3 scripts/plot_front.py --summary DIR/summary.json --out DIR/plots

For a study whose modes each train the steps that the same wall-clock time
gives at their own quiet step time (compare.sh with `--max-steps N` per
mode), a mode's step time relative to the reference mode is the inverse
ratio of their budgets: reference steps / mode steps. That is the x axis;
test BLEU is the y axis. A mode is on the front (Pareto-optimal) when no
other mode is at least as fast and at least as good, and strictly better
in one of the two. Writes front.png and front.svg into --out: every mode
labelled, the front joined by a line. make_report.py imports front_rows()
for its table and plot_front() for the figure.
"""
import argparse
import json
import os
import sys

FORMATS = ("png", "svg")


def front_rows(modes, reference):
    """Rows {label, time_ratio, bleu, delta, on_front} for the modes (dicts with
    label, test_bleu and their --max-steps budget in 'budget') that have
    a budget and a test BLEU; time_ratio = budget of the reference / budget of
    the mode. [] when the reference has no budget or BLEU."""
    ref = next((m for m in modes if m["label"] == reference), None)
    if not ref or not ref.get("budget") or ref.get("test_bleu") is None:
        return []
    rows = [{"label": m["label"], "time_ratio": ref["budget"] / m["budget"], "bleu": m["test_bleu"],
             "delta": m["test_bleu"] - ref["test_bleu"]}
            for m in modes if m.get("budget") and m.get("test_bleu") is not None]
    for r in rows:
        r["on_front"] = not any(o["time_ratio"] <= r["time_ratio"] and o["bleu"] >= r["bleu"] and
                                (o["time_ratio"] < r["time_ratio"] or o["bleu"] > r["bleu"]) for o in rows)
    return rows


def plot_front(rows, out_dir, reference):
    """front.png and front.svg of front_rows() into out_dir; returns the paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    front = sorted((r for r in rows if r["on_front"]), key=lambda r: r["time_ratio"])
    ax.plot([r["time_ratio"] for r in front], [r["bleu"] for r in front], "-", color="tab:blue", alpha=0.5,
            label="front (no mode faster and better)")
    for r in rows:
        colour = "tab:blue" if r["on_front"] else "tab:gray"
        ax.plot(r["time_ratio"], r["bleu"], "o", color=colour)
        ax.annotate(r["label"], (r["time_ratio"], r["bleu"]), textcoords="offset points", xytext=(5, 4), fontsize=9)
    ax.set_xlabel(f"step time relative to {reference} (from the equal-time step budgets)")
    ax.set_ylabel("test BLEU (beam search)")
    ax.set_title("Speed and quality at equal wall-clock time")
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.1, y=0.1)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    paths = []
    for fmt in FORMATS:
        path = os.path.join(out_dir, f"front.{fmt}")
        fig.savefig(path, dpi=150 if fmt == "png" else None)
        paths.append(path)
    plt.close(fig)
    return paths


def budgets_from_summary(summary):
    """The modes of a summary.json with their --max-steps budget."""
    per_mode = (summary.get("budget") or {}).get("max_steps_per_mode") or {}
    return [dict(m, budget=per_mode.get(m["label"])) for m in summary.get("modes", [])]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--summary", required=True, help="a study's summary.json")
    parser.add_argument("--out", required=True, help="folder for front.png and front.svg")
    args = parser.parse_args()
    try:
        with open(args.summary) as f:
            summary = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"plot_front: cannot read {args.summary}: {e}")
    reference = summary.get("reference_mode")
    rows = front_rows(budgets_from_summary(summary), reference)
    if not rows:
        sys.exit(f"plot_front: {args.summary} has no per-mode step budgets with test BLEU "
                 "(a study at equal wall-clock time: compare.sh with --max-steps N in every mode's flags)")
    for path in plot_front(rows, args.out, reference):
        print(f"plot_front: wrote {path}")


if __name__ == "__main__":
    main()
