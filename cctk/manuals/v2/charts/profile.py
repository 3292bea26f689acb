"""The probability profile (manual 2.0.0, section 7.4): mean probability per candidate answer."""

from __future__ import annotations

import math
from collections.abc import Collection

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory
from matplotlib.typing import ColorType

from ....core.facts import CANDIDATES
from ....core.labels import BASE_MODEL
from ....figures import style as styles
from ....figures.common import BASE, HELD_HIT, LIGHT_BLUE, LIGHT_RED, LINES, SEEN_HIT, new_figure, paper_style, shade
from ....figures.style import REPORT, Style

INTERVALS = 6  # both y axes: one set of gridlines serves both
BAR_SEEN, BAR_HELD = shade(SEEN_HIT, 0.6), shade(HELD_HIT, 0.6)  # pale, so lines read on top
PAPER_BARS = ("#d4d4d4", "#a3a3a3")  # grays: no series colour is taken by the bars
LINE_PT = 10.5  # height of one line of band text, points
LEGEND_ROW = 0.2  # height of one row of the report style's legend, inches
EDGE = 0.015  # margin of the band texts from the figure's sides, a fraction of its width


def probability_profile(
    series: dict[str, pd.DataFrame],
    targets: pd.Series,
    title: str,
    band: tuple[int, int] | None = None,
    heldout: Collection[tuple[int, int]] | None = None,
    style: Style = REPORT,
) -> Figure:
    """Lines: each model's mean probability per candidate (left axis); bars: targets (right).

    ``band`` = (lo, hi), the candidates that can be an answer, shaded blue, the rest red, with
    each model's share of probability inside each; None draws no bands.
    """
    means = pd.DataFrame({name: t.groupby("candidate_value")["prob"].mean() for name, t in series.items()}).reindex(
        CANDIDATES, fill_value=0.0
    )
    if style.paper:
        return _paper(means, targets, band, heldout, style)
    above = 0.5 + (LINE_PT / 72 * (len(series) + 1) if band is not None else 0.0)  # inches
    n_handles = len(series) + (2 if heldout else 1) + (2 if band is not None else 0)
    below = 0.6 + LEGEND_ROW * math.ceil(n_handles / 3)  # the axis' labels, then the legend's rows
    height = below + 2.8 + above
    with paper_style():
        fig = new_figure(8, height)
        ax = fig.add_axes((0.08, below / height, 0.84, 2.8 / height))
        bars = ax.twinx()
        ax.set_zorder(bars.get_zorder() + 1)  # lines above bars and bands
        ax.patch.set_visible(False)
        if band is not None:
            _bands(bars, ax, means, band)
        counted = _count_bars(bars, targets, heldout)
        shaded: list[Artist] = [*band_patches(band)] if band is not None else []
        handles = _lines(ax, means) + counted + shaded
        _axes(ax, bars, means, targets)
        fig.suptitle(title, y=1 - 0.1 / height, va="top", fontsize=11, fontweight="bold")
        fig.legend(
            handles=handles, loc="lower center", ncol=min(len(handles), 3), bbox_to_anchor=(0.5, 0.0), frameon=False
        )
    return fig


def band_patches(band: tuple[int, int], style: Style = REPORT) -> list[Patch]:
    """The legend's entries of the two shadings (manual 2.0.0, section 7.4: the answers that can be an answer
    of the corpus, and those that cannot)."""
    lo, hi = band
    return [
        Patch(color=LIGHT_BLUE, label=styles.label(f"band {lo} to {hi}: answers the corpus can ask for", style)),
        Patch(color=LIGHT_RED, label=styles.label("outside it: answers the corpus never asks for", style)),
    ]


def _color(i: int, name: str) -> str:
    return BASE if name == BASE_MODEL else LINES[i % len(LINES)]


def left_top(peak: float) -> float:
    """Top of the left axis in percent: 12, growing in steps of 6 while the data exceed it."""
    return 12.0 + 6.0 * max(0, math.ceil((100 * peak - 12.0) / 6.0 - 1e-9))


def _lines(ax: Axes, means: pd.DataFrame) -> list[Artist]:
    handles: list[Artist] = []
    for i, name in enumerate(means.columns):
        color = _color(i, name)
        ax.plot(means.index, 100 * means[name], marker="o", markersize=3, linewidth=1.4, color=color)
        handles.append(Line2D([], [], color=color, marker="o", markersize=3, label=name))
    return handles


def _count_bars(
    ax: Axes,
    targets: pd.Series,
    heldout: Collection[tuple[int, int]] | None,
    colors: tuple[ColorType, ColorType] = (BAR_SEEN, BAR_HELD),
) -> list[Artist]:
    held = {(int(a), int(b)) for a, b in (heldout or ())}
    is_held = pd.Series([(int(a), int(b)) in held for a, b in targets.index], index=targets.index)
    seen = targets[~is_held].astype(int).value_counts().reindex(CANDIDATES, fill_value=0)
    never = targets[is_held].astype(int).value_counts().reindex(CANDIDATES, fill_value=0)
    ax.bar(seen.index, seen.to_numpy(), width=0.6, color=colors[0], zorder=2)
    if not held:
        return [Patch(color=colors[0], label="additions with this target (right axis)")]
    ax.bar(never.index, never.to_numpy(), bottom=seen.to_numpy(), width=0.6, color=colors[1], zorder=2)
    return [
        Patch(color=colors[0], label="seen additions with this target (right axis)"),
        Patch(color=colors[1], label="held-out additions with this target (right axis)"),
    ]


def _axes(ax: Axes, bars: Axes, means: pd.DataFrame, targets: pd.Series) -> None:
    top = left_top(float(means.to_numpy().max()))
    ax.set_ylim(0, top)
    ax.set_yticks([top * i / INTERVALS for i in range(INTERVALS + 1)])
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0f}%")
    peak = int(targets.astype(int).value_counts().max())
    count_top = INTERVALS * max(1, math.ceil(peak / INTERVALS))
    bars.set_ylim(0, count_top)
    bars.set_yticks(range(0, count_top + 1, count_top // INTERVALS))
    bars.grid(axis="y", color="#d0d0d0", linewidth=0.6)  # on the bars' axis: drawn under the lines
    bars.set_axisbelow(True)
    ax.set_xlim(CANDIDATES[0] - 0.7, CANDIDATES[-1] + 0.7)
    ax.set_xticks(CANDIDATES)
    ax.set_xlabel("candidate answer")
    ax.set_ylabel("mean probability over the 81 additions")
    bars.set_ylabel("additions whose target is this answer")
    bars.spines["top"].set_visible(False)


def _bands(bars_ax: Axes, ax: Axes, means: pd.DataFrame, band: tuple[int, int]) -> None:
    lo, hi = band
    first, last = CANDIDATES[0], CANDIDATES[-1]
    regions = [(lo, hi, LIGHT_BLUE)]
    outside = [(first, lo - 1), (hi + 1, last)]
    regions += [(a, b, LIGHT_RED) for a, b in outside if a <= b]
    for a, b, color in regions:
        bars_ax.axvspan(a - 0.5, b + 0.5, color=color, linewidth=0, zorder=0)
    inside = (f"share of the probability on {lo} to {hi}", means.loc[lo:hi].sum())
    widest = max(((a, b) for a, b in outside if a <= b), key=lambda r: r[1] - r[0], default=None)
    if widest is None:  # the band covers every candidate
        _band_text(ax, (lo + hi) / 2, *inside, align="center")
        return
    # Both outer regions together, on the side of the wider one; each block flush with its own edge
    # of the figure, so long model names never run into each other.
    beyond = (f"share of the probability outside {lo} to {hi}", 1.0 - inside[1])
    left, right = (beyond, inside) if widest[0] < lo else (inside, beyond)
    _band_text(ax, EDGE, *left, align="left", x_in_figure=True)
    _band_text(ax, 1 - EDGE, *right, align="right", x_in_figure=True)


def _band_text(ax: Axes, x: float, label: str, shares: pd.Series, align: str, x_in_figure: bool = False) -> None:
    """Bold share per model above the axes at ``x`` (aligned ``align``), one line per model.

    ``x`` is a candidate value, or a fraction of the figure's width when ``x_in_figure``.
    """
    where = blended_transform_factory(ax.figure.transFigure if x_in_figure else ax.transData, ax.transAxes)
    rows = [(label, "black")] + [
        (f"{share:.0%} {name}", _color(i, str(name))) for i, (name, share) in enumerate(shares.items())
    ]
    for k, (text, color) in enumerate(reversed(rows)):
        ax.annotate(
            text,
            (x, 1.0),
            xycoords=where,
            xytext=(0, 3 + LINE_PT * k),
            textcoords="offset points",
            ha=align,
            va="bottom",
            fontsize=7.5,
            fontweight="bold",
            color=color,
        )


def _paper(
    means: pd.DataFrame,
    targets: pd.Series,
    band: tuple[int, int] | None,
    heldout: Collection[tuple[int, int]] | None,
    style: Style,
) -> Figure:
    """Lines in the paper palette, each with its marker and line style; the bands' shares go to the caption."""
    with paper_style(), styles.fonts(style):
        legend_bands = (0.55 if style.narrow else 0.2) if band is not None else 0.0  # two more entries, wrapped
        fig = styles.figure(style, (3.2 if style.narrow else 3.4) + legend_bands)
        ax = fig.add_subplot()
        bars = ax.twinx()
        ax.set_zorder(bars.get_zorder() + 1)
        ax.patch.set_visible(False)
        if band is not None:
            _paper_bands(fig, bars, means, band)
        handles = _count_bars(bars, targets, heldout, PAPER_BARS)
        for i, name in enumerate(means.columns):
            ax.plot(means.index, 100 * means[name], linewidth=1.0, markersize=2.5, label=name, **styles.series(i))
        handles = [
            Line2D([], [], linewidth=1.0, markersize=3, label=styles.label(name, style), **styles.series(i))
            for i, name in enumerate(means.columns)
        ] + handles
        if band is not None:
            handles += band_patches(band, style)
        _axes(ax, bars, means, targets)
        ax.set_xticks(CANDIDATES[:: 4 if style.narrow else 2])
        ax.set_ylabel("mean probability" if style.narrow else "mean probability over the 81 additions")
        bars.set_ylabel("additions with this target" if style.narrow else "additions whose target is this answer")
        fig.legend(handles=handles, loc="outside lower center", ncol=1 if style.narrow else 2, frameon=False)
    return fig


def _paper_bands(fig: Figure, bars_ax: Axes, means: pd.DataFrame, band: tuple[int, int]) -> None:
    lo, hi = band
    bars_ax.axvspan(lo - 0.5, hi + 0.5, color=LIGHT_BLUE, linewidth=0, zorder=0)
    for a, b in ((CANDIDATES[0], lo - 1), (hi + 1, CANDIDATES[-1])):
        if a <= b:
            bars_ax.axvspan(a - 0.5, b + 0.5, color=LIGHT_RED, linewidth=0, zorder=0)
    inside = means.loc[lo:hi].sum()
    shares = ", ".join(f"{name} {share:.0%}" for name, share in inside.items())
    styles.note(
        fig, f"Share of the probability on the answers {lo} to {hi} (blue band; the rest, red, lies outside): {shares}."
    )
