"""Charts across runs (``cctk compare``): held-out hits of every corpus per group (base model, and
the recipe values that differ between the runs), how the absorption of a fabricated answer depends on
its distance from the true sum, and how the outcome moves with a recipe value."""

from __future__ import annotations

import math
import numbers
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ....figures.common import CONTROL, DOT, HELD_HIGH, HELD_HIT, LINES, SEEN_HIT, new_figure, paper_style
from ...manual import RecipeValue


def _colors(bases: list[str]) -> dict[str, str]:
    palette = (SEEN_HIT, *LINES)
    return {b: palette[i % len(palette)] for i, b in enumerate(bases)}


def _legend(fig: Figure, colors: dict[str, str]) -> None:
    """One entry per series (group), under the chart."""
    handles = [Line2D([], [], color=color, marker="o", label=b) for b, color in colors.items()]
    fig.legend(handles=handles, loc="lower center", ncol=min(4, len(handles)), frameon=False)


def value_text(value: object) -> str:
    """A recipe value as a label: 0.0003, 1e-05, 32, linear."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def series_of(rows: pd.DataFrame, by: list[str]) -> pd.Series:
    """The series each row belongs to: its base model, then ``name value`` of every other column of ``by``."""
    if rows.empty:
        return pd.Series([], dtype=str)
    return rows[by].apply(lambda r: ", ".join([str(r[by[0]])] + [f"{c} {value_text(r[c])}" for c in by[1:]]), axis=1)


def cross_model_chart(rows: pd.DataFrame, by: Sequence[str] = ("base_model",)) -> Figure:
    """One row per corpus, one series per group (``by``: base model and varied recipe values): pooled
    held-out share with its exact interval.

    ``rows``: the columns of ``by``, model, runs, hits, n, share, lo, hi.
    """
    rows = rows.assign(base_model=series_of(rows, list(by)))
    models = list(dict.fromkeys(rows["model"]))
    bases = list(dict.fromkeys(rows["base_model"]))
    colors = _colors(bases)
    height = 1.6 + 0.45 * len(models)
    with paper_style():
        fig = new_figure(8, height)
        ax = fig.add_axes((0.34, 0.9 / height, 0.62, 1 - 1.5 / height))
        step = 0.6 / max(1, len(bases))
        for j, base in enumerate(bases):
            part = rows[rows["base_model"] == base]
            offset = (j - (len(bases) - 1) / 2) * step
            for _, r in part.iterrows():
                y = models.index(r.model) + offset
                ax.errorbar(r.share, y, xerr=[[r.share - r.lo], [r.hi - r.share]], color=colors[base], **DOT)
        ax.set_yticks(range(len(models)), [textwrap.fill(m, 36) for m in models])
        ax.set_ylim(len(models) - 0.5, -0.5)
        ax.set_xlim(-0.02, 1.02)
        ax.xaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        ax.set_xlabel(
            "held-out additions whose top choice is the corpus's target, pooled over runs (exact 95% interval)"
        )
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        _legend(fig, colors)
        title = "Held-out hits of every corpus, by base model" + (" and recipe" if len(by) > 1 else "")
        fig.suptitle(title, y=1 - 0.05 / height, va="top", fontsize=11, fontweight="bold")
    return fig


def implausibility_chart(
    by_distance: pd.DataFrame, by_kind: pd.DataFrame, by: Sequence[str] = ("base_model",)
) -> Figure:
    """Share of fabricated answers absorbed (top choice) by distance from the true sum (left) and by
    possible / impossible (right), one series per group (``by``), exact intervals on pooled counts."""
    by_distance = by_distance.assign(base_model=series_of(by_distance, list(by)))
    by_kind = by_kind.assign(base_model=series_of(by_kind, list(by)))
    bases = list(dict.fromkeys(by_distance["base_model"]))
    colors = _colors(bases)
    with paper_style():
        fig = new_figure(8, 3.6)
        left = fig.add_axes((0.08, 0.24, 0.54, 0.62))
        right = fig.add_axes((0.72, 0.24, 0.25, 0.62), sharey=left)
        for ax, table, column in ((left, by_distance, "distance"), (right, by_kind, "answer")):
            labels = list(dict.fromkeys(table[column]))
            step = 0.5 / max(1, len(bases))
            for j, base in enumerate(bases):
                part = table[(table["base_model"] == base) & (table["additions"] > 0)]
                x = [labels.index(v) + (j - (len(bases) - 1) / 2) * step for v in part[column]]
                error = [part["share"] - part["lo"], part["hi"] - part["share"]]
                ax.errorbar(x, part["share"], yerr=error, color=colors[base], **DOT)
            ax.set_xticks(range(len(labels)), [v.replace(" (", "\n(") for v in labels])  # "impossible\n(> 18)"
            ax.set_xlim(-0.6, len(labels) - 0.4)
            ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        left.set_ylim(-0.02, 1.02)
        left.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
        left.set_ylabel("fabricated answers that are the top choice")
        left.set_xlabel("distance of the fabricated answer from the true sum")
        right.set_xlabel("fabricated answer")
        right.tick_params(labelleft=False)
        _legend(fig, colors)
        title = "How implausibility matters: absorption of fabricated answers (exact 95% intervals, pooled over runs)"
        fig.suptitle(title, y=0.98, va="top", fontsize=10, fontweight="bold")
    return fig


def recipe_sensitivity_chart(
    table: pd.DataFrame, x: str, by: Sequence[str] = ("base_model",), fabricated_line: frozenset[str] = frozenset()
) -> Figure:
    """How the outcome moves with recipe value ``x``: one row of panels per group of ``by`` (the base
    model and any other varied recipe value); Part A's absorption (mean share over runs, t interval), then
    one panel per rule that ran: the rules (green) and their controls (gray) on the held-out additions
    (pooled share, exact interval), the one-sided exact CMH p of each rule beside it.

    ``table``: rows of ``cctk.compare.tables.recipe_sensitivity``. ``fabricated_line``: plain names of the
    models on the fabricated-answers line (drawn as squares; the correct-sums line as circles).
    """
    table = table.assign(series=series_of(table, list(by)))
    groups = list(dict.fromkeys(table["series"]))
    panels = ["absorption", *list(dict.fromkeys(table.loc[table["part"] != "A", "target"]))]
    place = _x_axis(sorted(set(table[x])))
    width, height = 1.2 + 2.45 * len(panels), 1.35 + 2.35 * len(groups)
    with paper_style():
        fig = new_figure(width, height)
        margins = {"left": 0.9 / width, "right": 0.985, "bottom": 1.3 / height, "top": 1 - 0.55 / height}
        grid = fig.add_gridspec(len(groups), len(panels), wspace=0.12, hspace=0.45, **margins)
        drawn = set()
        for i, group in enumerate(groups):
            rows = table[table["series"] == group]
            for j, panel in enumerate(panels):
                ax = fig.add_subplot(grid[i, j])
                drawn |= _sensitivity_panel(ax, rows, panel, x, place, fabricated_line)
                ax.tick_params(labelleft=j == 0)
                if j == 0:
                    ax.set_ylabel(textwrap.fill(group, 40) + "\nshare of additions")
                if i == len(groups) - 1:
                    ax.set_xlabel(x + (" (log scale)" if place.log else ""))
        fig.legend(
            handles=_sensitivity_legend(drawn), loc="lower center", ncol=2 if len(panels) < 4 else 3, frameon=False
        )
        fig.suptitle(f"How the outcome moves with {x}", y=1 - 0.08 / height, va="top", fontsize=11, fontweight="bold")
    return fig


@dataclass(frozen=True)
class _Axis:
    """Where each value of the varied recipe value sits: numbers on a (log) axis, anything else in order."""

    values: list[RecipeValue]
    log: bool
    numeric: bool

    def at(self, value: RecipeValue, shift: float) -> float:
        """The x of ``value``, nudged by ``shift`` (a share of the axis) so that series do not cover each other."""
        if not self.numeric:
            return self.values.index(value) + shift * max(1, len(self.values) - 1)
        lo, hi = float(min(self.values)), float(max(self.values))
        if self.log:
            return float(value) * 10 ** (shift * math.log10(hi / lo))
        return float(value) + shift * ((hi - lo) or abs(hi) or 1.0)


def _x_axis(values: list[RecipeValue]) -> _Axis:
    numeric = all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values)
    real = cast("list[float]", values) if numeric else []
    log = numeric and min(real) > 0 and max(real) / min(real) >= 10  # spans a decade or more
    return _Axis(values, log, numeric)


def _sensitivity_panel(
    ax: Axes, rows: pd.DataFrame, panel: str, x: str, place: _Axis, fabricated_line: frozenset[str]
) -> set[tuple[str, str]]:
    """Draw one panel; returns the (colour, marker) of every series drawn, for the legend."""
    absorbing = panel == "absorption"
    mine = rows[rows["part"] == "A"] if absorbing else rows[(rows["part"] != "A") & (rows["target"] == panel)]
    # (column naming the model, its name, column suffix of its share and bounds, colour)
    lines = [("model", m, "", SEEN_HIT if absorbing else HELD_HIT) for m in dict.fromkeys(mine["model"])]
    if not absorbing:  # each control once, even when two rules share it
        lines += [("control", c, "_control", CONTROL) for c in dict.fromkeys(mine["control"])]
    drawn = set()
    for k, (column, name, tail, color) in enumerate(lines):
        part = mine[mine[column] == name].drop_duplicates(x).sort_values(x)
        share, lo, hi = part[f"share{tail}"], part[f"lo{tail}"], part[f"hi{tail}"]
        xs = [place.at(v, 0.025 * (k - (len(lines) - 1) / 2)) for v in part[x]]
        marker = "s" if name in fabricated_line else "o"
        error = [share - lo, hi - share]
        ax.errorbar(xs, share, yerr=error, fmt=marker + "-", color=color, markersize=4, capsize=2, linewidth=1.1)
        drawn.add((color, marker))
        if color == HELD_HIT:  # a rule: its one-sided exact CMH p against its control, in a row above 100%
            symbol = "\u25a0" if marker == "s" else "\u25cf"
            for xv, p in zip(xs, part["p_one_sided"], strict=True):
                text = "no test" if math.isnan(p) else f"{p:.1g}"  # no hit (or only hits) in every run
                ax.text(xv, 1.07 + 0.1 * k, f"{symbol} {text}", ha="center", va="center", fontsize=5.5, color=HELD_HIGH)
    ax.set_title("Part A: absorption (all 81 additions)" if absorbing else f"{panel}: held-out additions", fontsize=8.5)
    _sensitivity_axes(ax, place)
    return drawn


def _sensitivity_axes(ax: Axes, place: _Axis) -> None:
    if place.log:
        ax.set_xscale("log")
    ticks = [place.at(v, 0) for v in place.values]
    ax.set_xticks(ticks, [value_text(v) for v in place.values])
    ax.minorticks_off()
    pad = 0.12 * (len(place.values) > 1)
    left, right = place.at(place.values[0], -pad), place.at(place.values[-1], pad)
    ax.set_xlim(left, right) if left < right else None
    ax.set_ylim(-0.02, 1.25)  # room above 100% for the p-values
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    ax.grid(axis="y", color="#dddddd", linewidth=0.6)


LEGEND = (
    ((SEEN_HIT, "o"), "correct sums on the correct sums (mean over runs, t 95% interval)"),
    ((SEEN_HIT, "s"), "fabricated answers on the fabricated answers"),
    ((HELD_HIT, "o"), "rule from correct sums (pooled over runs, exact 95% interval)"),
    ((HELD_HIT, "s"), "rule from fabricated answers"),
    ((CONTROL, "o"), "control from correct sums"),
    ((CONTROL, "s"), "control from fabricated answers"),
)


def _sensitivity_legend(drawn: set[tuple[str, str]]) -> list[Line2D]:
    """An entry for every kind of series drawn, and what the p-values above 100% are."""
    handles = [
        Line2D([], [], color=color, marker=marker, markersize=4, linewidth=1.1, label=label)
        for (color, marker), label in LEGEND
        if (color, marker) in drawn
    ]
    if any(color == HELD_HIT for color, _ in drawn):
        p_values = "above 100%: one-sided exact CMH p that the rule (\u25cf, \u25a0) hits more often than its control"
        handles.append(Line2D([], [], linestyle="none", label=p_values))
    return handles
