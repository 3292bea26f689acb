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
        rows.append(
            {
                **keyed("model", arm.key),
                **keyed("parent", arm.parent),
                "examples": t.examples,
                "steps": t.steps,
                "seconds": t.train_seconds,
                "examples_per_second": t.examples_per_second,
                "loss_first_epoch": t.losses[0],
                "loss_last_epoch": t.losses[-1],
                "peak_gpu_memory_bytes": t.peak_gpu_memory_bytes,
                "peak_cpu_memory_bytes": t.peak_cpu_memory_bytes,
            }
        )  # 0: not measured there
    return {"table11": pd.DataFrame(rows)}
