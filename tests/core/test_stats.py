"""Statistics pinned to independently computed reference values (manual section 4.13)."""

import math

import numpy as np
import pytest
from scipy.stats import beta, hypergeom

from cctk.core import stats

ALPHA = 0.05


def _beta_interval(k, n, alpha=ALPHA):
    # Clopper and Pearson (1934) through beta quantiles, with the 0 and n edge cases
    low = 0.0 if k == 0 else beta.ppf(alpha / 2, k, n - k + 1)
    high = 1.0 if k == n else beta.ppf(1 - alpha / 2, k + 1, n - k)
    return low, high


@pytest.mark.parametrize(("k", "n"), [(0, 24), (1, 24), (12, 24), (23, 24), (24, 24), (3, 10)])
def test_clopper_pearson_matches_the_beta_quantiles(k, n):
    assert stats.clopper_pearson(k, n) == pytest.approx(_beta_interval(k, n), abs=1e-12)


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        # 0/24 and 24/24 have the closed form 1 - (alpha/2)^(1/n) = 0.142473598...
        (0, 24, (0.0, 0.142473598)),
        (12, 24, (0.291241780, 0.708758220)),
        (24, 24, (0.857526402, 1.0)),
    ],
)
def test_clopper_pearson_printed_decimals(k, n, expected):
    assert stats.clopper_pearson(k, n) == pytest.approx(expected, abs=1e-6)


def test_clopper_pearson_closed_form_at_the_edges():
    assert stats.clopper_pearson(0, 24)[1] == pytest.approx(1 - (ALPHA / 2) ** (1 / 24), abs=1e-12)
    assert stats.clopper_pearson(24, 24)[0] == pytest.approx((ALPHA / 2) ** (1 / 24), abs=1e-12)


def test_clopper_pearson_level_and_empty_group():
    assert stats.clopper_pearson(5, 20, level=0.9) == pytest.approx(_beta_interval(5, 20, alpha=0.1), abs=1e-12)
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


@pytest.mark.parametrize(
    ("deviations", "coverage", "k"),
    [
        ([0, 0, 0, 0], 0.9, 0),
        ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.9, 4),  # 9 of 10 within 4: exactly 0.9
        ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.91, 9),
        ([0, 1, -1, 2, -2, 3, -3, 4, -4, 9], 0.5, 2),
        ([-5, 5, -5, 5], 0.8, 5),
        ([1, 2, 3, 4, 5], 1.0, 5),
        ([1, 2, 3, 4, 5], 0.2, 1),
        ([0.5, -1.5], 1.0, 2),  # a band is an integer: |d| <= k
        ([7], 0.01, 7),
    ],
)
def test_smallest_band_on_hand_examples(deviations, coverage, k):
    assert stats.smallest_band(deviations, coverage) == k
    assert stats.share_inside(deviations, k) >= coverage
    if k > 0:
        assert stats.share_inside(deviations, k - 1) < coverage


@pytest.mark.parametrize("bad", [0, -0.1, 1.01])
def test_smallest_band_rejects_bad_coverage(bad):
    with pytest.raises(ValueError, match="coverage must be in"):
        stats.smallest_band([1, 2], bad)


def test_smallest_band_rejects_empty_input():
    with pytest.raises(ValueError, match="at least one deviation"):
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
    from cctk.core.facts import rng

    gen = rng(5, "bootstrap:0.9")
    ks = [stats.smallest_band(DEVIATIONS[gen.integers(0, 24, size=(1, 24))[0]], 0.9) for _ in range(300)]
    _, low, high = stats.band_with_interval(DEVIATIONS, 0.9, seed=5, n_resamples=300)
    assert (low, high) == tuple(np.percentile(ks, [2.5, 97.5]))


def test_stats_imports_neither_torch_nor_mlflow():
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(stats))
    names = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names
    } | {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not names & {"torch", "mlflow"}


# --- Rules against controls across runs (cctk compare's findings). ---


def test_odds_ratio_exact_is_the_conditional_estimate_and_its_exact_interval():
    from scipy.stats import nchypergeom_fisher

    odds, lo, hi = stats.odds_ratio_exact(4, 24, 3, 24)
    # the conditional MLE makes the observed 4 the mean of the noncentral hypergeometric law of the rule's
    # hits given 7 hits in 48, 24 of them the rule's; the exact bounds leave 2.5% in each tail
    assert nchypergeom_fisher.mean(48, 24, 7, odds) == pytest.approx(4, abs=1e-6)
    assert nchypergeom_fisher.sf(3, 48, 24, 7, lo) == pytest.approx(0.025, abs=1e-6)  # P(X >= 4 | lo)
    assert nchypergeom_fisher.cdf(4, 48, 24, 7, hi) == pytest.approx(0.025, abs=1e-6)  # P(X <= 4 | hi)
    odds, lo, hi = stats.odds_ratio_exact(11, 24, 0, 24)  # the control never hits: infinite, bounded below
    assert odds == math.inf and hi == math.inf and nchypergeom_fisher.sf(10, 48, 24, 11, lo) == pytest.approx(0.025)
    assert stats.odds_ratio_exact(0, 24, 5, 24)[:2] == (0.0, 0.0)
    assert math.isnan(stats.odds_ratio_exact(0, 24, 0, 24)[0])  # nobody hits: nothing to estimate


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1: 0.04, 0.09, 0.08 -> 0.09 (never below the one
    # before), 0.20
    assert stats.holm([0.01, 0.04, 0.03, 0.20]).tolist() == pytest.approx([0.04, 0.09, 0.09, 0.20])
    # a test that could not be made (nan) is not in the family: two tests, 0.01 x 2 and 0.04 x 1
    adjusted = stats.holm([0.01, math.nan, 0.04])
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.04)
    assert stats.holm([0.3, 0.6]).tolist() == [0.6, 0.6]
    assert stats.holm([math.nan, math.nan]).tolist() == pytest.approx([math.nan] * 2, nan_ok=True)


def test_holm_equals_statsmodels_to_the_bit():
    """statsmodels' own Holm on seeded families of sizes 1 to 40, with ties, zeros and ones: the same floats
    (a family per size: each call of statsmodels' runs gc.collect, most of a second in a busy test process)."""
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(7)
    for size in (1, 2, 3, 5, 13, 40):
        p = rng.choice([*rng.uniform(0, 1, size), 0.0, 0.01, 0.01, 0.5, 1.0], size)
        assert stats.holm(p).tolist() == multipletests(p, method="holm")[1].tolist()


def stack(*tables):
    return np.stack([np.array(t, dtype=float) for t in tables], axis=2)


def test_breslow_day_with_tarone_by_hand():
    """Strata [[5, 3], [2, 6]] and [[4, 4], [1, 7]] (rows rule, control; columns hit, miss), by hand.

    Mantel-Haenszel odds ratio: sum(ad/N) / sum(bc/N) = (30/16 + 28/16) / (6/16 + 4/16) = 5.8.
    Expected a under OR 5.8, the margins fixed (rows 8, 8; hits 7 and 5; N 16):
      stratum 1: a (1 + a) = 5.8 (8 - a)(7 - a)  ->  4.8 a^2 - 88 a + 324.8 = 0
                 a = (88 - sqrt(7744 - 6236.16)) / 9.6 = (88 - 38.83092) / 9.6 = 5.121779
      stratum 2: a (3 + a) = 5.8 (8 - a)(5 - a)  ->  4.8 a^2 - 78.4 a + 232 = 0
                 a = (78.4 - sqrt(6146.56 - 4454.4)) / 9.6 = (78.4 - 41.13587) / 9.6 = 3.881680
    Var(a) = 1 / (1/a + 1/b + 1/c + 1/d) at the expected cells:
      stratum 1: cells 5.121780, 2.878220, 1.878220, 6.121780 -> 1 / 1.238452 = 0.807460
      stratum 2: cells 3.881680, 4.118320, 1.118320, 6.881680 -> 1 / 1.539950 = 0.649372
    Breslow-Day: (5 - 5.121780)^2 / 0.807460 + (4 - 3.881680)^2 / 0.649372 = 0.018367 + 0.021559 = 0.039925
    Tarone's correction: (sum(a - E))^2 / sum(Var) = (-0.121780 + 0.118320)^2 / 1.456832 = 0.0000082
    statistic 0.039917 on 1 degree of freedom: p = 0.84164.
    """
    statistic, p = stats.breslow_day(stack([[5, 3], [2, 6]], [[4, 4], [1, 7]]))
    assert statistic == pytest.approx(0.039917, abs=1e-6)
    assert p == pytest.approx(0.84164, abs=1e-5)


def test_breslow_day_at_a_pooled_odds_ratio_of_one_by_hand():
    """[[6, 2], [2, 6]], [[2, 6], [6, 2]] and [[4, 4], [4, 4]]: sum(ad/N) = (36 + 4 + 16) / 16 = sum(bc/N),
    so OR = 1 and every expected cell is 8 x 8 / 16 = 4, Var = 1 / (4 x 1/4) = 1. Breslow-Day
    (6 - 4)^2 + (2 - 4)^2 + 0 = 8; Tarone's correction (2 - 2 + 0)^2 / 3 = 0. On 2 degrees of freedom
    p = exp(-8 / 2) = exp(-4). (statsmodels divides by 1 - OR here: cctk's own closed form answers.)"""
    statistic, p = stats.breslow_day(stack([[6, 2], [2, 6]], [[2, 6], [6, 2]], [[4, 4], [4, 4]]))
    assert statistic == pytest.approx(8.0) and p == pytest.approx(math.exp(-4))


def test_breslow_day_is_not_computable_without_two_informative_strata():
    assert all(math.isnan(v) for v in stats.breslow_day(stack([[5, 3], [2, 6]])))
    # the second run has no hit on either side: one informative stratum left
    assert all(math.isnan(v) for v in stats.breslow_day(stack([[5, 3], [2, 6]], [[0, 8], [0, 8]])))
    # the control never hits: pooled odds ratio infinite, every run agrees at the limit
    assert all(math.isnan(v) for v in stats.breslow_day(stack([[5, 3], [0, 8]], [[2, 6], [0, 8]])))


def test_the_exact_conditional_test_is_fishers_with_one_stratum_and_enumerates_with_more():
    """One run: Fisher's exact test, both sides (3/24 against 0/24: 0.117, the CMH normal approximation's
    0.038 a third of it). Three runs: every combination of the strata's outcomes enumerated by hand, each
    hypergeometric given its margins. A run where nobody hits adds nothing; no informative run: p 1."""
    from scipy import stats as scipy_stats

    for counts in [(3, 24, 0, 24), (5, 24, 1, 24), (0, 24, 6, 24), (12, 24, 1, 24)]:
        a, n1, c, n2 = counts
        table = [[a, n1 - a], [c, n2 - c]]
        greater, two = stats.exact_conditional([a], [n1], [c], [n2])
        assert greater == pytest.approx(scipy_stats.fisher_exact(table, alternative="greater")[1], rel=1e-12)
        assert two == pytest.approx(scipy_stats.fisher_exact(table)[1], rel=1e-12)
    assert stats.exact_conditional([3], [24], [0], [24])[0] == pytest.approx(0.1170213, rel=1e-6)
    runs = [(3, 24, 1, 24), (5, 24, 0, 24), (0, 22, 2, 23)]
    law = [
        {x: scipy_stats.hypergeom.pmf(x, n1 + n2, a + c, n1) for x in range(min(n1, a + c) + 1)}
        for a, n1, c, n2 in runs
    ]
    outcomes: dict[int, float] = {}
    for x in law[0]:
        for y in law[1]:
            for z in law[2]:
                outcomes[x + y + z] = outcomes.get(x + y + z, 0.0) + law[0][x] * law[1][y] * law[2][z]
    seen = 3 + 5 + 0
    by_hand = sum(p for t, p in outcomes.items() if t >= seen)
    two_by_hand = sum(p for p in outcomes.values() if p <= outcomes[seen] * (1 + 1e-7))
    found = stats.exact_conditional(*np.array(runs).T)
    assert found == pytest.approx((by_hand, two_by_hand), rel=1e-12)
    with_empty = stats.exact_conditional(*np.array([*runs, (0, 24, 0, 24)]).T)
    assert with_empty == pytest.approx(found, rel=1e-12)
    assert stats.exact_conditional([0, 24], [24, 24], [0, 24], [24, 24]) == (1.0, 1.0)


def test_power_of_one_stratum_by_hand():
    """One run, 24 held-out additions each side, the control never hits, the rule with probability 0.1.

    The table is [[x, 24 - x], [0, 24]]: Fisher's one-sided p is P(rule takes all x of the x hits) =
    C(24, x) / C(48, x): 0.245 at x = 2, 0.117 at x = 3, 0.055 at x = 4, 0.026 at x = 5. The test rejects at
    0.05 exactly when x >= 5, so the power is P(Binomial(24, 0.1) >= 5) = 1 - (0.07977 + 0.21271 + 0.27180 +
    0.22146 + 0.12919) = 0.08507 (the normal approximation rejected from x = 3 on: 0.44).
    """
    from scipy import stats as scipy_stats

    x = np.array([4, 5])
    p = [stats.exact_conditional([k], [24], [0], [24])[0] for k in x]
    assert p[0] > 0.05 > p[1]
    rates = stats.RunRates(np.array([24]), np.array([0.1]), np.array([24]), np.array([0.0]))
    power = stats.simulated_power(rates, 1, 0.05, np.random.default_rng(0), studies=20000)
    exact = float(scipy_stats.binom.sf(4, 24, 0.1))
    assert exact == pytest.approx(0.08507, abs=1e-5)
    assert power == pytest.approx(exact, abs=0.008)  # 4 standard errors of 20000 studies


def test_runs_for_power_bounds():
    sure = stats.RunRates(np.array([24]), np.array([1.0]), np.array([24]), np.array([0.0]))
    # 24/24 against 0/24: one run is already p about 1e-14, but a finding across seeds needs two
    assert stats.runs_for_power(sure, 0.05 / 6, seed=0) == 2
    null = stats.RunRates(np.array([24, 24]), np.array([0.2, 0.1]), np.array([24, 24]), np.array([0.2, 0.1]))
    assert stats.runs_for_power(null, 0.05, seed=0) is None  # no effect: "more than 50"
    # the answer does not depend on the search: every number of runs has its own stream
    rates = stats.RunRates(np.array([24]), np.array([0.3]), np.array([24]), np.array([0.15]))
    found = stats.runs_for_power(rates, 0.05, seed=3)
    assert found is not None and 1 < found < 50
    assert stats.simulated_power(rates, found, 0.05, stats.rng(3, f"power:{found}")) >= 0.8
    assert stats.simulated_power(rates, found - 1, 0.05, stats.rng(3, f"power:{found - 1}")) < 0.8


def test_breslow_day_leaves_out_a_stratum_nobody_hits_in():
    """A run where neither model hits carries no information: the same statistic and degrees of freedom (1, not
    2). The all-zero case alone reached only the nan path (a mutation audit: `.all` as `.any` survived)."""
    two = stats.breslow_day(stack([[5, 3], [2, 6]], [[4, 4], [1, 7]]))
    three = stats.breslow_day(stack([[5, 3], [2, 6]], [[4, 4], [1, 7]], [[0, 8], [0, 8]]))
    assert three == pytest.approx(two, rel=1e-12)
    assert three[1] == pytest.approx(0.84164, abs=1e-5)


def test_bootstrap_of_distinct_deviations_by_hand():
    """|d| = 0..23, all distinct: a resample's k is exactly its 22nd smallest value (m = 22 of 24 at coverage
    0.9), and the interval the 2.5th and 97.5th percentiles of those (5th and 95th at level 0.9). On deviations
    whose ranked values repeat, the neighbouring order statistic and percentiles coincide (a mutation audit)."""
    from cctk.core.facts import rng

    d = np.arange(24)
    ks = np.sort(d[rng(5, "bootstrap:0.9").integers(0, 24, size=(400, 24))], axis=1)[:, 21]
    _, low, high = stats.band_with_interval(d, 0.9, seed=5, n_resamples=400)
    assert (low, high) == tuple(np.percentile(ks, [2.5, 97.5]))
    _, low90, high90 = stats.band_with_interval(d, 0.9, seed=5, n_resamples=400, level=0.9)
    assert (low90, high90) == tuple(np.percentile(ks, [5, 95])) and (low90, high90) != (low, high)


def test_power_rejects_strictly_below_alpha():
    """alpha equal to the p of 5 hits of 24 against 0 of 24: the test rejects from 6 hits on, so the power at a
    rate of 0.1 is P(Bin(24, 0.1) >= 6) = 0.0277, not P(>= 5) = 0.085."""
    from scipy.stats import binom

    alpha = stats.exact_conditional([5], [24], [0], [24])[0]
    rates = stats.RunRates(np.array([24]), np.array([0.1]), np.array([24]), np.array([0.0]))
    power = stats.simulated_power(rates, 1, alpha, np.random.default_rng(0), studies=20000)
    assert power == pytest.approx(binom.sf(5, 24, 0.1), abs=0.006)
