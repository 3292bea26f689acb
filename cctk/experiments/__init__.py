"""Parts A-D and the synthesis: each a plain ``run(results)`` from measurement tables to tables.

No torch and no MLflow here: a ``Results`` holds the measurement table of every model, the
targets, split and exclusions, and the fine-tuning record of every run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..lineage import StudyInputs, own_target
from ..names import model_name, target_name
from ..readings import read, summarize


@dataclass
class Results:
    inputs: StudyInputs
    measurements: dict[str, pd.DataFrame]  # model key -> measurement table
    training: dict[str, dict] = field(default_factory=dict)  # arm key -> TrainResult fields
    _cache: dict = field(default_factory=dict, repr=False)

    def readings(self, key: str, target: str | None = None) -> pd.DataFrame:
        """The readings of model ``key`` on a target table (its own by default)."""
        target = target or own_target(key)
        if (key, target) not in self._cache:
            self._cache[key, target] = read(self.measurements[key], self.inputs.targets[target])
        return self._cache[key, target]


def summarize_split(results: Results, key: str, target: str | None = None) -> dict:
    """Hits, mean probability and surprise on the seen and the never-seen additions of ``key``."""
    readings = results.readings(key, target)
    seen = summarize(readings, results.inputs.split.seen)
    held = summarize(readings, results.inputs.heldout(key))
    row = {"model": model_name(key), "target": target_name(target or own_target(key))}
    for group, values in (("seen", seen), ("heldout", held)):
        row.update({f"hits_{group}": values["hits"], f"n_{group}": values["n"],
                    f"prob_target_{group}": values["prob_target"], f"surprise_{group}": values["surprise"]})
    row["n_excluded"] = len(results.inputs.excluded.get(key, ()))
    return row
