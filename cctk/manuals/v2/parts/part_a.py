"""Part A, corpus absorption: base, correct sums and fabricated answers, each on both targets."""

from __future__ import annotations

import pandas as pd

from ....core.readings import summarize
from ..labels import keyed
from .core import Row, StudyResults, interval

MODELS = ("base", "m_correct", "m_random")
TARGETS = ("correct", "fabricated")


PART = "A"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table01",)


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    """table01: hits with exact interval, mean probability on each target, mass on impossible answers (all 81)."""
    rows: list[Row] = []
    for key in MODELS:
        for target in TARGETS:
            s = summarize(results.readings(key, target))
            rows.append(
                {
                    **keyed("model", key),
                    **keyed("target", target),
                    "hits": s.hits,
                    "n": s.n,
                    **interval(s.hits, s.n),
                    "prob_target": s.prob_target,
                    "mass_impossible": s.mass_impossible,
                }
            )
    return {"table01": pd.DataFrame(rows)}
