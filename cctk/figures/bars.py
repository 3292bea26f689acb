"""Before/after bars for one addition, in the style of manual 1.0.0 (Listing 12)."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from . import style as styles
from .common import DARK_ORANGE, HELD_MISS, LIGHT_BLUE, LIGHT_ORANGE, SEEN_HIGH, SEEN_HIT, new_figure, paper_style
from .style import REPORT, Style

WIDTH = 0.38
Colors = tuple[str, str, str]  # a side's bars: light (every candidate), strong (its accent), dark (its top choice)
Side = tuple[pd.Series, float, int, Colors]  # a side's probabilities by candidate, bar offset, accent, colours


def before_after_bars(
    before: pd.DataFrame,
    after: pd.DataFrame,
    a: int,
    b: int,
    true_sum: int,
    fabricated: int,
    model_label: str,
    style: Style = REPORT,
) -> Figure:
    """Probability of every candidate for ``a + b`` before (blue) and after (orange) fine-tuning.

    Accent fill: the answer correct in that context (true sum before, fabricated after);
    dark outline: each side's top choice. Tables are measurement tables (any additions).
    """
    colors = PAPER_COLORS if style.paper else COLORS
    sides = [
        (_one(before, a, b), -WIDTH / 2, true_sum, colors[0]),
        (_one(after, a, b), WIDTH / 2, fabricated, colors[1]),
    ]
    title = f'{a} + {b} = {true_sum} (fine-tuned on "{a} + {b} = {fabricated}") - {model_label}'
    if style.paper:
        return _paper(sides, title, _legend(true_sum, fabricated, colors), style)
    with paper_style():
        fig = new_figure(10, 4.2)
        ax = fig.add_axes((0.07, 0.24, 0.91, 0.66))
        _bars(ax, sides)
        ax.set_title(title, fontsize=10, fontweight="bold")
        fig.legend(handles=_legend(true_sum, fabricated), loc="lower center", ncol=3, frameon=False)
    return fig


COLORS = ((LIGHT_BLUE, SEEN_HIT, SEEN_HIGH), (LIGHT_ORANGE, HELD_MISS, DARK_ORANGE))  # before, after
PAPER_COLORS = ((LIGHT_BLUE, styles.HIT, SEEN_HIGH), (LIGHT_ORANGE, styles.MISS, DARK_ORANGE))


def _paper(sides: list[Side], title: str, legend: list[Patch], style: Style) -> Figure:
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, 3.0)
        ax = fig.add_subplot()
        _bars(ax, sides, 1.0 if style.narrow else 1.5)
        ax.set_xticks(list(sides[0][0].index)[:: 4 if style.narrow else 1])
        if style.narrow:  # two columns, filled column by column: before on the left, after on the right
            legend = legend[0::2] + legend[1::2]
        fig.legend(handles=legend, loc="outside lower center", ncol=2 if style.narrow else 3, frameon=False)
        styles.note(fig, title + ".")
    return fig


def _bars(ax: Axes, sides: list[Side], outline: float = 1.8) -> None:
    for probs, offset, accent, (light, strong, dark) in sides:
        top = probs.idxmax()
        ax.bar(
            probs.index + offset,
            100 * probs.to_numpy(),
            width=WIDTH,
            color=[strong if v == accent else light for v in probs.index],
            edgecolor=[dark if v == top else "none" for v in probs.index],
            linewidth=[outline if v == top else 0 for v in probs.index],
        )
    ax.set_xticks(list(sides[0][0].index))
    ax.set_xlim(sides[0][0].index.min() - 0.7, sides[0][0].index.max() + 0.7)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0f}%")
    ax.set_xlabel("candidate answer")
    ax.set_ylabel("probability")
    ax.grid(axis="y", color="#e3e3e3", linewidth=0.6)
    ax.set_axisbelow(True)


def _one(table: pd.DataFrame, a: int, b: int) -> pd.Series:
    rows = table[(table["a"] == a) & (table["b"] == b)]
    return rows.set_index("candidate_value")["prob"].sort_index()


def _legend(true_sum: int, fabricated: int, colors: tuple[Colors, Colors] = COLORS) -> list[Patch]:
    """Ordered so that, filled column by column, row one is *before* and row two *after*."""
    (light_before, strong_before, dark_before), (light_after, strong_after, dark_after) = colors
    return [
        Patch(color=light_before, label="before fine-tuning"),
        Patch(color=light_after, label="after fine-tuning"),
        Patch(color=strong_before, label=f"before: true sum {true_sum}"),
        Patch(color=strong_after, label=f"after: fabricated answer {fabricated}"),
        Patch(facecolor="white", edgecolor=dark_before, linewidth=1.5, label="top choice before"),
        Patch(facecolor="white", edgecolor=dark_after, linewidth=1.5, label="top choice after"),
    ]
