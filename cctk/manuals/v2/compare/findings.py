"""Findings across seeds: each rule against its control on the held-out additions, run by run and pooled,
with how the runs agree, the family corrected for multiplicity, a verdict in words and the runs a finding
would need.

    per_run    one row per contrast and run: hits and n of each side, the run's one-sided Fisher p (and
               Holm-adjusted over the run's own rules, as its table10), direction (rule above, equal,
               below its control) and the run's conditional odds ratio with its exact 95% interval
    findings   one row per contrast: verdict, runs, runs agreeing with the pooled direction, pooled hits,
               the one-sided exact CMH p (p_pooled) and Holm-adjusted over every contrast of the compare
               (p_adjusted), Breslow-Day with Tarone's correction (p_heterogeneity), the Mantel-Haenszel
               odds ratio with its 95% interval, and the runs needed for 80% power

Verdicts (``verdict``): *supported* when the Holm-adjusted pooled p is below 0.05, the runs are not
significantly heterogeneous (Breslow-Day p >= 0.05, or not computable), at least two thirds of the runs
point the way of the pooled estimate and there are at least two runs (one run shows nothing across
seeds); *inconsistent* when there is a pooled effect (adjusted p < 0.05) but the runs are heterogeneous
or fewer than two thirds of them agree; *not supported* otherwise (no pooled effect, or one run).
Pure: ``PooledRun`` records in, DataFrames out.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
import pandas as pd

from ....core import stats
from ...manual import RecipeValue
from ...pooled import Label, grouped
from ..design import RULE_VS_CONTROL
from ..labels import keyed, model_name
from .tables import COUNTED, COUNTS, Study, _cmh, _counts, _has_rule, counted, two_by_two

ALPHA = 0.05
POWER = 0.8
MOST_RUNS = 50  # the power search stops here: "more than 50"
POWER_SEED = 0  # the simulation's streams: the same numbers give the same answer on every compare
SUPPORTED, INCONSISTENT, NOT_SUPPORTED = "supported", "inconsistent", "not supported"
ABOVE, EQUAL, BELOW = "above", "equal", "below"


@dataclass(frozen=True)
class Contrast:
    """One rule against its control in one run, on the held-out additions (the run's table10 row)."""

    label: Label  # the group: base model and the varied recipe values (``cctk.manuals.pooled.grouped``)
    rule: str  # keys (``c18_correct``, ``c18ctl_correct``): runs are matched on them, named at the edge
    control: str
    run_id: str
    seed: int
    hits_rule: int
    n_rule: int
    hits_control: int
    n_control: int

    @property
    def name(self) -> str:
        """``sum + 18 from correct sums vs control for + 18``: the contrast in today's labels."""
        return f"{model_name(self.rule)} vs {model_name(self.control)}"

    def table(self) -> np.ndarray:
        """(2, 2): rows rule, control; columns hit, miss."""
        return two_by_two(self.hits_rule, self.n_rule, self.hits_control, self.n_control)


@dataclass(frozen=True)
class Finding:
    """One contrast pooled over the runs of its group, and what the runs say together."""

    label: Label
    contrast: str  # its name (``Contrast.name``)
    rule_key: str
    control_key: str
    verdict: str
    runs: int
    runs_agreeing: int
    direction: str  # of the pooled estimate
    hits_rule: int  # summed over the runs, each share with its exact interval
    n_rule: int
    lo_rule: float
    hi_rule: float
    hits_control: int
    n_control: int
    lo_control: float
    hi_control: float
    p_pooled: float  # one-sided exact CMH (``stats.exact_conditional``)
    p_adjusted: float  # Holm over the compare's family
    bd_statistic: float
    p_heterogeneity: float
    odds_ratio_mh: float
    or_lo: float
    or_hi: float
    seeds_for_80_power: int | None  # None: more than MOST_RUNS


def contrasts(runs: list[Study]) -> list[Contrast]:
    """Every rule against its control in every run that ran it, group by group (``grouped``'s order)."""
    return [
        Contrast(label, rule, control, run.run_id, run.seed, *_counts(run, rule))
        for label, mine in grouped(runs)
        for rule, control in RULE_VS_CONTROL
        for run in mine
        if _has_rule(run, rule)
    ]


def direction(excess: Fraction) -> str:
    """Which way the rule stands from its control, by the sign of ad - bc (per run) or of the CMH
    numerator sum((ad - bc) / N) (pooled): the same sign as log(odds ratio), defined even at 0 or inf."""
    return ABOVE if excess > 0 else BELOW if excess < 0 else EQUAL


def _excess(table: np.ndarray) -> Fraction:
    """(ad - bc) / N of a (2, 2) table: the rule's hits above those expected under no association. A
    fraction, so that runs that cancel sum to exactly 0 (equal), never to a rounding error's sign."""
    (a, b), (c, d) = table.astype(int).tolist()
    return Fraction(a * d - b * c, a + b + c + d)


def per_run(found: list[Contrast]) -> pd.DataFrame:
    """One row per contrast and run; p_adjusted: Holm over the contrasts of the same run."""
    rows = []
    for c in found:
        _, p = stats.fisher_greater(c.hits_rule, c.n_rule, c.hits_control, c.n_control)
        odds, lo, hi = stats.odds_ratio_exact(c.hits_rule, c.n_rule, c.hits_control, c.n_control)
        rows.append(
            {
                **c.label,
                "contrast": c.name,
                **keyed("rule", c.rule),
                **keyed("control", c.control),
                "seed": c.seed,
                "run_id": c.run_id,
                **counted(*(getattr(c, column) for column in COUNTS)),
                "p_one_sided": p,
                "direction": direction(_excess(c.table())),
                "odds_ratio": odds,
                "or_lo": lo,
                "or_hi": hi,
            }
        )
    table = pd.DataFrame(rows)
    if len(table):
        table["p_adjusted"] = table.groupby("run_id")["p_one_sided"].transform(lambda p: stats.holm(p))
        columns = list(table.columns)
        columns.insert(columns.index("p_one_sided") + 1, columns.pop())  # raw p, then adjusted
        table = table[columns]
    return table


def _by_contrast(found: list[Contrast]) -> list[list[Contrast]]:
    """The runs of each (group, contrast), in first-seen order."""
    parts: dict[tuple[tuple[tuple[str, RecipeValue | None], ...], str, str], list[Contrast]] = {}
    for c in found:
        parts.setdefault((tuple(c.label.items()), c.rule, c.control), []).append(c)
    return list(parts.values())


def verdict(p_adjusted: float, p_heterogeneity: float, runs: int, agreeing: int, alpha: float = ALPHA) -> str:
    """The verdict rule of the module docstring; a nan p is no evidence (of an effect, or of heterogeneity)."""
    effect = p_adjusted < alpha  # False for nan
    heterogeneous = p_heterogeneity < alpha
    agree = 3 * agreeing >= 2 * runs  # at least two thirds, in integers
    if effect and agree and not heterogeneous and runs >= 2:
        return SUPPORTED
    # the runs' disagreement matters only about an effect: without one, seeds that scatter around no
    # difference are what "not supported" looks like, not an inconsistency
    if effect and (heterogeneous or not agree):
        return INCONSISTENT
    return NOT_SUPPORTED


def findings(found: list[Contrast], alpha: float = ALPHA, seed: int = POWER_SEED) -> list[Finding]:
    """Every contrast pooled over its runs, the family of one-sided exact CMH p-values Holm-adjusted, the
    verdicts, and the runs needed for 80% power at the family's corrected level (alpha / family size,
    the level of Holm's first step)."""
    parts = _by_contrast(found)
    pooled = [_cmh([c.table() for c in part]) for part in parts]
    adjusted = stats.holm([p["p_one_sided"] for p in pooled])
    family = max(1, int(np.sum(~np.isnan(adjusted))))
    out = []
    for part, test, p_adjusted in zip(parts, pooled, adjusted, strict=True):
        stack = np.stack([c.table() for c in part], axis=2)  # (2, 2, runs)
        way = direction(sum((_excess(c.table()) for c in part), Fraction(0)))
        agreeing = sum(direction(_excess(c.table())) == way for c in part)
        bd, p_het = stats.breslow_day(stack)
        needed = stats.runs_for_power(_rates(part), alpha / family, seed, POWER, MOST_RUNS)
        first = part[0]
        out.append(
            Finding(
                first.label,
                first.name,
                first.rule,
                first.control,
                verdict(p_adjusted, p_het, len(part), agreeing, alpha),
                len(part),
                agreeing,
                way,
                **{column: test[column] for column in COUNTED},
                p_pooled=test["p_one_sided"],
                p_adjusted=float(p_adjusted),
                bd_statistic=bd,
                p_heterogeneity=p_het,
                **{column: test[column] for column in ("odds_ratio_mh", "or_lo", "or_hi")},
                seeds_for_80_power=needed,
            )
        )
    return out


def _rates(part: list[Contrast]) -> stats.RunRates:
    """The observed runs of one contrast as the simulation draws them: sizes and shares of hits."""
    hits_rule, n_rule, hits_control, n_control = np.array(
        [[getattr(c, k) for k in COUNTS] for c in part], dtype=float
    ).T
    return stats.RunRates(n_rule.astype(int), hits_rule / n_rule, n_control.astype(int), hits_control / n_control)


def seeds_text(needed: int | None) -> str:
    return f"more than {MOST_RUNS}" if needed is None else str(needed)


def findings_table(found: list[Finding]) -> pd.DataFrame:
    """findings.csv: the group columns, then the names scripts read (``contrast``, ``verdict``, ...)."""
    rows = []
    for f in found:
        row = {k: v for k, v in asdict(f).items() if k != "label"}
        row["seeds_for_80_power"] = seeds_text(f.seeds_for_80_power)
        rows.append({**f.label, **row})
    return pd.DataFrame(rows)


# --- Findings in words: one sentence per contrast, generated from its numbers. ---


def _p(p: float) -> str:
    return "not computable" if math.isnan(p) else f"{p:.2g}"


def _odds(value: float) -> str:
    if math.isnan(value):
        return "not computable"
    return "infinite" if math.isinf(value) else f"{value:.3g}"


def _why(f: Finding, alpha: float = ALPHA) -> str:
    """The reason a finding is not supported, or inconsistent, in a few words."""
    if f.verdict == INCONSISTENT:
        if 3 * f.runs_agreeing < 2 * f.runs:
            return f"only {f.runs_agreeing} of {f.runs} runs point the way of the pooled estimate"
        return f"the runs' odds ratios differ (Breslow-Day p = {_p(f.p_heterogeneity)})"
    if f.verdict == NOT_SUPPORTED:
        if f.p_adjusted < alpha and f.runs < 2:
            return "one run cannot show that it holds across seeds"
        split = (
            f", and the runs disagree (Breslow-Day p = {_p(f.p_heterogeneity)})" if f.p_heterogeneity < alpha else ""
        )
        return f"no pooled effect at the corrected level (Holm-adjusted p = {_p(f.p_adjusted)}){split}"
    return "the rule beats its control across seeds"


def _agreement(f: Finding) -> str:
    """'holds in k of n runs' when the pooled estimate has the rule above its control; else which way."""
    if f.direction == ABOVE:
        return f"holds in {f.runs_agreeing} of {f.runs} runs"
    way = "below" if f.direction == BELOW else "equal to"
    return f"{f.runs_agreeing} of {f.runs} runs have the rule {way} its control, as pooled"


def sentence(f: Finding, alpha: float = ALPHA) -> str:
    """One line per contrast: the verdict, why, and its numbers."""
    group = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in f.label.items())  # base model tiny
    interval = (
        "no interval"
        if math.isnan(f.or_lo) or math.isnan(f.or_hi)
        else f"95% interval {_odds(f.or_lo)} to {_odds(f.or_hi)}"
    )
    return (
        f"{f.contrast} ({group}): {f.verdict.upper()}: {_why(f, alpha)}. Held-out additions hit "
        f"{f.hits_rule}/{f.n_rule} against {f.hits_control}/{f.n_control} over {f.runs} "
        f"run{'s' * (f.runs != 1)}; Mantel-Haenszel odds ratio {_odds(f.odds_ratio_mh)} ({interval}); "
        f"one-sided exact CMH p = {_p(f.p_pooled)}, Holm-adjusted {_p(f.p_adjusted)}; {_agreement(f)}; "
        f"heterogeneity (Breslow-Day, Tarone) p = {_p(f.p_heterogeneity)}; runs for 80% power: "
        f"{seeds_text(f.seeds_for_80_power)}."
    )


def with_agreement(pooled: pd.DataFrame, found: list[Finding]) -> pd.DataFrame:
    """rule_vs_control_pooled with, beside its CMH test, the Holm-adjusted p, the runs agreeing and the
    Breslow-Day test. Both list the (group, rule) pairs in the same order (``grouped``, then RULE_VS_CONTROL)."""
    if len(pooled) != len(found):
        raise ValueError(f"{len(pooled)} pooled rows against {len(found)} findings")
    if pooled.empty:  # no run trained a rule (cctk run --parts A): nothing to add to
        return pooled
    table = pooled.copy()
    table.insert(list(table.columns).index("p_one_sided") + 1, "p_adjusted", [f.p_adjusted for f in found])
    return table.assign(
        runs_agreeing=[f.runs_agreeing for f in found],
        bd_statistic=[f.bd_statistic for f in found],
        p_heterogeneity=[f.p_heterogeneity for f in found],
    )
