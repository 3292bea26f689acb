"""Parts A-D and the synthesis: each a plain ``run(results)`` from measurement tables to tables.

``compute_tables``, ``headline`` and ``model_metrics`` are pure functions of a ``Results``.
"""
from __future__ import annotations

import pandas as pd

from ..names import model_name, target_name
from ..readings import summarize
from . import part_a, part_b, part_c, part_d, runs, synthesis
from .core import ALL_SEEN, CURVE_COLUMNS, Results, curve_rows, groups, summarize_split

PART_MODULES = (part_a, part_b, part_c, part_d, synthesis, runs)  # one per report section
# The part (report section) of every table, from the experiment module that computes it.
TABLE_PART: dict[str, str] = {name: module.PART for module in PART_MODULES for name in module.TABLES}
__all__ = ["ABSORBED", "absorption_misses", "ALL_SEEN", "CURVE_COLUMNS", "PART_MODULES", "Results", "TABLE_PART",
           "compute_tables", "curve_rows", "groups", "headline", "model_metrics", "summarize_split"]


def compute_tables(results: Results) -> dict[str, pd.DataFrame]:
    """The eleven tables, ``table01`` .. ``table11``; those of the parts a run did not run are absent."""
    tables: dict[str, pd.DataFrame] = {}
    for part in PART_MODULES:
        if results.ran(part.PART):
            tables.update(part.run(results))
    return dict(sorted(tables.items()))


def headline(results: Results) -> dict:
    """The figures printed at the end of every run: Part A's absorption, each on all 81 additions."""
    correct = summarize(results.readings("m_correct", "correct"))
    fabricated = summarize(results.readings("m_random", "random"))
    return {"m_correct_hits_correct": correct.hits, "m_random_hits_fabricated": fabricated.hits,
            "n_additions": correct.n, "absorbed": int(not absorption_misses(results))}


# Part A absorbed its corpora when at least these many of the 81 additions are hits (SPEC 9): below,
# Parts B-D read a model that did not take up what it was fine-tuned on, and the run says so.
ABSORBED = {"m_correct": ("correct", 77), "m_random": ("random", 73)}


def absorption_misses(results: Results) -> list[str]:
    """One line per Part A model that did not absorb its corpus (empty when both did)."""
    misses = []
    for key, (target, needed) in ABSORBED.items():
        s = summarize(results.readings(key, target))
        if s.hits < needed:
            misses.append(f"the {model_name(key)} model hits {s.hits}/{s.n} {target_name(target)}s, below "
                          f"{needed}/{s.n}: it did not absorb its corpus, and the parts built on it read a "
                          "model that did not")
    return misses


def model_metrics(results: Results, key: str) -> dict:
    """The MLflow metrics of one model against its own target, by group (``all`` or seen / heldout)."""
    readings = results.readings(key)
    metrics = {}
    for group, pairs in groups(results, key):
        s = summarize(readings, pairs)
        metrics.update({f"hits_{group}": s.hits, f"n_{group}": s.n, f"prob_target_{group}": s.prob_target,
                        f"surprise_{group}": s.surprise})
    metrics["mass_impossible"] = summarize(readings).mass_impossible
    return metrics
