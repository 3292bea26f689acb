"""The synthesis chart (manual 2.0.0, section 7.6): share of hits per model and group."""

from __future__ import annotations

import textwrap
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.transforms import blended_transform_factory

from ....figures import style as styles
from ....figures.common import BASE, CONTROL, DOT, HELD_HIT, SEEN_HIT, new_figure, paper_style
from ....figures.style import REPORT, Style

TITLE = "Synthesis: hits on each model's own target"
# The chart's series by key, and the legend's words for each (its labels, here at the edge).
SERIES = ("seen", "heldout", "control_heldout", "base")
COLORS = {"seen": SEEN_HIT, "heldout": HELD_HIT, "control_heldout": CONTROL, "base": BASE}
LABELS = {"seen": "seen", "heldout": "held out", "control_heldout": "held out, control", "base": "base model (all 81)"}
OFFSET = {"seen": -0.15, "heldout": 0.15, "control_heldout": 0.15, "base": 0.0}
# Counts column; the base model (trained on nothing) is neither seen nor held out: its count of all 81 sits
# between the two columns, marked "(all)"
COLUMN = {"seen": 0.0, "base": 0.5, "heldout": 1.0, "control_heldout": 1.0}
# Paper style: (colour, marker) of each series.
PAPER = {
    "seen": (styles.HIT, "o"),
    "heldout": (styles.MISS, "s"),
    "control_heldout": (CONTROL, "^"),
    "base": ("#000000", "D"),
}
PAPER_DOT: dict[str, Any] = {"markersize": 3.5, "capsize": 2, "linewidth": 1.0}


def synthesis_chart(rows: pd.DataFrame, style: Style = REPORT) -> Figure:
    """One row per model: dot = share of hits, bar = exact 95% interval, per group.

    ``rows``: columns model (its label), series (a key of ``SERIES``), hits, n, share, lo, hi (shares and
    bounds in 0..1).
    """
    models = list(dict.fromkeys(rows["model"]))
    if style.paper:
        return _paper(rows, models, style)
    height = 1.5 + 0.42 * len(models)
    with paper_style():
        fig = new_figure(8, height)
        ax = fig.add_axes((0.3, 0.75 / height, 0.48, 1 - 1.4 / height))
        for _, r in rows.iterrows():
            ax.errorbar(
                r.share, _y(rows, models, r), xerr=[[r.share - r.lo], [r.hi - r.share]], color=COLORS[r.series], **DOT
            )
        _counts(ax, rows, models)
        ax.set_yticks(range(len(models)), [textwrap.fill(m, 34) for m in models])
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        ax.set_xlabel("share of additions whose top choice is the target (exact 95% interval)")
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.spines["right"].set_visible(False)
        present = [g for g in COLORS if g in set(rows["series"])]
        handles = [Line2D([], [], color=COLORS[g], marker="o", label=LABELS[g]) for g in present]
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
        fig.suptitle(TITLE, x=0.54, y=1 - 0.05 / height, va="top", fontsize=11, fontweight="bold")
    return fig


def _y(rows: pd.DataFrame, models: list[str], r: pd.Series) -> float:
    """A dot's row: its model's, nudged by its group where the model has two."""
    return models.index(r.model) + (OFFSET[r.series] if (rows["model"] == r.model).sum() > 1 else 0.0)


def _counts(ax: Axes, rows: pd.DataFrame, models: list[str]) -> None:
    """Two columns right of the chart: hits / n for the seen and the held-out additions (the base model's, of
    all 81, between them)."""
    where = blended_transform_factory(ax.transAxes, ax.transData)
    for col, header in enumerate(("seen", "held out")):
        ax.text(1.1 + 0.2 * col, -0.6, header, transform=where, ha="center", va="bottom", fontweight="bold")
    for _, r in rows.iterrows():
        x, color = 1.1 + 0.2 * COLUMN[r.series], COLORS[r.series]
        count = f"{r.hits} / {r.n}" + (" (all)" if r.series == "base" else "")
        ax.text(x, models.index(r.model), count, transform=where, ha="center", va="center", color=color)


def _paper(rows: pd.DataFrame, models: list[str], style: Style) -> Figure:
    """Dots in the paper palette, a marker per group; the counts are table09's (the caption says so)."""
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, 0.9 + (0.27 if style.narrow else 0.22) * len(models))
        ax = fig.add_subplot()
        for _, r in rows.iterrows():
            color, marker = PAPER[r.series]
            error = [[r.share - r.lo], [r.hi - r.share]]
            ax.errorbar(r.share, _y(rows, models, r), xerr=error, fmt=marker, color=color, **PAPER_DOT)
        ax.set_yticks(
            range(len(models)),
            [textwrap.fill(m, 34 if style.narrow else 60) for m in models],
            fontsize=7 if style.narrow else None,
        )
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        ax.set_xlabel("top choices on the target")
        ax.grid(axis="x", color="#dddddd", linewidth=0.5)
        present = [g for g in PAPER if g in set(rows["series"])]
        handles = [Line2D([], [], color=PAPER[g][0], marker=PAPER[g][1], label=LABELS[g]) for g in present]
        fig.legend(handles=handles, loc="outside lower center", ncol=2, frameon=False)
        styles.note(fig, "The hits / n of every dot are in the synthesis table (table09).")
    return fig
