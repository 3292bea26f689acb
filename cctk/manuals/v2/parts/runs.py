"""The record of every fine-tuning run (table11)."""

from __future__ import annotations

import pandas as pd

from ....core.lm.record import training_table
from ..design import ARMS
from ..labels import keyed
from .core import Row, StudyResults

PART = "runs"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table11",)


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    rows: list[Row] = [
        {**keyed("model", arm.key), **keyed("parent", arm.parent), **results.training[arm.key].row()}
        for arm in ARMS
        if arm.key in results.training
    ]
    return {"table11": training_table(rows, ["model", "model_key", "parent", "parent_key"])}
