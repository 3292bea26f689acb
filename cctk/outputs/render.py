"""Drawing many figures fast: a worker process per core, forked after the fonts' boxes are measured.

Every EPS embeds its fonts with their bounding box, which ``cctk.figures.common`` computes once per
font and process; measuring the paper style's fonts here, before the fork, spares every worker that.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar, cast

from matplotlib.backends import backend_ps

from ..figures.common import PAPER_RC, FontBoxOnce

T = TypeVar("T")  # an item a job is given
R = TypeVar("R")  # what a job returns


def _warm_font_bounds() -> None:
    """Measure the paper style's fonts once here, so that no worker does it again."""
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    for weight in ("normal", "bold"):
        found = font_manager.findfont(font_manager.FontProperties(family=str(PAPER_RC["font.family"]), weight=weight))
        with TTFont(found) as font:
            cast(FontBoxOnce, backend_ps._bounds)(font)  # matplotlib's, as cctk.figures.common replaced it


def workers() -> int:
    """Worker processes for drawing: one per core, at most 4; 1 where fork is unavailable."""
    if sys.platform != "linux":
        return 1  # fork is Linux-safe only; elsewhere draw in this process
    return max(1, min(4, len(os.sched_getaffinity(0))))


def run_all(job: Callable[[T], R], items: Sequence[T], n_workers: int | None = None, eps: bool = True) -> list[R]:
    """``[job(item) for item in items]``, spread over forked workers when there are several. ``eps``: the
    jobs write EPS files, whose font boxes are measured once here first (2.5 s on two busy cores: paid for
    nothing by jobs that write none, as a paper's figures)."""
    n_workers = workers() if n_workers is None else n_workers
    if n_workers <= 1 or len(items) <= 1:
        return [job(item) for item in items]
    # fork: workers inherit the imported modules, the loaded data and the font boxes, so they
    # start at once; they only draw with matplotlib and write files.
    if eps:
        _warm_font_bounds()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(n_workers, mp_context=context) as pool:
        return list(pool.map(job, items, chunksize=1))
