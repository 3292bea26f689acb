"""Before/after bars for one addition, in the style of manual 1.0.0 (Listing 12)."""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from .common import (DARK_ORANGE, HELD_MISS, LIGHT_BLUE, LIGHT_ORANGE, SEEN_HIGH, SEEN_HIT,
                     new_figure, paper_style)

WIDTH = 0.38


def before_after_bars(before: pd.DataFrame, after: pd.DataFrame, a: int, b: int, true_sum: int,
                      fabricated: int, model_label: str) -> Figure:
    """Probability of every candidate for ``a + b`` before (blue) and after (orange) fine-tuning.

    Accent fill: the answer correct in that context (true sum before, fabricated after);
    dark outline: each side's top choice. Tables are measurement tables (any additions).
    """
    sides = [(_one(before, a, b), -WIDTH / 2, true_sum, (LIGHT_BLUE, SEEN_HIT, SEEN_HIGH)),
             (_one(after, a, b), WIDTH / 2, fabricated, (LIGHT_ORANGE, HELD_MISS, DARK_ORANGE))]
    with paper_style():
        fig = new_figure(10, 4.2)
        ax = fig.add_axes([0.07, 0.24, 0.91, 0.66])
        for probs, offset, accent, (light, strong, dark) in sides:
            top = probs.idxmax()
            ax.bar(probs.index + offset, 100 * probs.values, width=WIDTH,
                   color=[strong if v == accent else light for v in probs.index],
                   edgecolor=[dark if v == top else "none" for v in probs.index],
                   linewidth=[1.8 if v == top else 0 for v in probs.index])
        ax.set_xticks(list(sides[0][0].index))
        ax.set_xlim(sides[0][0].index.min() - 0.7, sides[0][0].index.max() + 0.7)
        ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0f}%")
        ax.set_xlabel("candidate answer")
        ax.set_ylabel("probability")
        ax.grid(axis="y", color="#e3e3e3", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_title(f'{a} + {b} = {true_sum} (fine-tuned on "{a} + {b} = {fabricated}")'
                     f" - {model_label}", fontsize=10, fontweight="bold")
        fig.legend(handles=_legend(true_sum, fabricated), loc="lower center", ncol=3,
                   frameon=False)
    return fig


def _one(table: pd.DataFrame, a: int, b: int) -> pd.Series:
    rows = table[(table["a"] == a) & (table["b"] == b)]
    return rows.set_index("candidate_value")["prob"].sort_index()


def _legend(true_sum: int, fabricated: int) -> list:
    """Ordered so that, filled column by column, row one is *before* and row two *after*."""
    return [Patch(color=LIGHT_BLUE, label="before fine-tuning"),
            Patch(color=LIGHT_ORANGE, label="after fine-tuning"),
            Patch(color=SEEN_HIT, label=f"before: true sum {true_sum}"),
            Patch(color=HELD_MISS, label=f"after: fabricated answer {fabricated}"),
            Patch(facecolor="white", edgecolor=SEEN_HIGH, linewidth=1.5, label="top choice before"),
            Patch(facecolor="white", edgecolor=DARK_ORANGE, linewidth=1.5,
                  label="top choice after")]
