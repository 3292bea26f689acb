"""Every view of a model derived from its measurement table and one set of targets.

A model is measured once (``cctk.measure``); each target (correct sum, fabricated answer,
a rule's answer) is scored against that one table here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

from .errors import CctkError
from .facts import IMPOSSIBLE_ABOVE

COLUMNS = ["a", "b", "candidate_value", "logprob", "n_tokens", "prob"]  # a measurement table (cctk.measure)
READING_COLUMNS = ["target", "top_choice", "prob_target", "prob_top", "hit", "surprise", "mass_impossible"]


def read(table: pd.DataFrame, targets: pd.Series) -> pd.DataFrame:
    """One row per addition (index a, b): the target and what the model makes of it.

    target, top_choice (argmax prob), prob_target, prob_top, hit (top_choice == target),
    surprise (-logprob / n_tokens of the target), mass_impossible (prob on candidates > 18).
    """
    check_targets(table, targets)
    by_pair = table.set_index(["a", "b"])
    # A broken model (NaN weights) has NaN probabilities: it then has no top choice, not a crash.
    top_rows = table["prob"].fillna(-1.0).groupby([table["a"], table["b"]]).idxmax()
    top = table.loc[top_rows].set_index(["a", "b"])
    keyed = table.set_index(["a", "b", "candidate_value"])
    on_target = keyed.loc[[(a, b, int(t)) for (a, b), t in zip(targets.index.tolist(), targets, strict=True)]]
    on_target.index = targets.index
    impossible = by_pair["prob"].where(by_pair["candidate_value"] > IMPOSSIBLE_ABOVE, 0.0)
    out = pd.DataFrame(
        {
            "target": targets.astype(int),
            "top_choice": top["candidate_value"].reindex(targets.index),
            "prob_target": on_target["prob"],
            "prob_top": top["prob"].reindex(targets.index),
            "surprise": -on_target["logprob"] / on_target["n_tokens"],
            "mass_impossible": impossible.groupby(level=["a", "b"]).sum().reindex(targets.index),
        },
        index=targets.index,
    )
    # Without probabilities there is no top choice: no hit (the first candidate, 2, is no answer of
    # the model) and no impossible mass (not 0).
    broken = out["prob_top"].isna()
    out["hit"] = (out["top_choice"] == out["target"]) & ~broken
    out.loc[broken, "mass_impossible"] = float("nan")
    return out[READING_COLUMNS]


def check_targets(table: pd.DataFrame, targets: pd.Series) -> None:
    """A candidate set that does not cover every target cannot score it: say which."""
    missing = sorted(set(targets.astype(int)) - set(table["candidate_value"].unique()))
    if missing:
        raise CctkError(
            f"targets {missing} are not among the measured candidates; the candidate set must cover every target"
        )


@dataclass(frozen=True)
class GroupSummary:
    """A group of readings: hits (k of n), the means of the probability on the target, of the surprise and
    of the mass on impossible answers (NaN for an empty group). Not KR-Test's ``Summary`` (two-sided items,
    accuracy and margins): another reading of another table."""

    hits: int
    n: int
    prob_target: float
    surprise: float
    mass_impossible: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize(readings: pd.DataFrame, pairs: Iterable[tuple[int, int]] | None = None) -> GroupSummary:
    """Hits (k of n), mean probability on the target, mean surprise and impossible mass of a group."""
    group = readings if pairs is None else readings.loc[list(pairs)]

    def mean(column: str) -> float:
        return float(group[column].mean()) if len(group) else float("nan")

    return GroupSummary(
        int(group["hit"].sum()), len(group), mean("prob_target"), mean("surprise"), mean("mass_impossible")
    )
