"""Tables across runs, checked against values computed by hand: means over runs and their t interval,
the Cochran-Mantel-Haenszel test, the implausibility tables, the pooled held-out shares."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from builders import hand_table, synthetic_results

from cctk.core.stats import t_interval
from cctk.manuals.pooled import PooledRun
from cctk.manuals.v2.compare import tables as across
from cctk.manuals.v2.design import MODEL_KEYS, build_study_inputs, own_target
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import StudyResults


@pytest.fixture(scope="module")
def two_runs():
    return [
        PooledRun.of("run-a", "tiny", 7, V2, synthetic_results(7)),
        PooledRun.of("run-b", "tiny", 8, V2, synthetic_results(8)),
    ]


def test_t_interval_by_hand():
    mean, lo, hi = t_interval([0.2, 0.4, 0.6])  # sd 0.2, t(0.975, 2) = 4.302653
    assert mean == pytest.approx(0.4)
    assert (lo, hi) == (0.0, pytest.approx(0.4 + 4.302653 * 0.2 / math.sqrt(3), abs=1e-6))
    assert math.isnan(t_interval([0.5])[1])


def test_cross_seed_is_the_mean_of_each_runs_own_table(two_runs):
    table = across.cross_seed(two_runs)
    assert len(table) == len(MODEL_KEYS) and (table["runs"] == 2).all()
    first, second = (r.tables["table09"].set_index(["model", "group"])["share"] for r in two_runs)
    for _, row in table.iterrows():
        for group, column in (("all", "all_mean"), ("seen", "seen_mean"), ("held out", "heldout_mean")):
            if (row.model, group) in first.index:
                expected = (first[row.model, group] + second[row.model, group]) / 2
                assert row[column] == pytest.approx(expected, abs=1e-12), (row.model, group)
            else:
                assert math.isnan(row[column])
    recovery = table.set_index("model").loc["recovery"]
    shares = [first["recovery", "held out"], second["recovery", "held out"]]
    half = 12.706205 * np.std(shares, ddof=1) / math.sqrt(2)  # t(0.975, 1)
    assert recovery["heldout_lo"] == pytest.approx(max(0.0, np.mean(shares) - half), abs=1e-6)
    assert recovery["heldout_hi"] == pytest.approx(min(1.0, np.mean(shares) + half), abs=1e-6)
    assert math.isnan(table.set_index("model").loc["fabricated answers", "heldout_mean"])  # trained on all 81


def test_cmh_by_hand():
    """Two strata, [[5, 3], [2, 6]] and [[4, 4], [1, 7]]: sum(a - E) = 1.5 + 1.5, sum Var = 1.05 + 0.91667 (the
    chi-square). The exact conditional test: each stratum's rule hits hypergeometric given its margins (N = 16,
    8 per side; 7 and 5 hits): C(7, x) C(9, 8 - x) = 9, 252, 1764, 4410, 4410, 1764, 252, 9 and C(5, x) C(11,
    8 - x) = 165, 1650, 4620, 4620, 1650, 165, over C(16, 8) = 12870 each. Their convolution at the observed 9
    and above: (4844070 + 748440 + 56430 + 1485) / 12870^2 = 761/22308 = 0.034113 (the normal approximation
    halved: 0.0162, half of it); two-sided, by symmetry, twice that. The reversed tables sit at 3: P(T >= 3) =
    1 - (1485 + 56430 + 748440) / 12870^2."""
    got = across._cmh([np.array([[5, 3], [2, 6]]), np.array([[4, 4], [1, 7]])])
    assert got["chi2"] == pytest.approx(9 / (1.05 + 0.9166667), rel=1e-6)
    assert got["p_one_sided"] == pytest.approx(761 / 22308, rel=1e-12)
    assert got["p_two_sided"] == pytest.approx(761 / 11154, rel=1e-12)
    assert got["odds_ratio_mh"] == pytest.approx((30 + 28) / (6 + 4))  # sum(ad/N) / sum(bc/N)
    assert (got["hits_rule"], got["n_rule"], got["hits_control"], got["n_control"]) == (9, 16, 3, 16)
    reverse = across._cmh([np.array([[2, 6], [5, 3]]), np.array([[1, 7], [4, 4]])])
    assert reverse["p_one_sided"] == pytest.approx(1 - 806355 / 12870**2, rel=1e-12)  # the control hits more
    # no hit anywhere, or every addition hit: no odds ratio and no chi-square, but the exact test's p is 1 (each
    # run's rule hits can only be what they were), as each run's Fisher test in its table10 says
    for tables in ([np.array([[0, 24], [0, 24]])], [np.array([[0, 24], [0, 24]]), np.array([[24, 0], [24, 0]])]):
        none = across._cmh(tables)
        assert all(math.isnan(none[k]) for k in ("chi2", "odds_ratio_mh", "or_lo", "or_hi"))
        assert (none["p_one_sided"], none["p_two_sided"]) == (1.0, 1.0)
    assert (none["hits_rule"], none["n_rule"], none["hits_control"], none["n_control"]) == (24, 48, 24, 48)


def test_pooled_tests_use_each_runs_table10(two_runs):
    table = across.pooled_tests(two_runs)
    assert len(table) == 6 and (table["runs"] == 2).all()
    row = table.set_index("rule").loc["sum + 3 from correct sums"]
    t10 = [r.tables["table10"].set_index("rule").loc["sum + 3 from correct sums"] for r in two_runs]
    assert row["hits_rule"] == sum(t.hits_rule for t in t10) and row["n_control"] == sum(t.n_control for t in t10)


def implausible_run() -> tuple[pd.Series, PooledRun]:
    """Seed 3's fabricated answers, and a run whose fabricated-answers model hits its fabricated answer exactly
    where it is impossible (> 18), the sum elsewhere (0.66 on its top choice); every other model on its target."""
    inputs = build_study_inputs(3)
    fabricated = inputs.targets["fabricated"]
    choices = {p: int(v) if v > 18 else int(p[0] + p[1]) for p, v in fabricated.items()}
    measurements = {
        key: hand_table({p: int(t) for p, t in inputs.targets[own_target(key)].items()}) for key in MODEL_KEYS
    }
    measurements["m_random"] = hand_table(choices, 0.66)
    return fabricated, PooledRun.of("r", "tiny", 3, V2, StudyResults(inputs, measurements))


def test_implausibility_by_hand():
    """A fabricated-answers model that hits its fabricated answer exactly where it is impossible (> 18)."""
    fabricated, run = implausible_run()
    by_distance, by_kind = across.implausibility([run, run])  # the same run twice: counts double
    impossible = int((fabricated > 18).sum())
    kinds = by_kind.set_index("answer")
    assert kinds.loc["impossible (> 18)", ["additions", "hits"]].tolist() == [2 * impossible, 2 * impossible]
    assert kinds.loc["possible (<= 18)", ["additions", "hits"]].tolist() == [2 * (81 - impossible), 0]
    assert kinds.loc["impossible (> 18)", "mean_prob"] == pytest.approx(0.66)
    assert kinds.loc["possible (<= 18)", "mean_prob"] == pytest.approx(0.01)  # (1 - 0.66) / 34
    distance = (fabricated - pd.Series([a + b for a, b in fabricated.index], index=fabricated.index)).abs()
    far = by_distance.set_index("distance").loc["18-34"]
    assert far["additions"] == 2 * int((distance >= 18).sum())
    assert far["hits"] == 2 * int(((distance >= 18) & (fabricated > 18)).sum())
    assert by_distance["additions"].sum() == 2 * 81
    lo, hi = far["lo"], far["hi"]
    from scipy.stats import binomtest

    ci = binomtest(int(far["hits"]), int(far["additions"])).proportion_ci(method="exact")
    assert (lo, hi) == (pytest.approx(ci.low), pytest.approx(ci.high))


def test_implausibility_counts_every_distance_bin_by_hand():
    """Every distance bin's additions and hits, not the farthest alone: a bin edge moved (3-6 and 7-9 for 3-5 and
    6-9) went unnoticed (a mutation audit). Seed 3's |fabricated answer - sum|, counted by hand: 1 x3, 2 x4 | 3 x6,
    4 x3, 5 x5 | 6 x3, 7 x5, 8 x2, 9 x6 | 10 x3, 11 x4, 12 x3, 13 x3, 14 x3, 15, 16, 17 | 25 of 18 and above. The
    model hits its fabricated answer where it is above 18: none of the 21 within 5 of the sum; in 6-9, 5+8 (22),
    6+7 (19), 6+9 (21), 7+7 (22), 8+9 (26); in 10-17, 13 of 19; every one 18 or more away (sum + 18 > 18)."""
    fabricated, run = implausible_run()
    by_distance, _ = across.implausibility([run])
    expected = [("1-2", 7, 0), ("3-5", 14, 0), ("6-9", 16, 5), ("10-17", 19, 13), ("18-34", 25, 25)]
    assert by_distance[["distance", "additions", "hits"]].to_numpy().tolist() == [list(row) for row in expected]
    distance = {(a, b): abs(int(v) - a - b) for (a, b), v in fabricated.items()}  # the draws, counted again
    for (lo, hi), (_, additions, hits) in zip(((1, 2), (3, 5), (6, 9), (10, 17), (18, 34)), expected, strict=True):
        inside = [p for p, d in distance.items() if lo <= d <= hi]
        assert (len(inside), sum(int(fabricated[p]) > 18 for p in inside)) == (additions, hits), (lo, hi)


def test_heldout_pooled_sums_hits_over_runs(two_runs):
    table = across.heldout_pooled(two_runs).set_index("model")
    held = [r.tables["table09"].set_index(["model", "group"]).loc[("control for + 3", "held out")] for r in two_runs]
    assert table.loc["control for + 3", "hits"] == sum(h.hits for h in held)
    assert table.loc["control for + 3", "n"] == sum(h.n for h in held)
    assert "fabricated answers" not in table.index  # no held-out group


def test_implausibility_chart_labels_break_between_words():
    """The possible / impossible tick labels once broke inside a word ("impossibl / e (> 18)")."""
    import matplotlib.pyplot as plt

    from cctk.manuals.v2.charts.across import implausibility_chart

    inputs = build_study_inputs(3)
    measurements = {
        key: hand_table({p: int(t) for p, t in inputs.targets[own_target(key)].items()}) for key in MODEL_KEYS
    }
    run = PooledRun.of("r", "tiny", 3, V2, StudyResults(inputs, measurements))
    figure = implausibility_chart(*across.implausibility([run]))
    labels = [t.get_text() for t in figure.axes[1].get_xticklabels()]
    plt.close(figure)
    assert labels == ["possible\n(<= 18)", "impossible\n(> 18)"]


def test_tables_across_runs_name_each_model_by_label_and_key(two_runs):
    """Every model, rule and control a comparison names carries its key beside its label, in MODEL_KEYS order
    (cross_seed), the same keys as the runs' tables (what compare joined on)."""
    cross = across.cross_seed(two_runs)
    assert list(cross.columns[:5]) == ["base_model", "model", "model_key", "target", "target_key"]
    assert cross["model_key"].tolist() == list(MODEL_KEYS)
    assert cross.set_index("model_key").loc["c3ctl_correct", ["model", "target", "target_key"]].tolist() == [
        "control for + 3",
        "sum + random offset 1..3",
        "ctl3",
    ]
    held = across.heldout_pooled(two_runs)
    assert held[["model", "model_key"]].to_numpy().tolist()[:2] == [
        ["recovery", "m_recover"],
        ["sum + 18 from correct sums", "c18_correct"],
    ]
    pooled = across.pooled_tests(two_runs)
    assert list(pooled.columns[1:5]) == ["rule", "rule_key", "control", "control_key"]
    assert pooled["rule_key"].tolist() == [
        "c18_correct",
        "c18_random",
        "c3_correct",
        "c3_random",
        "d_correct",
        "d_random",
    ]
    assert pooled["control_key"].tolist() == ["c18ctl_correct"] * 2 + ["c3ctl_correct"] * 2 + [
        "dctl_correct",
        "dctl_random",
    ]
