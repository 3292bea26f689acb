"""Exact and resampled intervals (manual 2.0.0, section 4.13): numbers in, numbers out.

No torch and no MLflow here: these functions take counts or arrays and return floats.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from .facts import rng


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of the share ``k / n``; (nan, nan) when n == 0."""
    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method="exact")
    return float(ci.low), float(ci.high)


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Odds ratio and one-sided p that group 1 (the rule) hits more often than group 2."""
    odds, p = stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="greater")
    return float(odds), float(p)


def _sorted_bands(deviations, coverage: float) -> tuple[np.ndarray, int]:
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


def smallest_band(deviations, coverage: float) -> int:
    """The smallest integer k >= 0 with a share of |deviation| <= k of at least ``coverage``."""
    bands, m = _sorted_bands(deviations, coverage)
    return int(bands[m - 1])


def share_inside(deviations, k: float) -> float:
    """The share of deviations with |deviation| <= k; nan for no deviations."""
    d = np.asarray(deviations, dtype=float).ravel()
    return float(np.mean(np.abs(d) <= k)) if d.size else math.nan


def band_with_interval(deviations, coverage: float, seed: int, n_resamples: int = 2000,
                       level: float = 0.95) -> tuple[int, float, float]:
    """k on the data and a percentile bootstrap interval of k over resamples of the deviations."""
    bands, m = _sorted_bands(deviations, coverage)
    n = bands.size
    idx = rng(seed, f"bootstrap:{coverage}").integers(0, n, size=(n_resamples, n))
    resampled = np.sort(bands[idx], axis=1)[:, m - 1]  # (n_resamples,) k of each resample
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(resampled, [tail, 100 - tail])
    return int(bands[m - 1]), float(low), float(high)
