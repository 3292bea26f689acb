"""Part D, the conditional rule (sum + 18 if a >= b, else sum + 9) and its control, from both parents."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ....core.stats import band_with_interval, share_inside
from ..design import ARM_BY_KEY, RULE_VS_CONTROL, part_arms
from ..facts import condition
from ..labels import keyed
from .core import Row, StudyResults, interval, summarize_split

CONDITIONS = {">": "a > b", "=": "a = b", "<": "a < b"}
RULE_OFFSET = {">": 18, "=": 18, "<": 9}  # what the rule adds to the sum in each condition
OFFSETS = {18: "plus18", 9: "plus9", 0: "plain_sum"}
COVERAGES = (0.80, 0.90, 0.95)
RULE = "cond"  # the rule's target table: every deviation is read from it, the control's too


PART = "D"  # its section of the outputs (cctk.manuals.v2.labels.SECTIONS); cctk.manuals.v2.catalog reads it
TABLES = ("table05", "table06", "table07", "table08")
ARMS = part_arms(PART)  # the rule from each parent, then their controls
RULE_AND_CONTROL = tuple(pair for pair in RULE_VS_CONTROL if pair[0] in ARMS)


def run(results: StudyResults) -> dict[str, pd.DataFrame]:
    """table05 (seen/held out), table06 (hits by condition), table07 (offsets by condition), table08 (bands)."""
    table05 = pd.DataFrame([{**summarize_split(results, k), **keyed("parent", ARM_BY_KEY[k].parent)} for k in ARMS])
    return {
        "table05": table05,
        "table06": _by_condition(results),
        "table07": _offsets(results),
        "table08": _bands(results),
    }


def deviations(results: StudyResults, key: str) -> np.ndarray:
    """Top choice minus the *rule's* target, on the held-out additions of ``key`` (rule or control)."""
    held = results.readings(key, RULE).loc[list(results.inputs.heldout(key))]
    return (held["top_choice"] - held["target"]).to_numpy()


def _by_condition(results: StudyResults) -> pd.DataFrame:
    """Hits on the model's own target per condition, seen and held out, with exact intervals."""
    rows: list[Row] = []
    for key in ARMS:
        readings = results.readings(key)
        for symbol, label in CONDITIONS.items():
            row: Row = {**keyed("model", key), "condition": label}
            for group, pairs in (("seen", results.inputs.split.seen), ("heldout", results.inputs.heldout(key))):
                chosen = [p for p in pairs if condition(*p) == symbol]
                hits = int(readings["hit"].loc[chosen].sum()) if chosen else 0
                row.update({f"hits_{group}": hits, f"n_{group}": len(chosen), **interval(hits, len(chosen), group)})
            rows.append(row)
    return pd.DataFrame(rows)


def _offsets(results: StudyResults) -> pd.DataFrame:
    """Held-out top choice minus the correct sum, per condition: +18, +9, 0 (plain sum) or other.

    ``rule_offset`` is what the rule asks in that condition, so an offset of the other condition
    (a +9 on a >= b, a +18 on a < b) shows a model that learned both shifts but not when to use each.
    """
    correct = results.inputs.targets["correct"]
    rows: list[Row] = []
    for key in ARMS:
        held = list(results.inputs.heldout(key))
        top = results.readings(key)["top_choice"].loc[held]
        for symbol, label in CONDITIONS.items():
            pairs = [p for p in held if condition(*p) == symbol]
            offset = top.loc[pairs] - correct.loc[pairs] if pairs else pd.Series(dtype=int)
            row: Row = {**keyed("model", key), "condition": label, "rule_offset": RULE_OFFSET[symbol], "n": len(pairs)}
            row.update({name: int((offset == value).sum()) for value, name in OFFSETS.items()})
            row["other"] = int((~offset.isin(list(OFFSETS))).sum())
            rows.append(row)
    return pd.DataFrame(rows)


def _bands(results: StudyResults) -> pd.DataFrame:
    """Smallest band +-k holding 80/90/95% of the rule model's deviations, bootstrap 95% interval;
    the share of the control's deviations (from the same rule's target) inside the same band."""
    rows: list[Row] = []
    for rule, control in RULE_AND_CONTROL:
        rule_dev, control_dev = deviations(results, rule), deviations(results, control)
        for coverage in COVERAGES:
            k, lo, hi = band_with_interval(rule_dev, coverage, results.inputs.seed)
            rows.append(
                {
                    **keyed("model", rule),
                    **keyed("control", control),
                    "coverage": coverage,
                    "k": k,
                    "k_lo": lo,
                    "k_hi": hi,
                    "n_rule": len(rule_dev),
                    "n_control": len(control_dev),
                    "rule_inside": share_inside(rule_dev, k),
                    "control_inside": share_inside(control_dev, k),
                }
            )
    return pd.DataFrame(rows)
