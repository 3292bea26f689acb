"""Manual 2.0.0 across runs: shares over seeds, rule-vs-control tests pooled over seeds, how implausibility matters.

Pure: a list of ``PooledRun`` (its base model, seed, ``StudyResults`` and logged recipe) in, DataFrames out. Runs
are pooled within a group only: one base model and one value of every recipe value that differs
between the runs compared (``cctk.manuals.pooled.grouped``); every table names its group in its first columns. A part a
run did not run (``cctk run --parts``) gives it no rows: absent, never counted as zero. Runs' tables are
joined on their key columns (``model_key``, ``group_key``, ``rule_key``, ...), never on their labels; every
table here names a model by today's label of its key, with the key beside it.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from statsmodels.stats.contingency_tables import StratifiedTable

from ....core.stats import clopper_pearson, exact_conditional, t_interval
from ...pooled import Label, PooledRun, grouped, stacked, varied
from ..design import ARM_BY_KEY, ARMS, MODEL_KEYS, RULE_VS_CONTROL, own_target
from ..labels import keyed
from ..parts import StudyResults
from ..parts.core import Row, interval

Study = PooledRun[StudyResults]  # a 2.0.0 run, pooled
DISTANCE_BINS = ((1, 2), (3, 5), (6, 9), (10, 17), (18, 34))  # |fabricated answer - true sum|
GROUPS = ("all", "seen", "heldout")  # group keys: the columns <group>_mean, _lo, _hi
COUNTS = ("hits_rule", "n_rule", "hits_control", "n_control")  # a rule against its control (table10's columns)
# the same with each share's exact interval, in table10's order
COUNTED = ("hits_rule", "n_rule", "lo_rule", "hi_rule", "hits_control", "n_control", "lo_control", "hi_control")


def counted(hits_rule: int, n_rule: int, hits_control: int, n_control: int) -> Row:
    """A rule's and its control's hits / n, each with its exact (Clopper-Pearson) 95% interval (``COUNTED``):
    every share of hits in every table carries one."""
    return {
        "hits_rule": hits_rule,
        "n_rule": n_rule,
        **interval(hits_rule, n_rule, "rule"),
        "hits_control": hits_control,
        "n_control": n_control,
        **interval(hits_control, n_control, "control"),
    }


MODEL_ORDER = {k: i for i, k in enumerate(MODEL_KEYS)}


def cross_seed(runs: list[Study]) -> pd.DataFrame:
    """One row per group and measured model: runs, and per group of additions (all, seen, held out) the
    mean share of hits on the model's own target over runs with a t interval over runs."""
    rows: list[Row] = []
    for label, mine in grouped(runs):
        shares = stacked(mine, "table09")
        for key, part in sorted(shares.groupby("model_key", sort=False), key=lambda item: MODEL_ORDER[str(item[0])]):
            key = str(key)
            row: Row = {
                **label,
                **keyed("model", key),
                **keyed("target", own_target(key)),
                "runs": part["run_id"].nunique(),
            }
            for group in GROUPS:
                values = part.loc[part["group_key"] == group, "share"]
                mean, lo, hi = t_interval(values) if len(values) else (math.nan,) * 3
                row.update({f"{group}_mean": mean, f"{group}_lo": lo, f"{group}_hi": hi})
            rows.append(row)
    return pd.DataFrame(rows)


def pooled_tests(runs: list[Study]) -> pd.DataFrame:
    """Each rule against its control on the held-out additions, pooled over the runs of a group (those
    that ran the rule's part): the exact Cochran-Mantel-Haenszel test with the runs as strata, and the
    Mantel-Haenszel pooled odds ratio."""
    rows: list[Row] = []
    for label, mine in grouped(runs):
        for rule, control in RULE_VS_CONTROL:
            having = [r for r in mine if _has_rule(r, rule)]
            if having:  # no run of the group ran the rule's part: no row, never a zero
                rows.append(
                    {
                        **label,
                        **keyed("rule", rule),
                        **keyed("control", control),
                        "runs": len(having),
                        **_cmh([two_by_two(*_counts(r, rule)) for r in having]),
                    }
                )
    return pd.DataFrame(rows)


def _has_rule(run: Study, rule: str) -> bool:
    """Whether the run tested the rule (by key) against its control (its table10)."""
    return "table10" in run.tables and rule in set(run.tables["table10"]["rule_key"])


def _counts(run: Study, rule: str) -> tuple[int, ...]:
    """The rule's and its control's hits and n in the run (its table10 row), in COUNTS order."""
    row = run.tables["table10"].set_index("rule_key").loc[rule]
    return tuple(row[list(COUNTS)].to_numpy(dtype=int).tolist())


def two_by_two(hits_rule: int, n_rule: int, hits_control: int, n_control: int) -> np.ndarray:
    """(2, 2): rows rule, control; columns hit, miss."""
    return np.array([[hits_rule, n_rule - hits_rule], [hits_control, n_control - hits_control]], dtype=float)


def _cmh(tables: list[np.ndarray]) -> Row:
    """Pooled counts with their exact intervals (``counted``), the CMH chi-square (no continuity correction: the
    statistic, for reference), the exact conditional test's one- and two-sided p (``exact_conditional``: Fisher's
    test with one run, and no normal approximation of sparse held-out counts), the Mantel-Haenszel odds ratio
    with its interval."""
    stack = np.stack(tables, axis=2)  # (2, 2, runs)
    counts = counted(int(stack[0, 0].sum()), int(stack[0].sum()), int(stack[1, 0].sum()), int(stack[1].sum()))
    hits_rule, misses_rule, hits_control, misses_control = stack[0, 0], stack[0, 1], stack[1, 0], stack[1, 1]
    p_one, p_two = exact_conditional(hits_rule, hits_rule + misses_rule, hits_control, hits_control + misses_control)
    informative = stack[:, :, (stack.sum(axis=0) > 0).all(axis=0)]  # strata with both outcomes possible
    if informative.shape[2] == 0:  # nobody hits, or everybody does, in every run: p 1 (each run's Fisher p), no OR
        return {
            **counts,
            **dict.fromkeys(("chi2", "odds_ratio_mh", "or_lo", "or_hi"), math.nan),
            "p_two_sided": p_two,
            "p_one_sided": p_one,
        }
    # A rule (or control) with no hit in any stratum has a pooled odds ratio of 0 (or inf): statsmodels
    # takes its log for the interval, which numpy warns about; the interval is then undefined (nan).
    with np.errstate(divide="ignore", invalid="ignore"):
        table = StratifiedTable(informative)
        test = table.test_null_odds(correction=False)
        lo, hi = table.oddsratio_pooled_confint()
        odds = float(table.oddsratio_pooled)
    return {
        **counts,
        "chi2": float(test.statistic),
        "p_two_sided": p_two,
        "p_one_sided": p_one,
        "odds_ratio_mh": odds,
        "or_lo": float(lo),
        "or_hi": float(hi),
    }


def fabricated_readings(runs: list[Study]) -> pd.DataFrame:
    """Per run and addition, the fabricated-answers model on its fabricated answer: the answer, the
    true sum, their distance, whether the answer is impossible (> 18), hit and probability."""
    frames = []
    for r in runs:
        read = r.results.readings("m_random", "fabricated").reset_index()
        sums = read["a"] + read["b"]
        frames.append(
            pd.DataFrame(
                {
                    "base_model": r.model,
                    "run_id": r.run_id,
                    "a": read["a"],
                    "b": read["b"],
                    "fabricated": read["target"],
                    "true_sum": sums,
                    "distance": (read["target"] - sums).abs(),
                    "impossible": read["target"] > 18,
                    "hit": read["hit"],
                    "prob_target": read["prob_target"],
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


DISTANCES = [f"{lo}-{hi}" for lo, hi in DISTANCE_BINS]
KINDS = ["possible (<= 18)", "impossible (> 18)"]


def implausibility(runs: list[Study]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hit share (exact interval on the counts pooled over runs) and mean probability on the fabricated
    answer, by distance from the true sum and by possible / impossible, per group."""
    by_distance, by_kind = [], []
    for label, mine in grouped(runs):
        data = fabricated_readings(mine)
        distance = data["distance"].map(_bin).rename("distance")
        kind = data["impossible"].map({False: KINDS[0], True: KINDS[1]}).rename("answer")
        by_distance += _pooled(data, distance, DISTANCES, label)
        by_kind += _pooled(data, kind, KINDS, label)
    return pd.DataFrame(by_distance), pd.DataFrame(by_kind)


def _bin(distance: int) -> str:
    return next(f"{lo}-{hi}" for lo, hi in DISTANCE_BINS if lo <= distance <= hi)


def _pooled(data: pd.DataFrame, by: pd.Series, order: list[str], label: Label) -> list[Row]:
    rows: list[Row] = []
    for value in order:
        part = data[by == value]
        hits, n = int(part["hit"].sum()), len(part)
        lo, hi = clopper_pearson(hits, n)
        rows.append(
            {
                **label,
                str(by.name): value,
                "runs": data["run_id"].nunique(),
                "additions": n,
                "hits": hits,
                "share": hits / n if n else math.nan,
                "lo": lo,
                "hi": hi,
                "mean_prob": float(part["prob_target"].mean()) if n else math.nan,
            }
        )
    return rows


def heldout_pooled(runs: list[Study]) -> pd.DataFrame:
    """Held-out hit share of every corpus trained on the seen additions, pooled over the runs of each
    group (hits and additions summed), with the exact interval of the pooled share: the chart's data."""
    rows: list[Row] = []
    for label, mine in grouped(runs):
        shares = stacked(mine, "table09")
        held = shares[shares["group_key"] == "heldout"]
        for model, part in held.groupby("model_key", sort=False):
            key = str(model)
            counted = _share(int(part["hits"].sum()), int(part["n"].sum()))
            rows.append({**label, **keyed("model", key), "runs": len(part), **counted})
    return pd.DataFrame(rows)


ABSORPTION = tuple((arm.key, arm.target) for arm in ARMS if arm.part == "A")  # each model on its own corpus


def recipe_sensitivity(runs: list[Study]) -> pd.DataFrame:
    """How the outcome moves with the recipe: per group (base model and a value of every varied recipe
    value), Part A's absorption (each Part A model's share of hits on its own target over the 81
    additions: mean over runs, t interval over runs) and every rule that ran against its control on the
    held-out additions (hits pooled over runs, exact intervals, the exact CMH test of ``pooled_tests``).
    Empty when no recipe value differs between the runs."""
    if not varied(runs):
        return pd.DataFrame()
    rows: list[Row] = []
    for label, mine in grouped(runs):
        rows += [_absorption_row(label, mine, key, target) for key, target in ABSORPTION]
        rows += [
            _rule_row(label, mine, rule, control)
            for rule, control in RULE_VS_CONTROL
            if any(_has_rule(r, rule) for r in mine)
        ]
    return pd.DataFrame(rows)


def _absorption_row(label: Label, runs: list[Study], key: str, target: str) -> Row:
    table01 = stacked(runs, "table01")
    part = table01[(table01["model_key"] == key) & (table01["target_key"] == target)]
    mean, lo, hi = t_interval(part["hits"] / part["n"])
    return {
        **label,
        "part": "A",
        **keyed("model", key),
        **keyed("target", target),
        "runs": len(part),
        "hits": int(part["hits"].sum()),
        "n": int(part["n"].sum()),
        "share": mean,
        "lo": lo,
        "hi": hi,
        "interval": "t over runs",
    }


def _rule_row(label: Label, runs: list[Study], rule: str, control: str) -> Row:
    having = [r for r in runs if _has_rule(r, rule)]
    test = _cmh([two_by_two(*_counts(r, rule)) for r in having])
    row = {
        **label,
        "part": ARM_BY_KEY[rule].part,
        **keyed("model", rule),
        **keyed("target", own_target(rule)),
        "runs": len(having),
        "interval": "exact, pooled",
        **keyed("control", control),
    }
    for side, suffix in (("rule", ""), ("control", "_control")):
        row.update(_share(test[f"hits_{side}"], test[f"n_{side}"], suffix))
    return {**row, "p_one_sided": test["p_one_sided"], "p_two_sided": test["p_two_sided"]}


def _share(hits: int, n: int, suffix: str = "") -> Row:
    """hits, n, their share and its exact (Clopper-Pearson) interval, each column named with ``suffix``."""
    lo, hi = clopper_pearson(hits, n)
    values = {"hits": hits, "n": n, "share": hits / n if n else math.nan, "lo": lo, "hi": hi}
    return {f"{name}{suffix}": value for name, value in values.items()}
