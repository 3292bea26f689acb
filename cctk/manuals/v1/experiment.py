"""The comparison of manual 1.0.0 (Listing 11) and its readings, from the two measurement tables.

No torch and no MLflow: a ``ComparisonResults`` holds the draws, the measurement of the base model before
fine-tuning and of the same model after it, and the record of the fine-tuning run (by model key, as
a 2.0.0 run's).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from ...core.facts import correct_sums
from ...core.lm.record import TrainRecord, training_table
from ...core.readings import read
from ...core.stats import clopper_pearson
from .facts import Draws
from .labels import keyed

BEFORE, AFTER = "base", "v1_random"  # the model before and after fine-tuning (labels.V1_MODELS)
# The fine-tuning run's draws (batch order, dropout) are seeded from this name: the key the fine-tuned
# model had until it got its own (it was 2.0.0's m_random), so a 1.0.0 run repeats draw for draw.
STREAM = "m_random"
FORMER_KEYS = {"m_random": AFTER}  # the key of the fine-tuned model in sessions written before
COMPARISON = [
    "a",
    "b",
    "true_sum",
    "pre_ft_true_prob",
    "fabricated_value",
    "post_ft_fabricated_prob",
    "post_ft_true_prob",
]  # Listing 11's columns, in its merge order
THREE = ("pre_ft_true_prob", "post_ft_fabricated_prob", "post_ft_true_prob")  # "the three numbers"
# table02's rows: column name, model, answer read
READINGS = (
    ("pre_ft_true_prob", BEFORE, "true sum"),
    ("post_ft_fabricated_prob", AFTER, "fabricated answer"),
    ("post_ft_true_prob", AFTER, "true sum"),
    ("pre_ft_fabricated_prob", BEFORE, "fabricated answer"),
)


@dataclass
class ComparisonResults:
    draws: Draws
    measurements: dict[str, pd.DataFrame]  # BEFORE, AFTER -> measurement table (candidates 2..18)
    training: dict[str, TrainRecord] = field(default_factory=dict)  # AFTER -> the fine-tuning run
    _cache: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict, repr=False)

    def readings(self, key: str, answer: str) -> pd.DataFrame:
        """``cctk.core.readings.read`` of model ``key`` on the true sum or the fabricated answer."""
        if (key, answer) not in self._cache:
            targets = correct_sums() if answer == "true sum" else self.draws.fabricated
            self._cache[key, answer] = read(self.measurements[key], targets)
        return self._cache[key, answer]


def comparison(results: ComparisonResults) -> pd.DataFrame:
    """Listing 11: per addition (a, b ascending), the true sum, the fabricated value and the three numbers."""
    before_true = results.readings(BEFORE, "true sum")
    table = pd.DataFrame(
        {
            "true_sum": before_true["target"],
            "pre_ft_true_prob": before_true["prob_target"],
            "fabricated_value": results.draws.fabricated,
            "post_ft_fabricated_prob": results.readings(AFTER, "fabricated answer")["prob_target"],
            "post_ft_true_prob": results.readings(AFTER, "true sum")["prob_target"],
        }
    )
    return table.reset_index()[COMPARISON]


def summary(results: ComparisonResults) -> pd.DataFrame:
    """table02: each number's distribution over the 81 additions (Listing 11's describe()) and hits."""
    rows = []
    for column, key, answer in READINGS:
        readings = results.readings(key, answer)
        values, hits, n = readings["prob_target"], int(readings["hit"].sum()), len(readings)
        lo, hi = clopper_pearson(hits, n)
        rows.append(
            {
                "number": column,
                **keyed("model", key),
                "answer": answer,
                "n": n,
                "mean": values.mean(),
                "std": values.std(),
                "min": values.min(),
                "q25": values.quantile(0.25),
                "median": values.median(),
                "q75": values.quantile(0.75),
                "max": values.max(),
                "hits": hits,
                "lo": lo,
                "hi": hi,
            }
        )
    return pd.DataFrame(rows)


def run_table(results: ComparisonResults) -> pd.DataFrame:
    """table03: the fine-tuning run, in the columns of 2.0.0's table11 (one row)."""
    t = results.training.get(AFTER)
    rows = [] if t is None else [{**keyed("model", AFTER), **keyed("parent", BEFORE), **t.row()}]
    return training_table(rows, ["model", "model_key", "parent", "parent_key"])


def loss_table(results: ComparisonResults) -> pd.DataFrame:
    losses = results.training[AFTER].losses if AFTER in results.training else ()
    return pd.DataFrame({"epoch": range(1, len(losses) + 1), "loss": list(losses)})


TABLE_PART = {"table01": "comparison", "table02": "comparison", "table03": "runs", "table04": "runs"}  # report sections


def compute_tables(results: ComparisonResults) -> dict[str, pd.DataFrame]:
    """The four tables of a v1 run (cctk.manuals.v1.labels.TABLES)."""
    return {
        "table01": comparison(results),
        "table02": summary(results),
        "table03": run_table(results),
        "table04": loss_table(results),
    }


@dataclass(frozen=True)
class Headline:
    """The parent run's figures, each field by its MLflow name: the three numbers' means, and the hits on
    the true sum and the fabricated answer before and after fine-tuning."""

    mean_pre_ft_true_prob: float
    mean_post_ft_fabricated_prob: float
    mean_post_ft_true_prob: float
    hits_true_before: int
    hits_fabricated_before: int
    hits_true_after: int
    hits_fabricated_after: int
    n_additions: int

    def metrics(self) -> dict[str, float]:
        return asdict(self)

    def lines(self) -> list[str]:
        """What the console says at the end: the three numbers' means and hits, before and after."""
        n = self.n_additions
        return [
            (
                f"before: mean probability of the true sum {self.mean_pre_ft_true_prob:.3f}, "
                f"{self.hits_true_before}/{n} true sums"
            ),
            (
                f"after: mean probability of the fabricated answer {self.mean_post_ft_fabricated_prob:.3f}, "
                f"{self.hits_fabricated_after}/{n} fabricated answers; of the true sum "
                f"{self.mean_post_ft_true_prob:.3f}, {self.hits_true_after}/{n}"
            ),
        ]


def headline(results: ComparisonResults) -> Headline:
    """The three numbers' means and the hits before and after."""
    means: dict[str, Any] = {
        f"mean_{column}": float(results.readings(key, answer)["prob_target"].mean())
        for column, key, answer in READINGS[:3]
    }
    hits: dict[str, Any] = {
        f"hits_{short}_{when}": int(results.readings(key, answer)["hit"].sum())
        for key, when in ((BEFORE, "before"), (AFTER, "after"))
        for answer, short in (("true sum", "true"), ("fabricated answer", "fabricated"))
    }
    return Headline(**means, **hits, n_additions=len(results.draws.fabricated))


@dataclass(frozen=True)
class Answered:
    """A model's readings of one answer over the 81 additions: hits, mean probability, mean surprise."""

    hits: int
    prob: float
    surprise: float


@dataclass(frozen=True)
class ModelMetrics:
    """A nested run's readings of the true sum and of the fabricated answer."""

    true: Answered
    fabricated: Answered

    def metrics(self) -> dict[str, float]:
        """Its run's metrics: ``hits_true``, ``prob_true``, ``surprise_true``, then the fabricated answer's."""
        return {
            f"{name}_{short}": value
            for short, answered in (("true", self.true), ("fabricated", self.fabricated))
            for name, value in asdict(answered).items()
        }


def model_metrics(results: ComparisonResults, key: str) -> ModelMetrics:
    """A nested run's readings: hits, mean probability and surprise on the true sum and the fabricated answer."""

    def answered(answer: str) -> Answered:
        readings = results.readings(key, answer)
        return Answered(
            int(readings["hit"].sum()), float(readings["prob_target"].mean()), float(readings["surprise"].mean())
        )

    return ModelMetrics(answered("true sum"), answered("fabricated answer"))
