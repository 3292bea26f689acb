"""The record of every fine-tuning run (table11)."""

from __future__ import annotations

import pandas as pd

from ..design import ARMS
from ..labels import keyed
from .core import Row, StudyResults

PART = "runs"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table11",)


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    rows: list[Row] = []
    for arm in ARMS:
        t = results.training.get(arm.key)
        if t is None:
            continue
        rows.append({**keyed("model", arm.key), **keyed("parent", arm.parent), **t.row()})
    return {"table11": pd.DataFrame(rows)}
