"""The forest plot of ``cctk compare``: each rule against its control, run by run and pooled.

One panel per contrast (a family per row: its rule from correct sums, then from fabricated answers);
in each, every run's conditional odds ratio with its exact 95% interval and, as a diamond, the
Mantel-Haenszel odds ratio pooled over the runs with its 95% interval; the verdict in the title. The x
axis is logarithmic and shared; an odds ratio of 0 or infinity (a side with no hit, or only hits) and a
bound beyond the axis sit at its edge as an outward triangle, labelled.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Polygon

from ....figures.common import BASE, CONTROL, HELD_HIT, HELD_MISS, new_figure, paper_style

VERDICT_COLORS = {"supported": HELD_HIT, "inconsistent": HELD_MISS, "not supported": CONTROL}
WIDEST = (1e-3, 1e4)  # the axis never spans more: beyond it, a value is drawn at the edge


def limits(per_run: pd.DataFrame, findings: pd.DataFrame) -> tuple[float, float]:
    """The shared x range: every finite, positive odds ratio and bound, padded, within WIDEST."""
    values = pd.concat(
        [per_run[c] for c in ("odds_ratio", "or_lo", "or_hi")]
        + [findings[c] for c in ("odds_ratio_mh", "or_lo", "or_hi")]
    ).to_numpy(dtype=float)
    values = values[np.isfinite(values) & (values > 0)]
    if not values.size:
        return 0.1, 10.0
    low = 10 ** math.floor(math.log10(min(values.min(), 1.0)) - 0.3)  # 1 always in range
    high = 10 ** math.ceil(math.log10(max(values.max(), 1.0)) + 0.3)
    return max(low, WIDEST[0]), min(high, WIDEST[1])


def _at(value: float, edges: tuple[float, float]) -> tuple[float, str]:
    """Where a value sits on the axis and its marker: inside ("o"), or at an edge (outward triangle)."""
    if value <= edges[0]:
        return edges[0], "<"
    if value >= edges[1]:
        return edges[1], ">"
    return value, "o"


def _say(ax: Axes, y: float, edges: tuple[float, float], text: str) -> None:
    """A line's words instead of its marks, in the middle of the (log) axis."""
    ax.text(math.sqrt(edges[0] * edges[1]), y, text, ha="center", va="center", fontsize=6, color=BASE)


def _run_row(ax: Axes, y: float, row: Any, edges: tuple[float, float]) -> None:  # row: a per_run row (itertuples)
    """One run: its interval (arrow heads where a bound leaves the axis) and its odds ratio."""
    if math.isnan(row.odds_ratio):  # no hit on either side, or only hits: nothing to estimate
        _say(ax, y, edges, "no odds ratio (no hit on either side)")
        return
    left, right = _at(row.or_lo, edges), _at(row.or_hi, edges)
    ax.plot([left[0], right[0]], [y, y], color=BASE, linewidth=1.1)
    for x, marker in (left, right):
        if marker != "o":
            ax.plot(x, y, marker=marker, color=BASE, markersize=4, clip_on=False)
    x, marker = _at(row.odds_ratio, edges)
    ax.plot(
        x, y, marker="s" if marker == "o" else marker, color=BASE, markersize=5 if marker == "o" else 6.5, clip_on=False
    )
    if marker != "o":
        _edge_label(ax, x, y, "\u221e" if row.odds_ratio >= edges[1] else f"{row.odds_ratio:.2g}", marker, (7, 3))


def _diamond(ax: Axes, y: float, finding: Any, edges: tuple[float, float], color: str) -> None:
    """The pooled Mantel-Haenszel odds ratio: a diamond over its interval (an edge triangle when infinite)."""
    odds = finding.odds_ratio_mh
    if math.isnan(odds):
        _say(ax, y, edges, "no pooled test (no hit, or only hits)")
        return
    x, marker = _at(odds, edges)
    if marker != "o" or math.isnan(finding.or_lo):  # 0 or inf: statsmodels gives no interval
        ax.plot(x, y, marker="D" if marker == "o" else marker, color=color, markersize=8, clip_on=False)
        _edge_label(ax, x, y, f"pooled {'∞' if odds >= edges[1] else f'{odds:.2g}'} (no interval)", marker, (9, 0))
        return
    lo, hi = _at(finding.or_lo, edges)[0], _at(finding.or_hi, edges)[0]
    diamond = [(lo, y), (x, y - 0.32), (hi, y), (x, y + 0.32)]
    ax.add_patch(
        Polygon(diamond, closed=True, facecolor=color, edgecolor=BASE, linewidth=0.6, zorder=3)
    )  # above the grid


def _edge_label(ax: Axes, x: float, y: float, text: str, marker: str, offset: tuple[int, int]) -> None:
    """Words beside a mark at an edge of the axis (``marker`` "<" or ">"), inside it, clear of the spine; ``offset``:
    points away from the mark, and up (0: centred on it)."""
    rightward = marker == ">"
    dx, dy = offset
    ha, va = ("right" if rightward else "left"), ("bottom" if dy else "center")
    ax.annotate(
        text, (x, y), xytext=(-dx if rightward else dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=6.5
    )


def _panel(ax: Axes, runs: pd.DataFrame, finding: Any, edges: tuple[float, float], title: str) -> None:
    color = VERDICT_COLORS.get(finding.verdict, CONTROL)
    for y, row in enumerate(runs.itertuples()):
        _run_row(ax, y, row, edges)
    _diamond(ax, len(runs), finding, edges, color)
    ax.axvline(1.0, color="#777777", linestyle="--", linewidth=0.7)
    ax.set_xscale("log")
    ax.set_xlim(*edges)
    ax.set_ylim(len(runs) + 0.7, -0.7)
    ax.set_yticks(range(len(runs) + 1), [f"seed {s}" for s in runs["seed"]] + ["pooled (MH)"])
    ax.grid(axis="x", color="#e4e4e4", linewidth=0.5)
    ax.set_title(title, fontsize=7.5, color=color if color != CONTROL else BASE, loc="left")


def _title(finding: Any, by: list[str], many_groups: bool) -> str:  # finding: a findings row (itertuples)
    group = f" [{', '.join(f'{c} {getattr(finding, c)}' for c in by)}]" if many_groups else ""
    head = textwrap.fill(f"{finding.contrast}{group}", 60)
    agree = (
        f"holds in {finding.runs_agreeing} of {finding.runs} runs"
        if finding.direction == "above"
        else f"{finding.runs_agreeing} of {finding.runs} runs {finding.direction}, as pooled"
    )
    return f"{head}\n{finding.verdict}: {agree}"


TITLE = "Rules against their controls on held-out additions: each run (exact 95% interval) and pooled (Mantel-Haenszel)"
# Inches: the page's width, its margins, a title line, a run's line, the tick labels under each panel.
WIDTH, LEFT, GAP, RIGHT, TOP, BOTTOM = 8.2, 0.85, 0.95, 0.15, 0.45, 0.55
LINE, ROW, TICKS = 0.15, 0.2, 0.4


def forest_chart(
    per_run: pd.DataFrame, findings: pd.DataFrame, by: Sequence[str] = ("base_model",), columns: int = 2
) -> Figure:
    """``per_run`` and ``findings``: the tables of ``cctk.compare.findings`` (one panel per findings row,
    in its order, ``columns`` to a row). ``by``: the group columns of both."""
    by = list(by)
    edges = limits(per_run, findings)
    many = len(findings[by].drop_duplicates()) > 1
    panels = []  # (finding, its runs, title)
    for finding in findings.itertuples():
        mine = (per_run["contrast"] == finding.contrast) & np.logical_and.reduce(
            [per_run[c] == getattr(finding, c) for c in by]
        )
        panels.append((finding, per_run[mine], _title(finding, by, many)))
    rows = [panels[i : i + columns] for i in range(0, len(panels), columns)]
    # each row as tall as its tallest panel: title lines, one line per run and the diamond, tick labels
    heights = [
        max(LINE * (t.count("\n") + 1) + 0.12 + ROW * (len(r) + 1) + 0.1 for _, r, t in row) + TICKS for row in rows
    ]
    height = TOP + sum(heights) + BOTTOM
    width = (WIDTH - LEFT - RIGHT - GAP * (columns - 1)) / columns
    with paper_style():
        fig = new_figure(WIDTH, height)
        top = height - TOP
        for row, row_height in zip(rows, heights, strict=True):
            for j, (finding, runs, title) in enumerate(row):
                plot = ROW * (len(runs) + 1) + 0.1
                titled = LINE * (title.count("\n") + 1) + 0.12
                ax = fig.add_axes(
                    ((LEFT + j * (width + GAP)) / WIDTH, (top - titled - plot) / height, width / WIDTH, plot / height)
                )
                _panel(ax, runs, finding, edges, title)
            top -= row_height
        for ax in fig.axes[-columns:]:
            ax.set_xlabel("odds ratio, rule against control (log scale)")
        fig.legend(handles=_legend(), loc="lower center", ncol=5, frameon=False, fontsize=6.5)
        fig.suptitle(TITLE, y=1 - 0.12 / height, va="top", fontsize=9.5, fontweight="bold")
    return fig


def _legend() -> list[Line2D]:
    one = "one run: conditional odds ratio, exact 95% interval"
    runs = Line2D([], [], color=BASE, marker="s", markersize=4, linewidth=1.1, label=one)
    pooled = [
        Line2D([], [], color=color, marker="D", linestyle="none", markersize=6, label=f"pooled: {verdict}")
        for verdict, color in VERDICT_COLORS.items()
    ]
    edge = Line2D([], [], color=BASE, marker=">", linestyle="none", markersize=5, label="beyond the axis (0 or \u221e)")
    return [runs, *pooled, edge]
