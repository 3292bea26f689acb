"""Part D, the conditional rule (sum + 18 if a >= b, else sum + 9) and its control, from both parents."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..facts import condition
from ..lineage import ARM_BY_KEY
from ..names import model_name
from ..stats import band_with_interval, share_inside
from . import Results, summarize_split

ARMS = ("d_correct", "d_random", "dctl_correct", "dctl_random")
RULE_AND_CONTROL = (("d_correct", "dctl_correct"), ("d_random", "dctl_random"))
CONDITIONS = {">": "a > b", "=": "a = b", "<": "a < b"}
OFFSETS = {18: "plus18", 9: "plus9", 0: "plain_sum"}
COVERAGES = (0.80, 0.90, 0.95)


def run(results: Results) -> dict[str, pd.DataFrame]:
    """table05 (seen/held out), table06 (hits by condition), table07 (offsets), table08 (bands)."""
    table05 = pd.DataFrame([{**summarize_split(results, k), "parent": model_name(ARM_BY_KEY[k].parent)}
                            for k in ARMS])
    return {"table05": table05, "table06": _by_condition(results), "table07": _offsets(results),
            "table08": _bands(results)}


def deviations(results: Results, key: str) -> np.ndarray:
    """Top choice minus the model's own target, on its never-seen additions."""
    held = results.readings(key).loc[list(results.inputs.heldout(key))]
    return (held["top_choice"] - held["target"]).to_numpy()


def _by_condition(results: Results) -> pd.DataFrame:
    rows = []
    for key in ARMS:
        readings = results.readings(key)
        for symbol, label in CONDITIONS.items():
            row = {"model": model_name(key), "condition": label}
            for group, pairs in (("seen", results.inputs.split.seen), ("heldout", results.inputs.heldout(key))):
                chosen = [p for p in pairs if condition(*p) == symbol]
                row[f"hits_{group}"] = int(readings.loc[chosen, "hit"].sum()) if chosen else 0
                row[f"n_{group}"] = len(chosen)
            rows.append(row)
    return pd.DataFrame(rows)


def _offsets(results: Results) -> pd.DataFrame:
    """Held-out top choice minus the correct sum, counted as +18, +9, 0 (plain sum) or other."""
    correct = results.inputs.targets["correct"]
    rows = []
    for key in ARMS:
        pairs = list(results.inputs.heldout(key))
        offset = results.readings(key).loc[pairs, "top_choice"] - correct.loc[pairs]
        row = {"model": model_name(key), "n": len(pairs)}
        row.update({name: int((offset == value).sum()) for value, name in OFFSETS.items()})
        row["other"] = int((~offset.isin(list(OFFSETS))).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _bands(results: Results) -> pd.DataFrame:
    """Smallest band +-k holding 80/90/95% of the rule model's deviations, bootstrap 95% interval."""
    rows = []
    for rule, control in RULE_AND_CONTROL:
        rule_dev, control_dev = deviations(results, rule), deviations(results, control)
        for coverage in COVERAGES:
            k, lo, hi = band_with_interval(rule_dev, coverage, results.inputs.seed)
            rows.append({"model": model_name(rule), "control": model_name(control), "coverage": coverage,
                         "k": k, "k_lo": lo, "k_hi": hi, "n_rule": len(rule_dev), "n_control": len(control_dev),
                         "rule_inside": share_inside(rule_dev, k), "control_inside": share_inside(control_dev, k)})
    return pd.DataFrame(rows)
