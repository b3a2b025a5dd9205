#!/usr/bin/python3
"""plot_attention.py — heatmaps of the attention dumps of `projmt attention`.

    /usr/bin/python3 scripts/plot_attention.py --out DIR [--name PREFIX] LABEL=attention.json [LABEL=...]

For each site (encoder self, decoder self, decoder cross) writes
DIR/PREFIX_<site>.{png,svg}: one row per layer, one column per head of each
dump, the dumps side by side (e.g. standard | projection). Rows of a panel
are query pieces, columns key pieces: for cross-attention, rows = target
pieces being predicted, columns = source pieces. Also writes
DIR/PREFIX_cross_mean.{png,svg}: the last decoder layer's cross-attention
averaged over heads, one panel per dump — the compact picture for a paper.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

FORMATS = ("png", "svg")
SITES = ("encoder_self", "decoder_self", "decoder_cross")
TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
          "decoder_cross": "decoder cross-attention"}
PANEL_INCHES = 0.28   # per piece, so long sentences stay readable
MIN_PANEL = 2.2


def load_dumps(specs):
    dumps = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            sys.exit(f"plot_attention: expected LABEL=attention.json, got '{spec}'")
        try:
            with open(path) as f:
                dumps.append((label, json.load(f)))
        except (OSError, ValueError) as e:
            sys.exit(f"plot_attention: {path}: {e}")
    return dumps


def pieces(dump, which):
    """Piece labels, with SentencePiece's word-start mark shown as '_'."""
    return [p.replace("\u2581", "_") for p in dump[f"{which}_pieces"]]


def draw_panel(ax, site, dump, weights, title, fontsize, vmax):
    image = ax.imshow(np.asarray(weights), cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    rows, cols = pieces(dump, site["queries"]), pieces(dump, site["keys"])
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(cols, rotation=90, fontsize=fontsize)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=fontsize)
    ax.set_title(title, fontsize=fontsize + 1)
    return image


def shared_max(matrices):
    """One colour scale for every panel of a figure, so modes compare by colour."""
    return max(float(np.max(np.asarray(m))) for m in matrices) or 1.0


def with_kind(label, kind):
    return label if label == kind else f"{label} ({kind})"


def panel_size(dump, site):
    rows, cols = len(dump[f"{site['queries']}_pieces"]), len(dump[f"{site['keys']}_pieces"])
    return max(MIN_PANEL, cols * PANEL_INCHES), max(MIN_PANEL, rows * PANEL_INCHES)


def save(fig, out_dir, name):
    for fmt in FORMATS:
        fig.savefig(os.path.join(out_dir, f"{name}.{fmt}"), dpi=110, bbox_inches="tight")
    plt.close(fig)


def site_figure(dumps, site_name, out_dir, prefix):
    """Grid: layers down, (dump, head) across."""
    per_dump = [[s for s in d["sites"] if s["site"] == site_name] for _, d in dumps]
    n_layers = max(len(s) for s in per_dump)
    heads = [d["n_heads"] for _, d in dumps]
    if n_layers == 0:
        return None
    width, height = panel_size(dumps[0][1], per_dump[0][0])
    vmax = shared_max(s["weights"] for sites in per_dump for s in sites)
    fig, axes = plt.subplots(n_layers, sum(heads), figsize=(width * sum(heads), height * n_layers + 0.8),
                             squeeze=False)
    image = None
    for layer in range(n_layers):
        col = 0
        for (label, dump), sites in zip(dumps, per_dump):
            for h in range(dump["n_heads"]):
                ax = axes[layer][col]
                col += 1
                if layer >= len(sites):
                    ax.axis("off")
                    continue
                site = sites[layer]
                title = f"{with_kind(label, site['kind'])} L{layer} H{h}"
                image = draw_panel(ax, site, dump, site["weights"][h], title, 7, vmax)
    fig.suptitle(f"{TITLES[site_name]} — \"{dumps[0][1]['source']}\"", fontsize=11)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    name = f"{prefix}_{site_name}"
    save(fig, out_dir, name)
    return name


def cross_mean_figure(dumps, out_dir, prefix):
    """Last decoder layer's cross-attention, mean over heads, one panel per dump."""
    panels = []
    for label, dump in dumps:
        cross = [s for s in dump["sites"] if s["site"] == "decoder_cross"]
        if cross:
            panels.append((label, dump, cross[-1], np.mean(np.asarray(cross[-1]["weights"]), axis=0)))
    if not panels:
        return None
    width, height = panel_size(panels[0][1], panels[0][2])
    fig, axes = plt.subplots(1, len(panels), squeeze=False, figsize=(width * len(panels) + 1.5, height + 1.2))
    vmax = shared_max(mean for *_, mean in panels)
    for ax, (label, dump, site, mean) in zip(axes[0], panels):
        image = draw_panel(ax, site, dump, mean, f"{with_kind(label, site['kind'])}: last layer, mean of heads", 8,
                           vmax)
        ax.set_xlabel("source piece")
    axes[0][0].set_ylabel("predicted target piece")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(f"cross-attention — \"{dumps[0][1]['source']}\"", fontsize=11)
    name = f"{prefix}_cross_mean"
    save(fig, out_dir, name)
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the figures (created if missing)")
    parser.add_argument("--name", default="attention", help="file name prefix (default: attention)")
    parser.add_argument("dumps", nargs="+", metavar="LABEL=JSON", help="a label and a projmt attention dump")
    args = parser.parse_args()
    dumps = load_dumps(args.dumps)
    os.makedirs(args.out, exist_ok=True)
    written = [n for n in (site_figure(dumps, s, args.out, args.name) for s in SITES) if n]
    written.append(cross_mean_figure(dumps, args.out, args.name))
    written = [n for n in written if n]
    print(f"plot_attention: wrote {', '.join(n + '.{png,svg}' for n in written)} in {args.out}")


if __name__ == "__main__":
    main()
