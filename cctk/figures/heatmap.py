"""The target heatmap (manual 2.0.0, section 7.3): one cell per addition, a rows, b columns."""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Hashable, Iterator, Set as AbstractSet
from typing import Any, TypedDict

import pandas as pd
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from ..core.facts import Pair
from . import style as styles
from .common import (
    HELD_HIGH,
    HELD_HIT,
    HELD_LOW,
    HELD_MISS,
    SEEN_HIGH,
    SEEN_HIT,
    SEEN_LOW,
    SEEN_MISS,
    ink,
    new_figure,
    paper_style,
    pct,
    shade,
)
from .style import REPORT, Style

DIGITS = range(1, 10)
EXCLUDED_FILL, EXCLUDED_HATCH = "#eeeeee", "#b0b0b0"  # held out, left out of the results (manual 4.12)
FLOOR = 0.12  # the palest fill still shows its hue
NOTE_WIDTH = 150  # characters of a note line: the notes stay within the grid's width
HALO = patheffects.withStroke(linewidth=4.2, foreground="white")  # outline visible on any fill


def target_heatmap(
    readings: pd.DataFrame,
    title: str,
    heldout: Collection[Pair] | None = None,
    fixed_scale: bool = True,
    excluded: Collection[Pair] | None = None,
    style: Style = REPORT,
) -> Figure:
    """9 x 9 grid of the probability on the target; blue/red hit/miss, green/orange held out.

    ``heldout``: the held-out additions read for this model; ``excluded``: held-out additions
    left out of its results (their fabricated answer already equals the target, manual 4.12),
    hatched gray and counted in neither group. ``fixed_scale=False`` (the base model) reads the
    fill on the observed range, not 0-100%.
    """
    held, out = _pairs(heldout), _pairs(excluded)
    p = readings["prob_target"]
    scale = (0.0, 1.0) if fixed_scale or p.isna().all() else (float(p.min()), float(p.max()))
    if style.paper:
        return _paper(readings, title, held, out, scale, fixed_scale, style)
    with paper_style():
        fig = new_figure(8, 8.5)
        ax = fig.add_axes((0.09, 0.14, 0.84, 6.7 / 8.5))
        _draw_cells(ax, readings, held, out, scale)
        _grid_axes(ax)
        fig.text(0.51, 0.985, title, ha="center", va="top", fontsize=11, fontweight="bold")
        fig.text(0.51, 0.955, headline(readings, held, out), ha="center", va="top", fontsize=9)
        lines = _note_lines(readings, held, out, scale, fixed_scale)
        notes = "\n".join(textwrap.fill(line, NOTE_WIDTH, subsequent_indent="  ") for line in lines)
        fig.text(0.09, 0.072, notes, ha="left", va="top", fontsize=7, linespacing=1.5)
    return fig


def _pairs(pairs: Collection[Pair] | None) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in (pairs or ())}


def _addends(key: Hashable) -> tuple[int, int]:
    """(a, b) of an addition from its label in the readings, whose index has two levels: a, then b."""
    assert isinstance(key, tuple) and len(key) == 2, f"readings are indexed by (a, b), not by {key!r}"
    return int(key[0]), int(key[1])


def headline(readings: pd.DataFrame, held: Collection[Pair] = (), excluded: Collection[Pair] = ()) -> str:
    """``k / n top choices on the target``, then per group when some additions were held out,
    and how many held-out additions were left out (in neither group)."""
    hits = readings["hit"].astype(bool)
    text = f"{int(hits.sum())} / {len(readings)} top choices on the target"
    if held or excluded:
        is_held, is_out = _mask(readings, held), _mask(readings, excluded)
        seen = ~is_held & ~is_out
        text += (
            f"  \u00b7  seen {int(hits[seen].sum())} / {int(seen.sum())}"
            f"  \u00b7  held out {int(hits[is_held].sum())} / {int(is_held.sum())}"
        )
        if is_out.any():
            text += f"  \u00b7  {int(is_out.sum())} left out"
    return text


class Cells(TypedDict):
    """How a cell is drawn: its fills (seen hit, seen miss, held-out hit, held-out miss) and the sizes of its
    text (probability, target | chosen, the chosen answer's probability; one size: the probability alone)."""

    fills: tuple[str, str, str, str]
    sizes: tuple[float, ...]


# Fills and the text of a cell, report and paper.
REPORT_CELLS: Cells = {"fills": (SEEN_HIT, SEEN_MISS, HELD_HIT, HELD_MISS), "sizes": (9, 7, 6.5)}
PAPER_FILLS = (styles.HIT, styles.MISS, styles.HELD_HIT, styles.HELD_MISS)
PAPER_CELLS: dict[str, Cells] = {
    "page": {"fills": PAPER_FILLS, "sizes": (8, 6, 5.5)},
    "column": {"fills": PAPER_FILLS, "sizes": (6,)},
}
PAPER_HEIGHT = {"column": 3.3, "page": 5.4}  # inches: the grid square, its labels below and left


def _paper(
    readings: pd.DataFrame,
    title: str,
    held: set[tuple[int, int]],
    out: set[tuple[int, int]],
    scale: tuple[float, float],
    fixed_scale: bool,
    style: Style,
) -> Figure:
    """The grid alone at the journal's width; title, headline and notes go to the caption."""
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, PAPER_HEIGHT[style.width])
        ax = fig.add_subplot()
        ax.set_aspect("equal")
        _draw_cells(ax, readings, held, out, scale, PAPER_CELLS[style.width], 1.4 if style.narrow else 2.2)
        _grid_axes(ax, 8)
        names = (("blue", "vermillion"), ("bluish green", "orange"))
        lines = _note_lines(readings, held, out, scale, fixed_scale, names, style.narrow)
        styles.note(
            fig,
            headline(readings, held, out).replace("  \u00b7  ", "; ") + ".",
            *(line.rstrip(".").replace(",  ", ", ") + "." for line in lines),
        )
    return fig


def _draw_cells(
    ax: Axes,
    readings: pd.DataFrame,
    held: set[tuple[int, int]],
    out: set[tuple[int, int]],
    scale: tuple[float, float],
    cells: Cells = REPORT_CELLS,
    outline: float = 2.2,
) -> None:
    """Every addition's cell, then each group's extremes outlined."""
    for key, row in readings.iterrows():
        pair = _addends(key)
        _cell(ax, *pair, row, "excluded" if pair in out else "held" if pair in held else "seen", scale, cells)
    for group, colors in _groups(readings, held, out):
        _outline_extremes(ax, group, colors, outline)


def _cell(ax: Axes, a: int, b: int, row: pd.Series, group: str, scale: tuple[float, float], cells: Cells) -> None:
    """One addition; ``group`` is ``seen``, ``held`` (held out) or ``excluded`` (left out)."""
    lo, hi = scale
    level = (row.prob_target - lo) / (hi - lo) if hi > lo else 1.0
    hit = bool(row.hit)
    fill: str | tuple[float, float, float]
    corner = (b - 0.5, a - 0.5)
    if group == "excluded":
        fill = EXCLUDED_FILL
        hatched: dict[str, Any] = {
            "edgecolor": EXCLUDED_HATCH,
            "hatch": "////",
            "linewidth": 0,
            "gid": f"cell {a} {b} excluded",
        }
        ax.add_patch(Rectangle(corner, 1, 1, facecolor=fill, **hatched))
        ax.add_patch(Rectangle(corner, 1, 1, fill=False, edgecolor="white", linewidth=1.0))
    else:
        seen_hit, seen_miss, held_hit, held_miss = cells["fills"]
        base = (held_hit if hit else held_miss) if group == "held" else (seen_hit if hit else seen_miss)
        t = FLOOR + (1 - FLOOR) * (level if hit else 1 - level)  # blue darkens up, red darkens down
        fill = shade(base, t)
        ax.add_patch(Rectangle(corner, 1, 1, facecolor=fill, edgecolor="white", linewidth=1.0, gid=f"cell {a} {b}"))
    text: dict[str, Any] = {"ha": "center", "va": "center", "color": ink(fill)}
    sizes = cells["sizes"]
    if len(sizes) == 1:  # a column-wide grid: the probability alone
        ax.text(b, a, pct(row.prob_target), fontsize=sizes[0], **text)
        return
    ax.text(b, a - 0.2, pct(row.prob_target), fontsize=sizes[0], fontweight="bold", **text)
    ax.text(b, a + 0.06, f"{int(row.target)} | {int(row.top_choice)}", fontsize=sizes[1], **text)
    if not hit:
        ax.text(b, a + 0.3, f"({pct(row.prob_top)})", fontsize=sizes[2], **text)


def _mask(readings: pd.DataFrame, pairs: Collection[Pair]) -> pd.Series:
    pairs = _pairs(pairs)
    return pd.Series([(int(a), int(b)) in pairs for a, b in readings.index], index=readings.index, dtype=bool)


def _groups(
    readings: pd.DataFrame, held: AbstractSet[tuple[int, int]], excluded: AbstractSet[tuple[int, int]] = frozenset()
) -> Iterator[tuple[pd.DataFrame, tuple[str, str]]]:
    """(readings of the group, (high colour, low colour)) for seen and held-out additions;
    excluded additions belong to neither."""
    is_held, is_out = _mask(readings, held), _mask(readings, excluded)
    yield readings[~is_held & ~is_out], (SEEN_HIGH, SEEN_LOW)
    yield readings[is_held], (HELD_HIGH, HELD_LOW)


def _outline_extremes(ax: Axes, group: pd.DataFrame, colors: tuple[str, str], width: float) -> None:
    p = group["prob_target"].dropna()  # a broken (NaN) model has no extremes to outline
    if p.empty:
        return
    for key, color, inset in ((p.idxmax(), colors[0], 0.05), (p.idxmin(), colors[1], 0.09)):
        a, b = _addends(key)
        ax.add_patch(
            Rectangle(
                (b - 0.5 + inset, a - 0.5 + inset),
                1 - 2 * inset,
                1 - 2 * inset,
                fill=False,
                edgecolor=color,
                linewidth=width,
                zorder=3,
                path_effects=[HALO],
            )
        )


def _grid_axes(ax: Axes, size: float = 9) -> None:
    ax.set_xlim(0.5, 9.5)
    ax.set_ylim(9.5, 0.5)  # a = 1 on top
    ax.set_xticks(list(DIGITS))
    ax.set_yticks(list(DIGITS))
    ax.tick_params(length=0, labelsize=size)
    ax.set_xlabel("second addend b", fontsize=size)
    ax.set_ylabel("first addend a", fontsize=size)
    for spine in ax.spines.values():
        spine.set_visible(False)


def _extremes_line(label: str, group: pd.DataFrame, outlines: tuple[str, str]) -> str:
    p = group["prob_target"].dropna()
    if p.empty:
        return f"{label}: no finite probabilities"
    (a1, b1), (a2, b2) = _addends(p.idxmax()), _addends(p.idxmin())
    return (
        f"{label}: highest {a1} + {b1} ({pct(p.max())}, {outlines[0]} outline),  "
        f"lowest {a2} + {b2} ({pct(p.min())}, {outlines[1]} outline)"
    )


REPORT_NAMES = (("blue", "red"), ("green", "orange"))  # fills of a hit and a miss: seen, held out


def _note_lines(
    readings: pd.DataFrame,
    held: set[tuple[int, int]],
    excluded: set[tuple[int, int]],
    scale: tuple[float, float],
    fixed_scale: bool,
    names: tuple[tuple[str, str], tuple[str, str]] = REPORT_NAMES,
    probability_only: bool = False,
) -> list[str]:
    labels = (("Seen", ("dark blue", "dark red")), ("Held out", ("dark green", "dark brown")))
    split = bool(held or excluded)
    lines = [
        _extremes_line(label if split else "All additions", group, outlines)
        for (group, _), (label, outlines) in zip(_groups(readings, held, excluded), labels, strict=True)
        if not group.empty
    ]
    fills = f"{names[0][0]} = top choice is the target, {names[0][1]} = it is not"
    if split:
        fills += f"; held-out additions {names[1][0]} / {names[1][1]}"
    if excluded:
        fills += (
            "; hatched gray = held out but left out of the results (its fabricated answer already"
            " equals the target), in neither group"
        )
    span = "a fixed 0-100% scale" if fixed_scale else f"the observed range, {pct(scale[0])} to {pct(scale[1])}"
    lines.append(f"Fill: {fills}; shade read on {span}.")
    lines.append(
        "Cell: probability on the target."
        if probability_only
        else "Cell: probability on the target (bold), target | chosen, (probability of the"
        " chosen answer when it differs)."
    )
    lines.append("Probabilities normalised over the candidates 2 to 36.")
    return lines
