"""Part C, simple rules (sum + 18, sum + 3) from both parents, and their controls."""

from __future__ import annotations

import pandas as pd

from ..design import ARM_BY_KEY, part_arms
from ..labels import keyed
from .core import StudyResults, summarize_split

PART = "C"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table04",)
ARMS = part_arms(PART)  # the rules, then their controls


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    """table04: each arm on its own target, seen and held out (coincident additions left out)."""
    rows = [{**summarize_split(results, key), **keyed("parent", ARM_BY_KEY[key].parent)} for key in ARMS]
    return {"table04": pd.DataFrame(rows)}
