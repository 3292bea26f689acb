"""The two styles of a figure: ``report`` (the run report's, the default) and ``paper`` (a journal's).

Paper style draws at a journal's width (3.3 in for a column, 6.9 in for the page) with 8 pt text, no title
or notes inside (they go into the caption: ``Style.caption`` collects them), and series in the Okabe-Ito
palette, each with its own marker and line style. ``simulate`` and ``delta_e`` check a palette under
deuteranopia and protanopia (Machado, Oliveira and Fernandes 2009, severity 1).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib import colors as mcolors
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from matplotlib.typing import ColorType, LineStyleType, RcKeyType

WIDTHS = {"column": 3.3, "page": 6.9}  # inches
STYLES = ("report", "paper")

# Okabe and Ito (2008), "Color Universal Design": distinct under the common colour-vision deficiencies.
OKABE_ITO = {
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "bluish green": "#009E73",
    "orange": "#E69F00",
    "reddish purple": "#CC79A7",
    "sky blue": "#56B4E9",
    "black": "#000000",
    "yellow": "#F0E442",
}
LINE_COLORS = tuple(
    OKABE_ITO[k] for k in ("blue", "vermillion", "bluish green", "reddish purple", "orange", "sky blue", "black")
)  # yellow reads badly as a line on white
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES: tuple[LineStyleType, ...] = ("-", "--", ":", "-.")
# The heatmap's fills in paper style: hit / miss, seen / held out.
HIT, MISS = OKABE_ITO["blue"], OKABE_ITO["vermillion"]
HELD_HIT, HELD_MISS = OKABE_ITO["bluish green"], OKABE_ITO["orange"]

PAPER_FONTS: dict[RcKeyType, float] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7.5,
    "ytick.labelsize": 7.5,
    "legend.fontsize": 7.5,
    "figure.titlesize": 8,
}


@dataclass(frozen=True)
class Style:
    """How a figure is drawn: ``report`` or ``paper``, at a ``column`` or ``page`` width (paper only)."""

    name: str = "report"
    width: str = "column"

    def __post_init__(self) -> None:
        if self.name not in STYLES:
            raise ValueError(f"unknown figure style {self.name!r}; choose one of: {', '.join(STYLES)}")
        if self.width not in WIDTHS:
            raise ValueError(f"unknown figure width {self.width!r}; choose one of: {', '.join(WIDTHS)}")

    @property
    def paper(self) -> bool:
        return self.name == "paper"

    @property
    def inches(self) -> float:
        return WIDTHS[self.width]

    @property
    def narrow(self) -> bool:
        return self.paper and self.width == "column"

    def size(self, width: float, height: float, page_height: float | None = None) -> tuple[float, float]:
        """Report: (``width``, ``height``). Paper: the journal's width, and ``height`` scaled with it
        (``page_height``, when given, at page width; the column's is the same share of its width)."""
        if not self.paper:
            return width, height
        scaled = height * self.inches / width if page_height is None else page_height * self.inches / WIDTHS["page"]
        return self.inches, scaled


def figure(style: Style, height: float) -> Figure:
    """A paper figure at the style's width, ``height`` inches, laid out by matplotlib's constrained layout
    (outside pyplot's registry)."""
    return Figure(figsize=(style.inches, height), layout="constrained")


NOTES = "cctk_notes"  # the attribute of a figure its notes are kept in


def note(fig: Figure, *texts: str) -> None:
    """Text a report figure draws inside and a paper figure leaves to its caption (``notes(fig)``)."""
    setattr(fig, NOTES, notes(fig) + [t for t in texts if t])  # an attribute of cctk's own: Figure declares none


def notes(fig: Figure) -> list[str]:
    return list(getattr(fig, NOTES, []))


REPORT = Style()


def paper(width: str = "column") -> Style:
    return Style("paper", width)


class Series(TypedDict):
    """A paper chart's series: the keyword arguments of ``Axes.plot`` and ``Line2D`` that tell it apart."""

    color: str
    marker: str
    linestyle: LineStyleType


def series(i: int) -> Series:
    """The i-th series of a paper chart: colour, marker and line style, no two alike for i < 28."""
    turn = i // len(LINE_COLORS)  # each time the colours come round, the markers shift and the line changes
    return {
        "color": LINE_COLORS[i % len(LINE_COLORS)],
        "marker": MARKERS[(i + turn) % len(MARKERS)],
        "linestyle": LINESTYLES[turn % len(LINESTYLES)],
    }


def label(text: str, style: Style, width: int = 40) -> str:
    """A legend label that fits a column: wrapped at ``width`` characters there."""
    return textwrap.fill(text, width) if style.narrow else text


@contextmanager
def fonts(style: Style) -> Iterator[None]:
    """The paper style's 8 pt text on top of the report's rcParams (nothing changes in report style)."""
    with matplotlib.rc_context(PAPER_FONTS if style.paper else {}):
        yield


# --- Colour-vision deficiency: Machado et al. (2009), severity 1, on linear RGB; CIE 1976 L*a*b* (D65). ---

MACHADO = {
    "deuteranopia": np.array(
        [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]
    ),
    "protanopia": np.array(
        [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]
    ),
}
SRGB_TO_XYZ = np.array(
    [[0.4124564, 0.3575761, 0.1804375], [0.2126729, 0.7151522, 0.0721750], [0.0193339, 0.1191920, 0.9503041]]
)
D65 = np.array([0.95047, 1.0, 1.08883])


def linear(color: ColorType) -> npt.NDArray[np.float64]:
    c = np.asarray(mcolors.to_rgb(color))
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def simulate(color: ColorType, deficiency: str | None) -> npt.NDArray[np.float64]:
    """Linear RGB of ``color`` as seen with ``deficiency`` (None: normal vision)."""
    rgb = linear(color)
    return rgb if deficiency is None else np.clip(MACHADO[deficiency] @ rgb, 0.0, 1.0)


def lab(rgb_linear: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    t = SRGB_TO_XYZ @ rgb_linear / D65
    f = np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def delta_e(a: ColorType, b: ColorType, deficiency: str | None = None) -> float:
    """CIE 1976 Delta E*ab between two colours as seen with ``deficiency``."""
    return float(np.linalg.norm(lab(simulate(a, deficiency)) - lab(simulate(b, deficiency))))
