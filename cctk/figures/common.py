"""The charts' shared colour code, paper style and the one way a figure is saved.

Colour code (manual 2.0.0, sections 5.11 and 7): blue / red for a hit / miss on seen
additions, green / orange for the same on held-out additions, dark outlines for the
extremes of each group, gray for controls and dark gray for the base model.
"""

from __future__ import annotations

import functools
import io
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib import colors as mcolors
from matplotlib.backends import backend_ps
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from fontTools.subset import Options
    from fontTools.ttLib import TTFont
    from matplotlib.typing import ColorType, RcKeyType

SEEN_HIT = "#2166ac"  # blue
SEEN_MISS = "#c62828"  # red
HELD_HIT = "#2e7d32"  # green
HELD_MISS = "#ef6c00"  # orange
SEEN_HIGH = "#0b2447"  # dark blue outline
SEEN_LOW = "#5b0a0a"  # dark red outline
HELD_HIGH = "#0b3d12"  # dark green outline
HELD_LOW = "#5d3a1a"  # dark brown outline
CONTROL = "#9e9e9e"  # gray
BASE = "#424242"  # dark gray
LIGHT_BLUE = "#c6dbef"
LIGHT_RED = "#f8d0cc"
LIGHT_ORANGE = "#fdd9b5"
DARK_ORANGE = "#8a3b00"
LINES = ("#6a3d9a", "#d81b60", "#00838f", "#8d6e63", "#000000", "#fbc02d")  # models on one chart
DOT: dict[str, Any] = {
    "fmt": "o",
    "markersize": 4.5,
    "capsize": 2.5,
    "linewidth": 1.3,
}  # a share and its interval (errorbar)
FORMATS = ("png", "pdf", "eps")

PAPER_RC: dict[RcKeyType, Any] = {  # matplotlib's rcParams: each key has its own type of value
    "pdf.fonttype": 42,  # TrueType: text stays text, selectable and searchable
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.framealpha": 1.0,  # EPS has no transparency
    "axes.spines.top": False,
    "savefig.dpi": 300,
}


@contextmanager
def paper_style() -> Iterator[None]:
    """rcParams for paper figures; needed both when drawing and when saving."""
    with matplotlib.rc_context(PAPER_RC):
        yield


def new_figure(width: float, height: float) -> Figure:
    """A figure outside pyplot's registry, so library calls leave no global state behind."""
    return Figure(figsize=(width, height))


def shade(color: str, t: float) -> tuple[float, float, float]:
    """``color`` mixed with white: t=0 white, t=1 the colour itself (opaque, hue kept)."""
    rgb = mcolors.to_rgb(color)
    t = min(max(float(t), 0.0), 1.0)
    r, g, b = (1.0 - t * (1.0 - c) for c in rgb)
    return r, g, b


def ink(fill: ColorType) -> str:
    """Black or white text, whichever reads on ``fill``."""
    r, g, b = mcolors.to_rgb(fill)
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else "black"


def pct(p: float) -> str:
    """A probability as a short percent: 87%, 3.2%, <0.1%."""
    if p < 0.0005:
        return "<0.1%"
    return f"{100 * p:.0f}%" if p >= 0.0995 else f"{100 * p:.1f}%"


class FontBoxOnce:
    """``bounds`` (matplotlib's PostScript backend's ``_bounds(font)``) computed once per font.

    For every EPS, matplotlib computes the whole font's bounding box by drawing each of its
    glyphs (about 6,000 for DejaVu Sans) through a pen: about 0.6 s per font per file, two thirds
    of an EPS heatmap's save. The box depends on the font alone, so it is kept per font, told
    apart by its own name, revision, glyph count and whole-file checksum; the EPS bytes stay the
    same (tests/figures/test_common.py). ``__wrapped__`` is matplotlib's own, ``boxes`` the kept ones.
    """

    __wrapped__: Callable[[TTFont], Iterable[float]]

    def __init__(self, bounds: Callable[[TTFont], Iterable[float]]) -> None:
        self.boxes: dict[tuple[str | None, float, int, int], tuple[float, ...]] = {}
        functools.update_wrapper(self, bounds)  # matplotlib's name and docstring; sets __wrapped__

    def __call__(self, font: TTFont) -> tuple[float, ...]:
        head = font["head"]
        key = (font["name"].getDebugName(6), head.fontRevision, head.checkSumAdjustment, font["maxp"].numGlyphs)
        if key not in self.boxes:
            self.boxes[key] = tuple(self.__wrapped__(font))
        return self.boxes[key]


if hasattr(backend_ps, "_bounds") and not hasattr(backend_ps._bounds, "boxes"):  # a private helper
    backend_ps._bounds = FontBoxOnce(backend_ps._bounds)  # of matplotlib 3.5+; where gone, nothing


# Tables of a TrueType font that only text shaping reads (ligatures, contextual forms, kerning pairs, math
# layout): a PDF's or an EPS's embedded font is drawn glyph by glyph at the places matplotlib computed, so no
# reader uses them; subsetting them (fontTools prunes every lookup to the glyphs kept) was most of the time
# an embedded font took: 0.08 s of 0.11 s per font and file for DejaVu Sans (python -m cctk.bench paper).
SHAPING_TABLES = ("GSUB", "GPOS", "GDEF", "JSTF", "MATH", "kern")


@contextmanager
def lean_fonts() -> Iterator[None]:
    """While saving: the fonts a PDF or EPS embeds are subset without their shaping tables. Only inside this
    block and this process (matplotlib's subsetting goes through ``fontTools.subset.load_font``, which is
    given the longer drop list here); the glyphs, their outlines, widths and Unicode map are the same."""
    from fontTools import subset

    load = subset.load_font

    def lean(fontfile: str, options: Options, *args: int | bool, **kwargs: int | bool) -> TTFont:
        options.drop_tables += [t for t in SHAPING_TABLES if t not in options.drop_tables]
        return load(fontfile, options, *args, **kwargs)

    subset.load_font = lean
    try:
        yield
    finally:
        subset.load_font = load


def warm_up() -> None:
    """Pay Matplotlib's one-time costs now (its PNG, PDF and EPS backends, the fonts they embed, plain and bold),
    drawing a figure with text into memory: a pipeline times its base model's measurement and heatmap as each
    arm's, which it forecasts from, without them."""
    fig = new_figure(1.0, 1.0)
    fig.text(0.5, 0.6, "0123456789 + = %", ha="center")
    fig.text(0.5, 0.3, "base model", ha="center", fontweight="bold")
    with paper_style(), lean_fonts():
        for ext in FORMATS:
            fig.savefig(io.BytesIO(), format=ext, dpi=300, bbox_inches="tight", pad_inches=0.05)


def save_figure(fig: Figure, folder: Path, stem: str) -> list[Path]:
    """Write ``stem.png`` (300 dpi), ``stem.pdf``, ``stem.eps`` into ``folder``; close ``fig``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{stem}.{ext}" for ext in FORMATS]
    with paper_style(), lean_fonts():
        for path in paths:
            fig.savefig(path, dpi=300, bbox_inches="tight", pad_inches=0.05)
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:  # a figure made through pyplot must leave its registry
        pyplot.close(fig)
    return paths
