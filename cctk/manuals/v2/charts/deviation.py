"""The deviation chart of Part D (manual 2.0.0, section 7.5): top choice minus target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import blended_transform_factory

from ....figures import style as styles
from ....figures.common import CONTROL, HELD_HIT, LIGHT_BLUE, LIGHT_RED, new_figure, paper_style
from ....figures.style import REPORT, Style

Series = list[tuple[np.ndarray, str]]  # (deviations, colour) of the rule-trained model, then its control
WIDTH = 0.4  # of one series' bar; the two sit side by side on each deviation


def deviation_chart(
    rule_dev: Sequence[int],
    control_dev: Sequence[int],
    k90: int,
    k_legend: dict[str, int],
    title: str,
    style: Style = REPORT,
) -> Figure:
    """Held-out deviations of the rule-trained model (green) and its control (gray).

    Blue band = [-k90, k90], fitted to the rule-trained model; red bands outside. ``k_legend``:
    label -> that series' own half-width k, the rule-trained model first, then the control.
    """
    (rule_name, rule_k), (ctl_name, ctl_k) = list(k_legend.items())[:2]
    rule_color = styles.HIT if style.paper else HELD_HIT
    series = [(np.asarray(rule_dev, dtype=int), rule_color), (np.asarray(control_dev, dtype=int), CONTROL)]
    reach = max([k90 + 4] + [int(np.abs(d).max()) + 1 for d, _ in series if d.size])
    handles = [
        Patch(color=rule_color, label=f"{styles.label(rule_name, style)} (k = {rule_k})"),
        Patch(color=CONTROL, label=f"{styles.label(ctl_name, style)} (k = {ctl_k})"),
        Patch(color=LIGHT_BLUE, label=f"band \u00b1{k90} (90% of the rule-trained model)"),
        Patch(color=LIGHT_RED, label="outside the band"),
    ]
    if style.paper:
        return _paper(series, k90, reach, handles, [rule_name, ctl_name], style)
    with paper_style():
        fig = new_figure(8, 4.2)
        ax = fig.add_axes((0.08, 0.2, 0.88, 0.6))
        _chart(ax, series, k90, reach)
        _headlines(ax, series, k90, reach)
        ax.set_xlabel("deviation: top choice minus the rule's target (rule-trained model and control alike)")
        fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False)
        fig.suptitle(title, y=0.985, va="top", fontsize=11, fontweight="bold")
    return fig


def _paper(series: Series, k90: int, reach: int, handles: list[Patch], names: list[str], style: Style) -> Figure:
    """The bars and bands; the counts in each band go to the caption."""
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, 3.0)
        ax = fig.add_subplot()
        _chart(ax, series, k90, reach)
        ax.set_xlabel("deviation: top choice minus the rule's target")
        fig.legend(handles=handles, loc="outside lower center", ncol=1 if style.narrow else 2, frameon=False)
        styles.note(fig, *_band_counts(series, names, k90))
    return fig


def _chart(ax: Axes, series: Series, k90: int, reach: int) -> None:
    _bands(ax, k90, reach)
    for offset, (dev, color) in zip((-WIDTH / 2, WIDTH / 2), series, strict=True):
        counts = pd.Series(dev).value_counts()
        ax.bar(counts.index + offset, counts.to_numpy(), width=WIDTH, color=color, zorder=2)
    ax.set_xlim(-reach - 0.5, reach + 0.5)
    ax.set_ylabel("held-out additions")
    cast(MaxNLocator, ax.yaxis.get_major_locator()).set_params(integer=True)  # AutoLocator: a MaxNLocator
    ax.grid(axis="y", color="white", linewidth=0.8)
    ax.set_axisbelow(True)


def _band_counts(series: Series, names: list[str], k90: int) -> list[str]:
    """What the report draws above each band, as sentences: each series' additions below, in and above it."""
    out = []
    for (dev, _), name in zip(series, names, strict=True):
        below, inside = int((dev < -k90).sum()), int(((dev >= -k90) & (dev <= k90)).sum())
        out.append(
            f"{name}: {below} / {dev.size} below the band, {inside} / {dev.size} in it, "
            f"{int((dev > k90).sum())} / {dev.size} above it."
        )
    return out


def _bands(ax: Axes, k90: int, reach: int) -> None:
    ax.axvspan(-k90 - 0.5, k90 + 0.5, color=LIGHT_BLUE, linewidth=0, zorder=0)
    ax.axvspan(-reach - 0.5, -k90 - 0.5, color=LIGHT_RED, linewidth=0, zorder=0)
    ax.axvspan(k90 + 0.5, reach + 0.5, color=LIGHT_RED, linewidth=0, zorder=0)


def _headlines(ax: Axes, series: Series, k90: int, reach: int) -> None:
    """Above each band: how many of each series' held-out additions fall in it."""
    where = blended_transform_factory(ax.transData, ax.transAxes)
    bands = [(-reach, -k90 - 1), (-k90, k90), (k90 + 1, reach)]
    for lo, hi in bands:
        for row, (dev, color) in enumerate(reversed(series)):
            inside = int(((dev >= lo) & (dev <= hi)).sum())
            ax.annotate(
                f"{inside} / {dev.size}",
                ((lo + hi) / 2, 1.0),
                xycoords=where,
                xytext=(0, 3 + 10.5 * row),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
                fontweight="bold",
                color=color,
            )
