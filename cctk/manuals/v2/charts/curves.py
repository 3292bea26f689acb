"""Learning curves of the fine-tuning arms (``cctk run --curves``): hits on the own target per epoch."""

from __future__ import annotations

import math
import textwrap
from typing import TYPE_CHECKING, cast

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from matplotlib.typing import LegendLocType, LineStyleType

from ....figures import style as styles
from ....figures.common import HELD_HIT, SEEN_HIT, new_figure, paper_style
from ....figures.style import REPORT, Style

GroupStyle = tuple[str, "LineStyleType", str]  # a group's colour, line style and legend text
STYLE: dict[str, GroupStyle] = {
    "all": (SEEN_HIT, "-", "all 81 additions"),
    "seen": (SEEN_HIT, "-", "seen additions"),
    "heldout": (HELD_HIT, "--", "held-out additions"),
}
PAPER_STYLE: dict[str, GroupStyle] = {
    "all": (styles.HIT, "-", "all 81 additions"),
    "seen": (styles.HIT, "-", "seen additions"),
    "heldout": (styles.MISS, "--", "held-out additions"),
}
COLUMNS = 4


def learning_curves(curves: pd.DataFrame, order: list[str], style: Style = REPORT) -> Figure:
    """One panel per arm (in ``order``): share of hits on its own target after each epoch, per group.

    ``curves``: columns model, epoch, group (all, seen, heldout), hits, n.
    """
    models = [m for m in order if m in set(curves["model"])]
    if style.paper:
        return _paper(curves, models, style)
    height = 1.2 + 1.75 * max(1, math.ceil(len(models) / COLUMNS))
    with paper_style():
        fig = new_figure(8, height)
        _grid(fig, curves, models, COLUMNS, STYLE, 7.5, "lower center")
        fig.suptitle("Learning curves: hits on each arm's own target after every epoch", fontsize=11, fontweight="bold")
        fig.subplots_adjust(
            left=0.09, right=0.98, top=1 - 0.65 / height, bottom=0.75 / height, hspace=0.55, wspace=0.15
        )
    return fig


def _paper(curves: pd.DataFrame, models: list[str], style: Style) -> Figure:
    columns = 2 if style.narrow else COLUMNS
    rows = max(1, math.ceil(len(models) / columns))
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, 0.5 + 1.15 * rows)
        _grid(fig, curves, models, columns, PAPER_STYLE, 6.5, "outside lower center")
    return fig


def _grid(
    fig: Figure,
    curves: pd.DataFrame,
    models: list[str],
    columns: int,
    by_group: dict[str, GroupStyle],
    title_size: float,
    legend_at: LegendLocType,
) -> None:
    """A panel per arm on a grid of ``columns`` (empty cells hidden), shared axes, one legend of the groups."""
    rows = max(1, math.ceil(len(models) / columns))
    axes = fig.subplots(rows, columns, sharex=True, sharey=True, squeeze=False)
    for ax, model in zip(axes.flat, models, strict=False):  # the grid may have cells left empty
        _panel(ax, curves[curves["model"] == model], model, by_group, title_size)
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("share of hits")
    for ax in axes[-1, :]:
        ax.set_xlabel("epoch")
    groups = [g for g in by_group if g in set(curves["group"])]
    handles = [
        Line2D([], [], color=by_group[g][0], linestyle=by_group[g][1], marker="o", markersize=3, label=by_group[g][2])
        for g in groups
    ]
    fig.legend(handles=handles, loc=legend_at, ncol=len(handles), frameon=False)


def _panel(ax: Axes, rows: pd.DataFrame, model: str, by_group: dict[str, GroupStyle], title_size: float) -> None:
    for group, part in rows.groupby("group"):
        color, style, _ = by_group[str(group)]
        part = part.sort_values("epoch")
        share = part["hits"] / part["n"]
        ax.plot(part["epoch"], share, color=color, linestyle=style, marker="o", markersize=3, linewidth=1.3)
    ax.set_title(textwrap.fill(model, 30), fontsize=title_size)
    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:.0%}")
    cast(MaxNLocator, ax.xaxis.get_major_locator()).set_params(integer=True)  # AutoLocator: a MaxNLocator
    ax.grid(color="#e3e3e3", linewidth=0.6)
