"""What every part reads: the measurements of a run, and its groups of additions.

No torch and no MLflow here: a ``StudyResults`` holds the measurement table of every model, the
targets, split and exclusions, and the record of every fine-tuning run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ....core.facts import Pair
from ....core.lm.record import TrainRecord
from ....core.readings import read, summarize
from ....core.stats import clopper_pearson
from ..config import PARTS
from ..design import ARMS, MODEL_KEYS, StudyInputs, models_for, own_target
from ..labels import keyed

Row = dict[str, Any]  # one row of a table: its columns' labels, keys, counts and shares, as pandas takes them

# Models trained on all 81 additions, and the base model: they have no held-out group.
ALL_SEEN = frozenset({"base"} | {a.key for a in ARMS if a.pairs == "all"})


@dataclass
class StudyResults:
    inputs: StudyInputs
    measurements: dict[str, pd.DataFrame]  # model key -> measurement table
    training: dict[str, TrainRecord] = field(default_factory=dict)  # arm key -> its fine-tuning run
    curves: pd.DataFrame | None = None  # learning curves (``cctk run --curves``): see ``curve_rows``
    parts: tuple[str, ...] = PARTS  # the parts the run ran (``cctk run --parts``)
    _cache: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def draws(self) -> StudyInputs:
        """What the run drew before training: the name every protocol's results give it."""
        return self.inputs

    @property
    def models(self) -> tuple[str, ...]:
        """The keys of the models the run measured, in MODEL_KEYS order (all fourteen when every part ran)."""
        measured = set(models_for(self.parts))
        return tuple(key for key in MODEL_KEYS if key in measured)

    def ran(self, part: str) -> bool:
        """Whether a section of the outputs has its models: Parts A-D when run, the others (synthesis,
        runs) always, over the models that were measured."""
        return part in self.parts or part not in PARTS

    def readings(self, key: str, target: str | None = None) -> pd.DataFrame:
        """The readings of model ``key`` on a target table (its own by default)."""
        target = target or own_target(key)
        if (key, target) not in self._cache:
            self._cache[key, target] = read(self.measurements[key], self.inputs.targets[target])
        return self._cache[key, target]


Pairs = tuple[Pair, ...] | None  # the additions of a group (None: all 81)


def groups(inputs: StudyInputs, key: str) -> list[tuple[str, Pairs]]:
    """The groups a model is read on: ``all`` 81 for a model without a split, else seen and held out
    (``heldout``, without the additions excluded for it)."""
    if key in ALL_SEEN:
        return [("all", None)]
    return [("seen", inputs.split.seen), ("heldout", inputs.heldout(key))]


CURVE_COLUMNS = ["model", "model_key", "epoch", "group", "hits", "n"]  # group: its key (all, seen, heldout)


def curve_rows(inputs: StudyInputs, key: str, epoch: int, table: pd.DataFrame) -> list[Row]:
    """One point of an arm's learning curve: its hits on its own target in each group after ``epoch``."""
    readings = read(table, inputs.targets[own_target(key)])
    summaries = [(group, summarize(readings, pairs)) for group, pairs in groups(inputs, key)]
    return [{**keyed("model", key), "epoch": epoch, "group": group, "hits": s.hits, "n": s.n} for group, s in summaries]


def interval(hits: int, n: int, suffix: str = "") -> dict[str, float]:
    """``lo``/``hi`` (with ``_suffix``): the exact Clopper-Pearson 95% interval of hits / n."""
    lo, hi = clopper_pearson(hits, n)
    tail = f"_{suffix}" if suffix else ""
    return {f"lo{tail}": lo, f"hi{tail}": hi}


def split_row(
    results: StudyResults, key: str, target: str | None = None, named: tuple[str, str] = ("seen", "heldout")
) -> Row:
    """Hits (with exact interval), mean probability and surprise on the seen and held-out additions.

    ``named``: the column suffixes of the two groups of the run's split.
    """
    readings = results.readings(key, target)
    row: Row = {**keyed("model", key), **keyed("target", target or own_target(key))}
    for name, pairs in zip(named, (results.inputs.split.seen, results.inputs.heldout(key)), strict=True):
        s = summarize(readings, pairs)
        row.update(
            {
                f"hits_{name}": s.hits,
                f"n_{name}": s.n,
                **interval(s.hits, s.n, name),
                f"prob_target_{name}": s.prob_target,
                f"surprise_{name}": s.surprise,
            }
        )
    return row


def summarize_split(results: StudyResults, key: str, target: str | None = None) -> Row:
    """``split_row`` of a model trained on the seen additions, with how many held-out ones it leaves out."""
    return {**split_row(results, key, target), "n_excluded": len(results.inputs.excluded.get(key, ()))}
