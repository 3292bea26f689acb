"""Training loss per epoch of every fine-tuning run (manual 2.0.0, section 7.7)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import Formatter, Locator, MaxNLocator

from . import style as styles
from .common import CONTROL, LINES, SEEN_HIT, new_figure, paper_style
from .style import REPORT, Style

MAIN_COLORS = (SEEN_HIT, *LINES)


# Ticks of a log axis that spans less than a decade: these multiples of a power of ten, the finest set that puts
# at most MOST_TICKS in view (Matplotlib's own would label a few of 2..9 and leave a run at 1.4 below any label).
NICE = ((1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8), (1, 1.5, 2, 3, 4, 5, 6, 8), (1, 2, 3, 5), (1, 2, 5))
MOST_TICKS = 6


def narrow(*view: float) -> bool:
    """Whether a log axis's view (its two ends, either way round) spans less than a decade."""
    low, high = sorted(view)
    return low > 0 and high < 10 * low


def nice_ticks(low: float, high: float) -> list[float]:
    """Ticks for a log axis from ``low`` to ``high`` (less than a decade apart): NICE's multiples of powers of ten
    inside it, the finest set with at most ``MOST_TICKS``; where none lies inside (a span of a few percent),
    Matplotlib's linear ticks."""
    power = math.floor(math.log10(low))
    for multiples in NICE:
        ticks = [
            value
            for exponent in (power, power + 1)
            for m in multiples
            if low <= (value := round(m * 10.0**exponent, 12)) <= high
        ]
        if 2 <= len(ticks) <= MOST_TICKS:
            return ticks
    return [float(t) for t in MaxNLocator(4).tick_values(low, high) if low <= t <= high]


class _Ticks(Locator):
    """A log axis's ticks: Matplotlib's own (``own``: the decades, and 2..9 between them where few) over a decade
    or more; under a decade, ``nice_ticks`` as the major ticks and no minor ones."""

    def __init__(self, own: Locator, major: bool) -> None:
        self.own, self.major = own, major

    def __call__(self) -> Sequence[float]:
        assert self.axis is not None, "set on an axis"
        if not narrow(*self.axis.get_view_interval()):
            return list(self.own())
        return nice_ticks(*sorted(self.axis.get_view_interval())) if self.major else []


class _Plain(Formatter):
    """A log axis's tick labels as plain numbers (3, 2, 1, 0.5): every tick of a view under a decade; over more,
    the ticks Matplotlib's own formatter labels (``decides``, already on the axis: the decades over many, some
    of 2..9 between them over few); its own would write 3 times ten to the 0."""

    def __init__(self, decides: Formatter) -> None:
        assert decides.axis is not None, "set the scale first: its formatter decides which ticks are labelled"
        self.decides = decides

    def set_locs(self, locs: list[float]) -> None:
        self.decides.set_locs(locs)

    def __call__(self, x: float, pos: int | None = None) -> str:
        assert self.decides.axis is not None
        return f"{x:g}" if narrow(*self.decides.axis.get_view_interval()) or self.decides(x, pos) else ""


def _epochs_and_loss(ax: Axes, ylabel: str, grid: float) -> None:
    """The loss chart's axes: whole epochs along x, the loss on a log y axis in plain numbers, a light grid
    of ``grid`` points' lines at every tick."""
    log_y(ax)
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    locator = ax.xaxis.get_major_locator()
    assert isinstance(locator, MaxNLocator), locator  # a linear axis's AutoLocator is a MaxNLocator
    locator.set_params(integer=True)
    ax.grid(color="#e3e3e3", linewidth=grid, which="both")


def log_y(ax: Axes) -> None:
    """A log y axis labelled in plain numbers, on ticks that label a view of less than a decade too."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(_Ticks(ax.yaxis.get_major_locator(), major=True))
    ax.yaxis.set_minor_locator(_Ticks(ax.yaxis.get_minor_locator(), major=False))
    ax.yaxis.set_major_formatter(_Plain(ax.yaxis.get_major_formatter()))
    ax.yaxis.set_minor_formatter(_Plain(ax.yaxis.get_minor_formatter()))


def loss_chart(losses: dict[str, list[float]], main: Sequence[str], style: Style = REPORT) -> Figure:
    """Loss per epoch on a log axis: the runs in ``main`` in colour, the rest in gray (manual 2.0.0, section 7.7);
    in paper style the runs of ``main`` each with its own colour, marker and line style, the rest in gray."""
    if style.paper:
        return _paper(losses, main, style)
    with paper_style():
        fig = new_figure(6, 3.6)
        ax = fig.add_axes((0.12, 0.14, 0.55, 0.74))
        draw_losses(ax, losses, main)
        ax.set_title("Training loss per epoch", fontweight="bold")
    return fig


def draw_losses(ax: Axes, losses: dict[str, list[float]], main: Sequence[str], legend_x: float = 1.02) -> None:
    """The chart's content, into any axes (the run report draws it into its page)."""
    others = [name for name in losses if name not in main]
    for name in others:  # gray first, so the main sequence is drawn over it
        _plot(ax, losses[name], CONTROL, 1.0)
    handles = []
    for i, name in enumerate(n for n in main if n in losses):
        color = MAIN_COLORS[i % len(MAIN_COLORS)]
        _plot(ax, losses[name], color, 1.6)
        handles.append(Line2D([], [], color=color, marker="o", markersize=3, label=name))
    if others:
        handles.append(
            Line2D([], [], color=CONTROL, marker="o", markersize=3, label=f"rule and control runs ({len(others)})")
        )
    _epochs_and_loss(ax, "training loss (log scale)", grid=0.6)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(legend_x, 1.0), frameon=False)


def _plot(ax: Axes, values: list[float], color: str, width: float) -> None:
    epochs = range(1, len(values) + 1)
    ax.plot(epochs, values, color=color, linewidth=width, marker="o", markersize=2.5)


def _paper(losses: dict[str, list[float]], main: Sequence[str], style: Style) -> Figure:
    """The runs of ``main`` each in its own colour, marker and line style, each in the legend; the others (the
    rules and their controls) thin gray lines under them, one entry: a legend that fits the chart's width
    however many runs there are. What each gray line is: the fine-tuning runs' table (its notes say so)."""
    shown = [name for name in main if name in losses]
    others = [name for name in losses if name not in shown]
    entries = len(shown) + bool(others)
    columns = 1 if style.narrow else 2
    with paper_style(), styles.fonts(style):
        fig = styles.figure(style, 2.3 + 0.17 * -(-entries // columns))
        ax = fig.add_subplot()
        for name in others:  # first: the main sequence is drawn over them
            ax.plot(range(1, len(losses[name]) + 1), losses[name], color=CONTROL, linewidth=0.7, zorder=1)
        for i, name in enumerate(shown):
            epochs, label = range(1, len(losses[name]) + 1), styles.label(name, style)
            ax.plot(epochs, losses[name], label=label, linewidth=1.0, markersize=3.5, zorder=2, **styles.series(i))
        if others:
            ax.plot([], [], color=CONTROL, linewidth=0.7, label=f"the {len(others)} rule and control runs")
            styles.note(
                fig,
                f"Gray: the other {len(others)} runs, the rules and their controls; each run's loss in its first and "
                "last epoch is in the fine-tuning runs' table.",
            )
        _epochs_and_loss(ax, "loss (log scale)", grid=0.5)
        fig.legend(loc="outside lower center", ncol=columns, frameon=False, handlelength=2.6)
    return fig
