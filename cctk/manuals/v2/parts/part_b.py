"""Part B, recovery: the fabricated-answer model trained back on the correct sums of the seen additions."""

from __future__ import annotations

import pandas as pd

from ..labels import model_name
from .core import Row, StudyResults, split_row

LOSS_RUNS = ("m_correct", "m_random", "m_recover")
# The recovery run's split names both groups: the fabricated-answers model, trained on all 81, saw both.
GROUPS = ("recovery_seen", "recovery_heldout")


PART = "B"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table02", "table03")


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    """table02 (recovery, on the recovery run's two groups, surprise gap) and table03 (loss per epoch, Parts A-B)."""
    rows: list[Row] = []
    for key in ("m_random", "m_recover"):
        row = split_row(results, key, "correct", named=GROUPS)
        row["surprise_gap"] = row["surprise_recovery_heldout"] - row["surprise_recovery_seen"]
        rows.append(row)
    losses = {model_name(k): results.training[k].losses for k in LOSS_RUNS if k in results.training}
    epochs = max((len(v) for v in losses.values()), default=0)
    table03 = pd.DataFrame({"epoch": range(1, epochs + 1)})
    for name, values in losses.items():
        table03[name] = pd.Series(values, index=range(len(values)), dtype=float)
    return {"table02": pd.DataFrame(rows), "table03": table03}
