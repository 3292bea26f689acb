"""A figure as a value: its number, key, section and a drawing function with plain arguments
(DataFrames, numbers), so a worker process can draw it from a pickled spec. Each manual's catalog (in its folder
under ``cctk/manuals/``) builds them; ``cctk.outputs`` draws and saves them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ..core.labels import file_stem
from .common import save_figure


@dataclass(frozen=True)
class Spec:
    """One figure: ``number`` orders it, ``key`` tells it apart, ``name`` is its plain name (its manual's
    labels: its file names), ``draw(**args)`` makes it in the report's style and ``draw(**args, style=...)`` in a
    ``cctk.figures.style.Style`` (a paper's, at a journal's width: ``cctk report --style paper``, ``cctk export``)."""

    number: int
    key: str
    # a key of its manual's report sections (``ManualSpec.sections``)
    part: str
    draw: Callable[..., Figure]
    args: dict[str, Any]  # the drawing function's keyword arguments: each chart takes its own
    title: str  # as the chart says it, for captions
    name: str  # the plain name the manual gives it (its folder and file names)
    shows: str = ""  # its entry in its manual's ``figure_about`` where its kind's does not fit it (its own words)

    @property
    def kind(self) -> str:
        """What kind of chart it is: the first part of its key (``heatmap`` of ``heatmap:m_random``)."""
        return self.key.split(":")[0]

    @property
    def about_key(self) -> str:
        """Its entry in its manual's ``figure_about`` (report.html's caption): ``shows``, else its kind."""
        return self.shows or self.kind

    @property
    def stem(self) -> str:
        return file_stem(self.name)


def draw_and_save(spec: Spec, folder: Path) -> list[Path]:
    """Draw one figure and save it as PNG, PDF and EPS in ``folder`` (its own, under figures/)."""
    return save_figure(spec.draw(**spec.args), folder, spec.stem)
