"""Synthesis: every corpus's hits on its own target with exact intervals; rules against controls."""

from __future__ import annotations

import pandas as pd

from ....core.readings import summarize
from ....core.stats import fisher_greater, holm
from ..design import RULE_VS_CONTROL, own_target
from ..labels import keyed
from .core import Row, StudyResults, groups, interval

PART = "synthesis"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table09", "table10")


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    """table09 (shares with exact 95% intervals) and table10 (one-sided Fisher tests)."""
    rows: list[Row] = []
    for key in results.models:  # the corpora that ran
        for group, pairs in groups(results.inputs, key):
            s = summarize(results.readings(key), pairs)
            rows.append(
                {
                    **keyed("model", key),
                    **keyed("target", own_target(key)),
                    **keyed("group", group),
                    "hits": s.hits,
                    "n": s.n,
                    "share": s.hits / s.n if s.n else float("nan"),
                    **interval(s.hits, s.n),
                }
            )
    tables = {"table09": pd.DataFrame(rows)}
    if pairs_measured(results):  # a run of Part A alone (or A and B) trained no rule
        tables["table10"] = _fisher(results)
    return tables


def pairs_measured(results: StudyResults) -> list[tuple[str, str]]:
    """The rule / control pairs (``design.RULE_VS_CONTROL``) whose both models the run measured."""
    return [(rule, control) for rule, control in RULE_VS_CONTROL if {rule, control} <= set(results.models)]


def _fisher(results: StudyResults) -> pd.DataFrame:
    rows: list[Row] = []
    for rule, control in pairs_measured(results):
        row: Row = {**keyed("rule", rule), **keyed("control", control)}
        for side, key in (("rule", rule), ("control", control)):
            s = summarize(results.readings(key), results.inputs.heldout(key))
            row.update({f"hits_{side}": s.hits, f"n_{side}": s.n, **interval(s.hits, s.n, side)})
        odds, p = fisher_greater(row["hits_rule"], row["n_rule"], row["hits_control"], row["n_control"])
        rows.append({**row, "odds_ratio": odds, "p_value": p})
    table = pd.DataFrame(rows)
    # within one run, over its rules: several rules tested at once make a small p more likely by chance
    table["p_adjusted"] = holm(table["p_value"])
    return table
