"""``python -m cctk.bench figures``: a target heatmap saved as PNG, PDF and EPS, with matplotlib's own
PostScript font box (each EPS draws every glyph of each of its fonts through a pen to find it) against
the box kept per font by ``cctk.figures.common``, in one process; the EPS files compared byte for byte."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
from matplotlib.backends import backend_ps

from ..figures import save_figure, target_heatmap
from ..figures.common import FontBoxOnce

HELD = ((1, 2), (3, 4), (5, 6), (7, 8), (9, 1))


def readings(seed: int = 0) -> pd.DataFrame:
    """81 made-up readings (seeded) in the shape ``cctk.core.readings.read`` gives: a hit where p > 0.5."""
    rng = np.random.default_rng(seed)
    index = pd.MultiIndex.from_product([range(1, 10), range(1, 10)], names=["a", "b"])
    p = rng.random(81)
    sums = np.array([a + b for a, b in index])
    return pd.DataFrame(
        {
            "prob_target": p,
            "hit": p > 0.5,
            "target": sums,
            "top_choice": np.where(p > 0.5, sums, sums + 1),
            "prob_top": np.maximum(p, 1 - p),
        },
        index=index,
    )


def eps_without_date(path: Path) -> bytes:
    """An EPS file's bytes less its ``%%CreationDate`` line, the one line two saves of a figure differ by."""
    return b"".join(
        line for line in Path(path).read_bytes().splitlines(keepends=True) if not line.startswith(b"%%CreationDate")
    )


def run(repeats: int = 3) -> dict[str, str | int | float | bool]:
    """Seconds per heatmap (three formats) each way, their ratio, and whether the EPS bytes are the same."""
    kept = cast(FontBoxOnce, backend_ps._bounds)  # as cctk.figures.common replaced it on import (mypy: matplotlib's)
    table = readings()
    with tempfile.TemporaryDirectory() as folder:
        seconds, eps = {}, {}
        for way, bounds in (("matplotlib's font box", kept.__wrapped__), ("font box kept", kept)):
            kept.boxes.clear()  # the kept way pays its first measurement too
            backend_ps._bounds = bounds
            try:
                start = time.perf_counter()
                for i in range(repeats):
                    files = save_figure(target_heatmap(table, "Bench", heldout=HELD), Path(folder) / way / str(i), "h")
                seconds[way] = (time.perf_counter() - start) / repeats
            finally:
                backend_ps._bounds = kept
            eps[way] = eps_without_date(files[2])
    own, fast = seconds.values()
    return {
        "heatmaps saved each way": repeats,
        "formats": "png, pdf, eps",
        "seconds per heatmap, matplotlib's font box": round(own, 2),
        "seconds per heatmap, font box kept": round(fast, 2),
        "speedup": round(own / fast, 2),
        "EPS bytes identical": len(set(eps.values())) == 1,
    }
