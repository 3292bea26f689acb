"""Drawing many figures fast: a worker process per core, and the EPS font box computed once.

Matplotlib's EPS writer measures the bounding box of *every* glyph of a font (about 6,000 for
DejaVu Sans) each time it embeds the font, about 0.7 s per font per file; the box only depends
on the font file, so it is computed once per font and process here. The output is unchanged.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache

from matplotlib.backends import backend_ps


def _cache_font_bounds() -> None:
    original = getattr(backend_ps, "_bounds", None)
    if original is None or getattr(original, "cctk_cached", False):
        return

    @lru_cache(maxsize=None)
    def by_file(path: str, number: int, mtime: float):
        from fontTools.ttLib import TTFont

        with TTFont(path, fontNumber=number) as font:
            return original(font)

    def bounds(font):
        path = getattr(getattr(font, "reader", None), "file", None)
        name = getattr(path, "name", None)
        if not isinstance(name, str) or not os.path.isfile(name):
            return original(font)
        return by_file(name, getattr(font.reader, "fontNumber", -1), os.path.getmtime(name))

    bounds.cctk_cached = True
    backend_ps._bounds = bounds


_cache_font_bounds()


def _warm_font_bounds() -> None:
    """Measure the paper style's fonts once here, so that no worker does it again."""
    from fontTools.ttLib import TTFont
    from matplotlib import font_manager

    from ..figures.common import PAPER_RC

    for weight in ("normal", "bold"):
        found = font_manager.findfont(font_manager.FontProperties(family=PAPER_RC["font.family"], weight=weight))
        with TTFont(found) as font:
            backend_ps._bounds(font)


def workers() -> int:
    """Worker processes for drawing: one per core, at most 4; 1 where fork is unavailable."""
    if sys.platform != "linux":
        return 1  # fork is Linux-safe only; elsewhere draw in this process
    return max(1, min(4, len(os.sched_getaffinity(0))))


def run_all(job: Callable, items: Sequence, n_workers: int | None = None) -> list:
    """``[job(item) for item in items]``, spread over forked workers when there are several."""
    n_workers = workers() if n_workers is None else n_workers
    if n_workers <= 1 or len(items) <= 1:
        return [job(item) for item in items]
    # fork: workers inherit the imported modules, the loaded data and the font boxes, so they
    # start at once; they only draw with matplotlib and write files.
    _warm_font_bounds()
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(n_workers, mp_context=context) as pool:
        return list(pool.map(job, items, chunksize=1))
