"""Exact and resampled intervals (manual 2.0.0, section 4.13), Student's t interval of a mean over runs, and the
tests of rules against controls across runs (heterogeneity, multiplicity, power by simulation): counts or arrays
in, floats out, no torch and no MLflow. scipy and statsmodels are imported where they are used, so that the
command line, which loads every manual (and through them this module), starts without them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .facts import rng


@functools.lru_cache(maxsize=4096)  # a run's tables ask for the same few counts many times (81/81, 0/24, ...)
def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of the share ``k / n``; (nan, nan) when n == 0."""
    from scipy import stats

    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def t_interval(values: npt.ArrayLike, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` and its Student's t interval (k - 1 degrees of freedom), clipped to [0, 1];
    nan bounds for fewer than two values."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean()) if x.size else math.nan
    if x.size < 2:
        return mean, math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Odds ratio and one-sided p that group 1 (the rule) hits more often than group 2."""
    from scipy import stats

    odds, p = stats.fisher_exact(np.array([[k1, n1 - k1], [k2, n2 - k2]]), alternative="greater")
    return float(odds), float(p)


def _sorted_bands(deviations: npt.ArrayLike, coverage: float) -> tuple[npt.NDArray[np.float64], int]:
    """Sorted integer half-widths ``ceil(|d|)`` and m, the fewest values that reach ``coverage``.

    |d| <= k for integer k exactly when ceil(|d|) <= k, so the smallest band is the m-th
    smallest of these half-widths.
    """
    d = np.asarray(deviations, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("smallest_band needs at least one deviation")
    if not np.all(np.isfinite(d)):
        raise ValueError("deviations must be finite")
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    n = d.size
    # m / n >= coverage in the same float arithmetic as share_inside, not ceil(coverage * n)
    m = int(np.argmax(np.arange(1, n + 1) / n >= coverage)) + 1
    return np.sort(np.ceil(np.abs(d))), m


def smallest_band(deviations: npt.ArrayLike, coverage: float) -> int:
    """The smallest integer k >= 0 with a share of |deviation| <= k of at least ``coverage``."""
    bands, m = _sorted_bands(deviations, coverage)
    return int(bands[m - 1])


def share_inside(deviations: npt.ArrayLike, k: float) -> float:
    """The share of deviations with |deviation| <= k; nan for no deviations."""
    d = np.asarray(deviations, dtype=float).ravel()
    return float(np.mean(np.abs(d) <= k)) if d.size else math.nan


def band_with_interval(
    deviations: npt.ArrayLike, coverage: float, seed: int, n_resamples: int = 2000, level: float = 0.95
) -> tuple[int, float, float]:
    """k on the data and a percentile bootstrap interval of k over resamples of the deviations."""
    bands, m = _sorted_bands(deviations, coverage)
    n = bands.size
    idx = rng(seed, f"bootstrap:{coverage}").integers(0, n, size=(n_resamples, n))
    resampled = np.sort(bands[idx], axis=1)[:, m - 1]  # (n_resamples,) k of each resample
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return int(bands[m - 1]), float(low), float(high)


# --- Rules against controls across runs: per-run odds ratios, heterogeneity, multiplicity, power. ---


def odds_ratio_exact(k1: int, n1: int, k2: int, n2: int, level: float = 0.95) -> tuple[float, float, float]:
    """Conditional maximum-likelihood odds ratio of group 1 (the rule) against group 2 and its exact
    conditional interval (the interval that matches Fisher's test). inf where group 2 has no hit and
    group 1 some, 0 the other way round; nan with (0, inf) when nobody hits or everybody does."""
    from scipy.stats.contingency import odds_ratio

    found = odds_ratio([[k1, n1 - k1], [k2, n2 - k2]], kind="conditional")
    ci = found.confidence_interval(confidence_level=level)
    return float(found.statistic), float(ci.low), float(ci.high)


def holm(p_values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Holm-adjusted p-values; a nan p (no test) stays nan and is not counted in the family. The step-down
    adjustment as statsmodels' ``multipletests(method="holm")`` computes it, in numpy (equal to the bit:
    tests/core/test_stats.py): that call runs ``gc.collect()`` each time, half a second in a process
    holding a model, and a pipeline adjusts dozens of families."""
    p = np.asarray(p_values, dtype=float)
    flat = p.ravel()  # one family whatever the shape, as before
    out = np.full(flat.shape, math.nan)
    tested = np.flatnonzero(~np.isnan(flat))
    order = tested[np.argsort(flat[tested])]
    stepped = np.maximum.accumulate(flat[order] * np.arange(len(order), 0, -1))  # i-th smallest x (m - i + 1)
    out[order] = np.minimum(stepped, 1.0)
    return out.reshape(p.shape)


def informative(tables: np.ndarray) -> np.ndarray:
    """The strata of a (2, 2, K) stack whose two outcome columns both occur (the others carry no
    information on an odds ratio: every estimate and test leaves them out)."""
    return tables[:, :, (tables.sum(axis=0) > 0).all(axis=0)]


def breslow_day(tables: np.ndarray) -> tuple[float, float]:
    """Breslow-Day statistic with Tarone's correction and its p-value (K - 1 degrees of freedom) that the
    odds ratio is the same in every stratum of the (2, 2, K) stack. (nan, nan) with fewer than two
    informative strata, or a pooled odds ratio of 0 or infinity (every stratum then agrees at the limit)."""
    from statsmodels.stats.contingency_tables import StratifiedTable

    strata = informative(np.asarray(tables, dtype=float))
    if strata.shape[2] < 2:
        return math.nan, math.nan
    with np.errstate(divide="ignore", invalid="ignore"):
        table = StratifiedTable(strata)
        pooled = float(table.oddsratio_pooled)
    if not 0 < pooled < math.inf:
        return math.nan, math.nan
    if math.isclose(pooled, 1.0, rel_tol=1e-12):
        # statsmodels solves a quadratic in the expected count whose leading term is 1 - OR: it divides
        # by zero at OR = 1, where the expected count is simply the independence one
        return _breslow_day_at_one(strata)
    found = table.test_equal_odds(adjust=True)
    return float(found.statistic), float(found.pvalue)


def _breslow_day_at_one(strata: np.ndarray) -> tuple[float, float]:
    """Breslow-Day (Tarone) when the pooled odds ratio is 1: expected a = row total x column total / N."""
    from scipy import stats

    a = strata[0, 0]
    rows, cols, total = strata[0].sum(axis=0), strata[:, 0].sum(axis=0), strata.sum(axis=(0, 1))
    expected = rows * cols / total  # (K,)
    cells = np.stack([expected, rows - expected, cols - expected, total - rows - cols + expected])
    var = 1 / (1 / cells).sum(axis=0)
    statistic = ((a - expected) ** 2 / var).sum() - (a - expected).sum() ** 2 / var.sum()
    return float(statistic), float(stats.chi2.sf(statistic, strata.shape[2] - 1))


@functools.lru_cache(maxsize=65536)  # a simulation meets the same margins again and again
def _stratum_pmf(total: int, hits: int, n_rule: int) -> tuple[int, npt.NDArray[np.float64]]:
    """The rule's hits in one stratum under no association, its margins fixed (``total`` additions, ``hits``
    of them hit, ``n_rule`` the rule's): the hypergeometric distribution, as (lowest count, probabilities)."""
    from scipy import stats

    low, high = max(0, n_rule - (total - hits)), min(n_rule, hits)
    if low == high:  # nobody hits, everybody does, or one side is empty: one outcome only
        return low, np.ones(1)
    pmf = stats.hypergeom.pmf(np.arange(low, high + 1), total, hits, n_rule)
    pmf.setflags(write=False)  # shared by every caller through the cache
    return low, pmf


def exact_conditional(
    hits_rule: npt.ArrayLike, n_rule: npt.ArrayLike, hits_control: npt.ArrayLike, n_control: npt.ArrayLike
) -> tuple[float, float]:
    """The exact conditional test of no association across strata (the runs), every stratum's margins fixed:
    the rule's hits summed over the strata against their distribution, the convolution of each stratum's
    hypergeometric one (Mantel-Haenszel's exact test; R's ``mantelhaen.test(exact = TRUE)``). Returns the
    one-sided p that the rule hits more often and the two-sided p (the outcomes no more likely than the one
    observed, R's rule). With one stratum, Fisher's exact test; a stratum where nobody or everybody hits
    adds nothing; (1.0, 1.0) where no stratum is informative."""
    a, n1 = np.asarray(hits_rule, dtype=int), np.asarray(n_rule, dtype=int)
    total, hits = n1 + np.asarray(n_control, dtype=int), a + np.asarray(hits_control, dtype=int)
    low, dist = 0, np.ones(1)
    for stratum in zip(total.tolist(), hits.tolist(), n1.tolist(), strict=True):
        first, pmf = _stratum_pmf(*stratum)
        low, dist = low + first, np.convolve(dist, pmf)
    at = int(a.sum()) - low
    greater = float(dist[at:].sum())  # the tail summed, never 1 - the rest: small p stay exact
    two_sided = float(dist[dist <= dist[at] * (1 + 1e-7)].sum())  # R's relative tolerance for equal outcomes
    return min(greater, 1.0), min(two_sided, 1.0)


@dataclass(frozen=True)
class RunRates:
    """The observed runs of one contrast: per run, the additions of each side and the share of hits."""

    n_rule: np.ndarray  # (runs,)
    p_rule: np.ndarray
    n_control: np.ndarray
    p_control: np.ndarray


def simulated_power(
    rates: RunRates, runs: int, alpha: float, generator: np.random.Generator, studies: int = 400
) -> float:
    """The share of ``studies`` simulated studies of ``runs`` runs whose one-sided exact conditional p (the
    pooled test of ``cctk compare``: ``exact_conditional``) is below ``alpha``. Each simulated run is one of
    the observed runs drawn at random (so the seeds' spread is kept), its hits drawn from the binomial of that
    run's sizes and shares."""
    pick = generator.integers(0, len(rates.n_rule), size=(studies, runs))  # (studies, runs)
    n_rule, n_control = rates.n_rule[pick], rates.n_control[pick]
    hits_rule = generator.binomial(n_rule, rates.p_rule[pick])
    hits_control = generator.binomial(n_control, rates.p_control[pick])
    p = [exact_conditional(*study)[0] for study in zip(hits_rule, n_rule, hits_control, n_control, strict=True)]
    return float(np.mean(np.asarray(p) < alpha))


def runs_for_power(
    rates: RunRates, alpha: float, seed: int, power: float = 0.8, most: int = 50, studies: int = 400
) -> int | None:
    """The fewest runs (2..``most``: a finding across seeds needs two) whose simulated power reaches ``power``
    at level ``alpha``; None when ``most`` runs do not. Bisection, assuming power grows with the runs; each
    number of runs has its own seeded stream, so the answer does not depend on the order of the search."""

    def reaches(runs: int) -> bool:
        generator = rng(seed, f"power:{runs}")
        return simulated_power(rates, runs, alpha, generator, studies) >= power

    if not reaches(most):
        return None
    low, high = 1, most  # reaches(high) holds; one run is taken as too few, whatever its power
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high
