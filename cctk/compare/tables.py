"""Across runs: shares over seeds, rule-vs-control tests pooled over seeds, how implausibility matters.

Pure: a list of ``Run`` (its base model, seed and ``Results``) in, DataFrames out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats
from statsmodels.stats.contingency_tables import StratifiedTable

from ..experiments import Results, compute_tables
from ..experiments.synthesis import RULE_VS_CONTROL
from ..lineage import MODEL_KEYS
from ..names import model_name
from ..stats import clopper_pearson

DISTANCE_BINS = ((1, 2), (3, 5), (6, 9), (10, 17), (18, 34))  # |fabricated answer - true sum|
GROUPS = ("all", "seen", "held out")


@dataclass(frozen=True)
class Run:
    """One finished pipeline: its MLflow run id, base model key, seed and results."""

    run_id: str
    model: str
    seed: int
    results: Results
    tables: dict[str, pd.DataFrame]

    @classmethod
    def of(cls, run_id: str, model: str, seed: int, results: Results) -> Run:
        return cls(run_id, model, seed, results, compute_tables(results))


@dataclass(frozen=True)
class V1Run:
    """One finished protocol 1.0.0 run: its tables (table02 holds the three numbers' summaries)."""

    run_id: str
    model: str
    seed: int
    tables: dict[str, pd.DataFrame]


def v1_three_numbers(runs: list[V1Run]) -> pd.DataFrame:
    """Protocol 1.0.0 across runs: per base model and number (pre-fine-tuning true sum, post-fine-tuning
    fabricated value, post-fine-tuning true sum), the mean over runs of each run's mean probability
    over the 81 additions with a t interval over runs, and the hits summed over runs."""
    frames = pd.concat([r.tables["table02"].assign(base_model=r.model, run_id=r.run_id) for r in runs])
    rows = []
    for (base, number), part in frames.groupby(["base_model", "number"], sort=False):
        mean, lo, hi = t_interval(part["mean"])
        rows.append({"base_model": base, "number": number, "runs": part["run_id"].nunique(), "mean": mean,
                     "lo": lo, "hi": hi, "hits": int(part["hits"].sum()), "n": int(part["n"].sum())})
    return pd.DataFrame(rows)


def t_interval(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its Student's t interval (k - 1 degrees of freedom), clipped to [0, 1];
    nan bounds for fewer than two values."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean()) if x.size else math.nan
    if x.size < 2:
        return mean, math.nan, math.nan
    half = scipy_stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def cross_seed(runs: list[Run]) -> pd.DataFrame:
    """One row per base model and measured model: runs, and per group (all, seen, held out) the mean
    share of hits on the model's own target over runs with a t interval over runs."""
    shares = pd.concat([r.tables["table09"].assign(base_model=r.model, run_id=r.run_id) for r in runs])
    rows = []
    for (base, model), part in shares.groupby(["base_model", "model"], sort=False):
        row = {"base_model": base, "model": model, "target": part["target"].iloc[0], "runs": part["run_id"].nunique()}
        for group in GROUPS:
            values = part.loc[part["group"] == group, "share"]
            name = group.replace(" ", "")
            mean, lo, hi = t_interval(values) if len(values) else (math.nan,) * 3
            row.update({f"{name}_mean": mean, f"{name}_lo": lo, f"{name}_hi": hi})
        rows.append(row)
    order = {model_name(k): i for i, k in enumerate(MODEL_KEYS)}
    table = pd.DataFrame(rows)
    return table.sort_values(["base_model", "model"], key=lambda c: c.map(order) if c.name == "model" else c,
                             ignore_index=True)


def pooled_tests(runs: list[Run]) -> pd.DataFrame:
    """Each rule against its control on the never-seen additions, pooled over the runs of a base model:
    Cochran-Mantel-Haenszel test with the runs as strata, and the Mantel-Haenszel pooled odds ratio."""
    rows = []
    for base in dict.fromkeys(r.model for r in runs):
        mine = [r for r in runs if r.model == base]
        for rule, control in RULE_VS_CONTROL:
            rows.append({"base_model": base, "rule": model_name(rule), "control": model_name(control),
                         "runs": len(mine), **_cmh([_two_by_two(r, rule) for r in mine])})
    return pd.DataFrame(rows)


def _two_by_two(run: Run, rule: str) -> np.ndarray:
    row = run.tables["table10"].set_index("rule").loc[model_name(rule)]
    return np.array([[row.hits_rule, row.n_rule - row.hits_rule],
                     [row.hits_control, row.n_control - row.hits_control]], dtype=float)


def _cmh(tables: list[np.ndarray]) -> dict:
    """Pooled counts, CMH chi-square (no continuity correction), two- and one-sided p, MH odds ratio."""
    stack = np.stack(tables, axis=2)  # (2, 2, runs)
    counts = {"hits_rule": int(stack[0, 0].sum()), "n_rule": int(stack[0].sum()),
              "hits_control": int(stack[1, 0].sum()), "n_control": int(stack[1].sum())}
    informative = stack[:, :, (stack.sum(axis=0) > 0).all(axis=0)]  # strata with both outcomes possible
    if informative.shape[2] == 0 or (informative[:, 0].sum() == 0) or (informative[:, 1].sum() == 0):
        return {**counts, "chi2": math.nan, "p_two_sided": math.nan, "p_one_sided": math.nan,
                "odds_ratio_mh": math.nan, "or_lo": math.nan, "or_hi": math.nan}
    table = StratifiedTable(informative)
    test = table.test_null_odds(correction=False)
    expected = sum(t[0].sum() * t[:, 0].sum() / t.sum() for t in informative.transpose(2, 0, 1))
    above = informative[0, 0].sum() > expected  # the rule hits more often than under no association
    p_one = test.pvalue / 2 if above else 1 - test.pvalue / 2
    lo, hi = table.oddsratio_pooled_confint()
    return {**counts, "chi2": float(test.statistic), "p_two_sided": float(test.pvalue), "p_one_sided": float(p_one),
            "odds_ratio_mh": float(table.oddsratio_pooled), "or_lo": float(lo), "or_hi": float(hi)}


def fabricated_readings(runs: list[Run]) -> pd.DataFrame:
    """Per run and addition, the fabricated-answers model on its fabricated answer: the answer, the
    true sum, their distance, whether the answer is impossible (> 18), hit and probability."""
    frames = []
    for r in runs:
        read = r.results.readings("m_random", "random").reset_index()
        sums = read["a"] + read["b"]
        frames.append(pd.DataFrame({
            "base_model": r.model, "run_id": r.run_id, "a": read["a"], "b": read["b"], "fabricated": read["target"],
            "true_sum": sums, "distance": (read["target"] - sums).abs(), "impossible": read["target"] > 18,
            "hit": read["hit"], "prob_target": read["prob_target"]}))
    return pd.concat(frames, ignore_index=True)


def implausibility(runs: list[Run]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Hit share (exact interval on the counts pooled over runs) and mean probability on the fabricated
    answer, by distance from the true sum and by possible / impossible, per base model."""
    data = fabricated_readings(runs)
    bins = pd.Series([_bin(d) for d in data["distance"]], index=data.index)
    by_distance = _pooled(data, bins.rename("distance"), [f"{lo}-{hi}" for lo, hi in DISTANCE_BINS])
    kind = data["impossible"].map({False: "possible (<= 18)", True: "impossible (> 18)"}).rename("answer")
    by_kind = _pooled(data, kind, ["possible (<= 18)", "impossible (> 18)"])
    return by_distance, by_kind


def _bin(distance: int) -> str:
    return next(f"{lo}-{hi}" for lo, hi in DISTANCE_BINS if lo <= distance <= hi)


def _pooled(data: pd.DataFrame, by: pd.Series, order: list[str]) -> pd.DataFrame:
    rows = []
    for base in dict.fromkeys(data["base_model"]):
        mine = data["base_model"] == base
        for label in order:
            part = data[mine & (by == label)]
            hits, n = int(part["hit"].sum()), len(part)
            lo, hi = clopper_pearson(hits, n)
            rows.append({"base_model": base, by.name: label, "runs": data.loc[mine, "run_id"].nunique(),
                         "additions": n, "hits": hits, "share": hits / n if n else math.nan, "lo": lo, "hi": hi,
                         "mean_prob": float(part["prob_target"].mean()) if n else math.nan})
    return pd.DataFrame(rows)


def heldout_pooled(runs: list[Run]) -> pd.DataFrame:
    """Held-out hit share of every corpus trained on the seen additions, pooled over the runs of each
    base model (hits and additions summed), with the exact interval of the pooled share: the chart's data."""
    shares = pd.concat([r.tables["table09"].assign(base_model=r.model) for r in runs])
    held = shares[shares["group"] == "held out"]
    rows = []
    for (base, model), part in held.groupby(["base_model", "model"], sort=False):
        hits, n = int(part["hits"].sum()), int(part["n"].sum())
        lo, hi = clopper_pearson(hits, n)
        rows.append({"base_model": base, "model": model, "runs": len(part), "hits": hits, "n": n,
                     "share": hits / n if n else math.nan, "lo": lo, "hi": hi})
    return pd.DataFrame(rows)
