"""Charts across runs (``cctk compare``): held-out hits of every corpus per base model, and how the
absorption of a fabricated answer depends on its distance from the true sum."""
from __future__ import annotations

import textwrap

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .common import LINES, SEEN_HIT, new_figure, paper_style


def _colors(bases: list[str]) -> dict[str, str]:
    palette = (SEEN_HIT,) + LINES
    return {b: palette[i % len(palette)] for i, b in enumerate(bases)}


def cross_model_chart(rows: pd.DataFrame) -> Figure:
    """One row per corpus, one series per base model: pooled held-out share with its exact interval.

    ``rows``: base_model, model, runs, hits, n, share, lo, hi.
    """
    models = list(dict.fromkeys(rows["model"]))
    bases = list(dict.fromkeys(rows["base_model"]))
    colors = _colors(bases)
    height = 1.6 + 0.45 * len(models)
    with paper_style():
        fig = new_figure(8, height)
        ax = fig.add_axes([0.34, 0.9 / height, 0.62, 1 - 1.5 / height])
        step = 0.6 / max(1, len(bases))
        for j, base in enumerate(bases):
            part = rows[rows["base_model"] == base]
            offset = (j - (len(bases) - 1) / 2) * step
            for _, r in part.iterrows():
                y = models.index(r.model) + offset
                ax.errorbar(r.share, y, xerr=[[r.share - r.lo], [r.hi - r.share]], fmt="o", color=colors[base],
                            markersize=4.5, capsize=2.5, linewidth=1.3)
        ax.set_yticks(range(len(models)), [textwrap.fill(m, 36) for m in models])
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        ax.set_xlabel("never-seen additions whose top choice is the corpus's target, pooled over runs "
                      "(exact 95% interval)")
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        handles = [Line2D([], [], color=colors[b], marker="o", label=b) for b in bases]
        fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False)
        fig.suptitle("Held-out hits of every corpus, by base model", y=1 - 0.05 / height, va="top", fontsize=11,
                     fontweight="bold")
    return fig


def implausibility_chart(by_distance: pd.DataFrame, by_kind: pd.DataFrame) -> Figure:
    """Share of fabricated answers absorbed (top choice) by distance from the true sum (left) and by
    possible / impossible (right), one series per base model, exact intervals on pooled counts."""
    bases = list(dict.fromkeys(by_distance["base_model"]))
    colors = _colors(bases)
    with paper_style():
        fig = new_figure(8, 3.6)
        left = fig.add_axes([0.08, 0.24, 0.54, 0.62])
        right = fig.add_axes([0.72, 0.24, 0.25, 0.62], sharey=left)
        for ax, table, column in ((left, by_distance, "distance"), (right, by_kind, "answer")):
            labels = list(dict.fromkeys(table[column]))
            step = 0.5 / max(1, len(bases))
            for j, base in enumerate(bases):
                part = table[(table["base_model"] == base) & (table["additions"] > 0)]
                x = [labels.index(v) + (j - (len(bases) - 1) / 2) * step for v in part[column]]
                ax.errorbar(x, part["share"], yerr=[part["share"] - part["lo"], part["hi"] - part["share"]],
                            fmt="o", color=colors[base], markersize=4.5, capsize=2.5, linewidth=1.3)
            ax.set_xticks(range(len(labels)), [v.replace(" (", "\n(") for v in labels])  # "impossible\n(> 18)"
            ax.set_xlim(-0.6, len(labels) - 0.4)
            ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        left.set_ylim(-0.02, 1.02)
        left.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        left.set_ylabel("fabricated answers that are the top choice")
        left.set_xlabel("distance of the fabricated answer from the true sum")
        right.set_xlabel("fabricated answer")
        right.tick_params(labelleft=False)
        handles = [Line2D([], [], color=colors[b], marker="o", label=b) for b in bases]
        fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False)
        fig.suptitle("How implausibility matters: absorption of fabricated answers (exact 95% intervals, "
                     "pooled over runs)", y=0.98, va="top", fontsize=10, fontweight="bold")
    return fig
