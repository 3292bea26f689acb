"""Parts A-D and the synthesis: each a plain ``run(results)`` from measurement tables to tables.

``compute_tables``, ``headline`` and ``model_metrics`` are pure functions of a ``StudyResults``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ....core.readings import GroupSummary, summarize
from ...manual import Absorption
from ..labels import model_name, target_name
from . import part_a, part_b, part_c, part_d, runs, synthesis
from .core import ALL_SEEN, CURVE_COLUMNS, StudyResults, curve_rows, groups

PART_MODULES = (part_a, part_b, part_c, part_d, synthesis, runs)  # one per report section
# The part (report section) of every table, from the experiment module that computes it.
TABLE_PART: dict[str, str] = {name: module.PART for module in PART_MODULES for name in module.TABLES}
__all__ = [
    "ALL_SEEN",
    "CURVE_COLUMNS",
    "PART_MODULES",
    "TABLE_PART",
    "Headline",
    "ModelMetrics",
    "StudyResults",
    "absorption_misses",
    "compute_tables",
    "curve_rows",
    "groups",
    "headline",
    "model_metrics",
]


def compute_tables(results: StudyResults) -> dict[str, pd.DataFrame]:
    """The eleven tables, ``table01`` .. ``table11``; those of the parts a run did not run are absent."""
    tables: dict[str, pd.DataFrame] = {}
    for part in PART_MODULES:
        if results.ran(part.PART):
            tables.update(part.run(results))
    return dict(sorted(tables.items()))


@dataclass(frozen=True)
class Headline:
    """The figures printed at the end of every run: Part A's absorption, each on all 81 additions."""

    correct_hits: int  # the correct sums model's hits on the correct sums
    fabricated_hits: int  # the fabricated answers model's hits on its fabricated answers
    n_additions: int
    misses: tuple[str, ...]  # one line per Part A model below its ``ABSORBED`` threshold (``absorption_misses``)

    @property
    def absorbed(self) -> bool:
        return not self.misses

    def lines(self) -> list[str]:
        """What the console says at the end: Part A's absorption, and a warning per model that missed it."""
        n = self.n_additions
        return [
            f"correct sums model: {self.correct_hits}/{n} correct sums",
            f"fabricated answers model: {self.fabricated_hits}/{n} fabricated answers",
        ] + [f"WARNING: {miss}" for miss in self.misses]

    def metrics(self) -> dict[str, float]:
        """The parent run's metrics, by their MLflow names."""
        return {
            "m_correct_hits_correct": self.correct_hits,
            "m_random_hits_fabricated": self.fabricated_hits,
            "n_additions": self.n_additions,
            "absorbed": int(self.absorbed),
        }


def headline(results: StudyResults) -> Headline:
    """Part A's absorption, the run's headline."""
    correct = summarize(results.readings("m_correct", "correct"))
    fabricated = summarize(results.readings("m_random", "fabricated"))
    return Headline(correct.hits, fabricated.hits, correct.n, tuple(absorption_misses(results)))


# Part A absorbed its corpora when at least these many of the 81 additions are hits (SPEC 9): below,
# Parts B-D read a model that did not take up what it was fine-tuned on, and the run says so.
ABSORBED = {"m_correct": ("correct", 77), "m_random": ("fabricated", 73)}


def absorption(results: StudyResults) -> tuple[Absorption, ...]:
    """Part A's models against their thresholds (``ABSORBED``: 77/81 correct sums, 73/81 fabricated answers)."""
    return tuple(
        Absorption(key, target, s.hits, needed, s.n)
        for key, (target, needed) in ABSORBED.items()
        for s in [summarize(results.readings(key, target))]
    )


def absorption_misses(results: StudyResults) -> list[str]:
    """One line per Part A model that did not absorb its corpus (empty when both did)."""
    return [
        f"the {model_name(a.key)} model hits {a.hits}/{a.n} {target_name(a.target)}s, below {a.needed}/{a.n}: it did "
        "not absorb its corpus, and the parts built on it read a model that did not"
        for a in absorption(results)
        if not a.absorbed
    ]


@dataclass(frozen=True)
class ModelMetrics:
    """One measured model against its own target: a summary per group (``all``, or seen and heldout) and
    over all 81 additions."""

    groups: tuple[tuple[str, GroupSummary], ...]
    overall: GroupSummary

    def metrics(self) -> dict[str, float]:
        """Its run's metrics, by their MLflow names: ``hits_<group>``, ``n_<group>``, ... and the impossible mass."""
        metrics: dict[str, float] = {
            f"{name}_{group}": value
            for group, s in self.groups
            for name, value in (("hits", s.hits), ("n", s.n), ("prob_target", s.prob_target), ("surprise", s.surprise))
        }
        return {**metrics, "mass_impossible": self.overall.mass_impossible}


def model_metrics(results: StudyResults, key: str) -> ModelMetrics:
    """One model's readings against its own target, by group."""
    readings = results.readings(key)
    return ModelMetrics(
        tuple((group, summarize(readings, pairs)) for group, pairs in groups(results.inputs, key)), summarize(readings)
    )
