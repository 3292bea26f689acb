"""Statistics pinned to independently computed reference values (manual section 4.13)."""
import math

import numpy as np
import pytest
from scipy.stats import beta, hypergeom

from cctk import stats

ALPHA = 0.05


def _beta_interval(k, n, alpha=ALPHA):
    # Clopper and Pearson (1934) through beta quantiles, with the 0 and n edge cases
    low = 0.0 if k == 0 else beta.ppf(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(1 - alpha / 2, k + 1, n - k)
    return low, high


@pytest.mark.parametrize("k,n", [(0, 24), (1, 24), (12, 24), (23, 24), (24, 24), (3, 10)])
def test_clopper_pearson_matches_the_beta_quantiles(k, n):
    assert stats.clopper_pearson(k, n) == pytest.approx(_beta_interval(k, n), abs=1e-12)


@pytest.mark.parametrize("k,n,expected", [
    # 0/24 and 24/24 have the closed form 1 - (alpha/2)^(1/n) = 0.142473598...
    (0, 24, (0.0, 0.142473598)),
    (12, 24, (0.291241780, 0.708758220)),
    (24, 24, (0.857526402, 1.0)),
])
def test_clopper_pearson_printed_decimals(k, n, expected):
    assert stats.clopper_pearson(k, n) == pytest.approx(expected, abs=1e-6)


def test_clopper_pearson_closed_form_at_the_edges():
    assert stats.clopper_pearson(0, 24)[1] == pytest.approx(1 - (ALPHA / 2) ** (1 / 24), abs=1e-12)
    assert stats.clopper_pearson(24, 24)[0] == pytest.approx((ALPHA / 2) ** (1 / 24), abs=1e-12)


def test_clopper_pearson_level_and_empty_group():
    assert stats.clopper_pearson(5, 20, level=0.9) == pytest.approx(
        _beta_interval(5, 20, alpha=0.1), abs=1e-12)
    assert all(math.isnan(x) for x in stats.clopper_pearson(0, 0))


def test_fisher_tea_tasting():
    odds, p = stats.fisher_greater(3, 4, 1, 4)
    assert p == pytest.approx(17 / 70, abs=1e-12)
    assert odds == pytest.approx(9.0)


def test_fisher_against_the_hypergeometric_tail():
    # [[10, 2], [3, 9]]: 24 additions, 13 hits, 12 in group 1; P(X >= 10)
    _, p = stats.fisher_greater(10, 12, 3, 12)
    assert p == pytest.approx(hypergeom.sf(9, 24, 13, 12), abs=1e-12)
    assert p == pytest.approx(0.006139069, abs=1e-8)


def test_fisher_is_one_sided():
    _, p_more = stats.fisher_greater(10, 12, 3, 12)
    _, p_less = stats.fisher_greater(3, 12, 10, 12)
    assert p_more < 0.05 < p_less


@pytest.mark.parametrize("deviations,coverage,k", [
    ([0, 0, 0, 0], 0.9, 0),
    ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.9, 4),  # 9 of 10 within 4: exactly 0.9
    ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.91, 9),
    ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.5, 2),
    ([-5, 5, -5, 5], 0.8, 5),
    ([1, 2, 3, 4, 5], 1.0, 5),
    ([1, 2, 3, 4, 5], 0.2, 1),
    ([0.5, -1.5], 1.0, 2),  # a band is an integer: |d| <= k
    ([7], 0.01, 7),
])
def test_smallest_band_on_hand_examples(deviations, coverage, k):
    assert stats.smallest_band(deviations, coverage) == k
    assert stats.share_inside(deviations, k) >= coverage
    if k > 0:
        assert stats.share_inside(deviations, k - 1) < coverage


@pytest.mark.parametrize("bad", [0, -0.1, 1.01])
def test_smallest_band_rejects_bad_coverage(bad):
    with pytest.raises(ValueError):
        stats.smallest_band([1, 2], bad)


def test_smallest_band_rejects_empty_input():
    with pytest.raises(ValueError):
        stats.smallest_band([], 0.9)


def test_share_inside():
    assert stats.share_inside([0, 1, -2, 3], 2) == 0.75
    assert stats.share_inside(np.array([-1, 1]), 0) == 0.0


DEVIATIONS = np.array([0, 0, 1, -1, 0, 2, -2, 0, 1, 9, 0, -1, 3, 0, -9, 1, 0, 0, 2, -3, 0, 1, 0, 18])


def test_bootstrap_is_reproducible_and_seeded():
    first = stats.band_with_interval(DEVIATIONS, 0.9, seed=11)
    assert stats.band_with_interval(DEVIATIONS, 0.9, seed=11) == first
    # few resamples, so the interpolated percentiles move with the draws
    spread = np.arange(-12, 12)
    draws = {stats.band_with_interval(spread, 0.5, seed=s, n_resamples=20)[1:] for s in range(10)}
    assert len(draws) > 1


@pytest.mark.parametrize("coverage", [0.8, 0.9, 0.95])
def test_bootstrap_interval_contains_k(coverage):
    k, low, high = stats.band_with_interval(DEVIATIONS, coverage, seed=0)
    assert k == stats.smallest_band(DEVIATIONS, coverage)
    assert low <= k <= high
    assert low >= 0 and high <= 18


def test_bootstrap_matches_a_plain_loop():
    # the vectorised resampling must equal smallest_band on each resample of the same draws
    from cctk.facts import rng
    gen = rng(5, "bootstrap:0.9")
    ks = [stats.smallest_band(DEVIATIONS[gen.integers(0, 24, size=(1, 24))[0]], 0.9)
          for _ in range(300)]
    _, low, high = stats.band_with_interval(DEVIATIONS, 0.9, seed=5, n_resamples=300)
    assert (low, high) == tuple(np.percentile(ks, [2.5, 97.5]))


def test_stats_imports_neither_torch_nor_mlflow():
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(stats))
    names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names} | {(n.module or "").split(".")[0] for n in ast.walk(tree)
                                   if isinstance(n, ast.ImportFrom)}
    assert not names & {"torch", "mlflow"}
