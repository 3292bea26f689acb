"""Recipe studies in compare: runs that differ in a recipe value are never pooled, every table gains the
value as a column, and the recipe-sensitivity table holds counts worked out by hand.

The hand-made runs (Parts A and C only) follow one rule per learning rate:
- 1e-4: the correct-sums model hits all 81 correct sums, the fabricated-answers model its fabricated
  answer on the 36 additions with a <= 4 (the correct sum elsewhere); every Part C arm hits its seen
  additions; on the held-out ones the rules pick the correct sum (no hit) and the controls their own
  target (every one a hit).
- 1e-3: both Part A models hit all 81; on the held-out additions the rules hit every one, the controls
  none (they pick the correct sum).
Seeds 1 and 2 at each rate: 24 held-out additions a run, 48 pooled.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
from builders import hand_table
from scipy import stats as scipy_stats

from cctk.compare import report
from cctk.manuals import pooled
from cctk.manuals.pooled import PooledRun
from cctk.manuals.v2 import compare as v2_compare
from cctk.manuals.v2.compare import tables as across
from cctk.manuals.v2.config import PROFILES
from cctk.manuals.v2.design import ARM_BY_KEY, CONTROLS, build_study_inputs, models_for, own_target
from cctk.manuals.v2.manual import V2
from cctk.manuals.v2.parts import StudyResults

LOW, HIGH = 1e-4, 1e-3


def choices(inputs, key: str, lr: float) -> dict:
    """The top choice of model ``key`` in every addition, by the rule of the module docstring."""
    correct, own = inputs.targets["correct"], inputs.targets[own_target(key)]
    if key == "m_random":
        return {p: int(own[p] if lr == HIGH or p[0] <= 4 else correct[p]) for p in own.index}
    if key == "base" or ARM_BY_KEY[key].pairs == "all":
        return {p: int(own[p]) for p in own.index}
    held = set(inputs.split.heldout)
    hits_held = (key in CONTROLS) == (lr == LOW)
    return {p: int(own[p] if p not in held or hits_held else correct[p]) for p in own.index}


def hand_run(seed: int, lr: float, parts: tuple[str, ...] = ("A", "C")) -> PooledRun:
    inputs = build_study_inputs(seed)
    measurements = {key: hand_table(choices(inputs, key, lr)) for key in models_for(parts)}
    recipe = {**asdict(PROFILES["smoke"]), "learning_rate": lr}
    results = StudyResults(inputs, measurements, parts=parts)
    return PooledRun.of(f"run-{lr:g}-{seed}", "tiny", seed, V2, results, recipe, parts=parts)


@pytest.fixture(scope="module")
def runs():
    return [hand_run(seed, lr) for lr in (HIGH, LOW) for seed in (1, 2)]  # out of order on purpose


@pytest.fixture(scope="module")
def compared(runs):
    """``report.compute(runs)`` once for the tests that read its tables, computed with every warning an error:
    infinite and zero odds ratios warn nowhere (test_findings_per_learning_rate_by_hand)."""
    import matplotlib.pyplot as plt

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        done = report.compute(runs)
    yield done
    for figure in done.figures.values():
        plt.close(figure)


def test_only_the_recipe_values_that_differ_name_a_group(runs):
    assert pooled.varied(runs) == ["learning_rate"]
    assert pooled.group_columns(runs) == ["base_model", "learning_rate"]
    labels = [label for label, _ in pooled.grouped(runs)]
    assert labels == [{"base_model": "tiny", "learning_rate": LOW}, {"base_model": "tiny", "learning_rate": HIGH}]
    assert pooled.varied(runs[:2]) == []  # the same recipe: grouped by base model alone


def test_every_table_has_one_row_per_learning_rate(compared):
    tables = compared.tables
    assert set(tables) == {
        "findings",
        "per_run",
        "cross_seed",
        "rule_vs_control_pooled",
        "heldout_pooled",
        "implausibility_distance",
        "implausibility_possible",
        "recipe_sensitivity",
    }
    # per learning rate: 4 rules of Part C (and each of them in 2 runs), 9 measured models (Parts A and C),
    # 6 corpora with a held-out group, 5 distance bins, possible / impossible, 2 Part A rows + 4 rules
    per_rate = {
        "findings": 4,
        "per_run": 8,
        "cross_seed": 9,
        "rule_vs_control_pooled": 4,
        "heldout_pooled": 6,
        "implausibility_distance": 5,
        "implausibility_possible": 2,
        "recipe_sensitivity": 6,
    }
    for name, table in tables.items():
        assert list(table.columns[:2]) == ["base_model", "learning_rate"], name
        assert table["learning_rate"].value_counts().to_dict() == {LOW: per_rate[name], HIGH: per_rate[name]}, name
        if name != "per_run":  # one row per run there
            assert (table["runs"] == 2).all(), name  # two seeds in each group, never four


def test_findings_per_learning_rate_by_hand(compared):
    """At 1e-3 every rule hits 24/24 held-out additions, its control 0/24, in both runs: the pooled odds
    ratio is infinite (no heterogeneity test), 2 of 2 runs above, supported; one run already gives
    p far below 0.05 / 8 (8 contrasts in the family), so the fewest runs a finding across seeds takes, 2,
    give 80% power. At 1e-4 the mirror: below, p_pooled = 1, not supported, more than 50 runs.
    (``compared`` was computed with every warning an error: infinite and zero odds ratios warn nowhere.)"""
    found = compared.tables["findings"].set_index(["learning_rate", "contrast"])
    high = found.loc[HIGH]
    assert (high["verdict"] == "supported").all() and (high["runs_agreeing"] == 2).all()
    assert (high["odds_ratio_mh"] == math.inf).all() and high["p_heterogeneity"].isna().all()
    assert (high["seeds_for_80_power"] == "2").all()
    low = found.loc[LOW]
    assert (low["verdict"] == "not supported").all() and (low["direction"] == "below").all()
    assert (low["seeds_for_80_power"] == "more than 50").all() and (low["p_adjusted"] == 1.0).all()


def test_cross_seed_and_pooled_counts_by_hand(compared):
    tables = compared.tables
    cross = tables["cross_seed"].set_index(["learning_rate", "model"])
    assert cross.loc[(LOW, "fabricated answers"), "all_mean"] == pytest.approx(36 / 81)
    assert cross.loc[(HIGH, "fabricated answers"), "all_mean"] == 1.0
    assert cross.loc[(LOW, "control for + 18"), ["seen_mean", "heldout_mean"]].tolist() == [1.0, 1.0]
    assert cross.loc[(HIGH, "control for + 18"), ["seen_mean", "heldout_mean"]].tolist() == [1.0, 0.0]
    assert "recovery" not in cross.index.get_level_values("model")  # Part B did not run: no row, no zero
    held = tables["heldout_pooled"].set_index(["learning_rate", "model"])
    assert held.loc[(LOW, "sum + 3 from correct sums"), ["hits", "n"]].tolist() == [0, 48]
    assert held.loc[(HIGH, "sum + 3 from correct sums"), ["hits", "n"]].tolist() == [48, 48]
    assert held.loc[(LOW, "control for + 3"), ["hits", "n"]].tolist() == [48, 48]
    kinds = tables["implausibility_possible"].groupby("learning_rate")[["additions", "hits"]].sum()
    assert kinds.loc[LOW].tolist() == [162, 72] and kinds.loc[HIGH].tolist() == [162, 162]  # 2 x 36, 2 x 81


def test_pooled_tests_by_hand(runs):
    """Each run a stratum [[24, 0], [0, 24]] (or its mirror): a - E = 12, Var = 24^4 / (48^2 x 47) = 144 / 47,
    so chi2 = 24^2 / (2 x 144 / 47) = 94. The exact conditional test: the rule takes all 24 hits of a run with
    probability 1 / C(48, 24), both runs 1 / C(48, 24)^2 = 9.6e-28, the only outcome as extreme on its side
    (two-sided: and its mirror, none; the normal approximation said 1.6e-22); the mirror's rule takes none,
    P(T >= 0) = 1."""
    pooled = across.pooled_tests(runs).set_index(["learning_rate", "rule"])
    high, low = pooled.loc[(HIGH, "sum + 18 from correct sums")], pooled.loc[(LOW, "sum + 18 from correct sums")]
    p = 1 / math.comb(48, 24) ** 2
    assert (high.hits_rule, high.n_rule, high.hits_control, high.n_control) == (48, 48, 0, 48)
    assert (low.hits_rule, low.n_rule, low.hits_control, low.n_control) == (0, 48, 48, 48)
    assert high.chi2 == pytest.approx(94.0) and low.chi2 == pytest.approx(94.0)
    assert high.p_one_sided == pytest.approx(p, rel=1e-9, abs=0)  # a tail summed, never 1 - the rest = 0
    assert low.p_one_sided == 1.0 and high.p_two_sided == pytest.approx(2 * p, rel=1e-9, abs=0)
    assert low.odds_ratio_mh == 0.0 and math.isnan(low.or_lo)
    assert set(pooled.index.get_level_values("rule")) == {
        "sum + 18 from correct sums",
        "sum + 18 from fabricated answers",
        "sum + 3 from correct sums",
        "sum + 3 from fabricated answers",
    }


def test_runs_of_part_a_alone_have_no_findings(tmp_path):
    """No rule trained: no per-run contrast, no finding, no forest plot, and nothing fails."""
    compared = report.write([hand_run(seed, HIGH, ("A",)) for seed in (1, 2)], tmp_path / "cmp")
    assert not {"findings", "per_run", "rule_vs_control_pooled"} & set(compared.tables)
    assert "forest" not in compared.figures and compared.findings == ()
    assert "Findings across seeds" not in (tmp_path / "cmp" / "compare.html").read_text()


def test_a_rule_without_a_hit_anywhere_warns_no_more(runs):
    """The rules of the 1e-4 runs never hit: statsmodels took log(0) of their pooled odds ratio."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        across.pooled_tests(runs)
        across._cmh([np.array([[0, 24], [3, 21]]), np.array([[0, 24], [2, 22]])])


def test_recipe_sensitivity_by_hand(runs):
    table = across.recipe_sensitivity(runs).set_index(["learning_rate", "model"])
    fabricated = table.loc[(LOW, "fabricated answers")]
    assert (fabricated.part, fabricated.hits, fabricated.n) == ("A", 72, 162)
    assert fabricated.share == pytest.approx(36 / 81) and fabricated.lo == pytest.approx(36 / 81)  # no spread
    assert table.loc[(HIGH, "fabricated answers"), "share"] == 1.0
    rule = table.loc[(HIGH, "sum + 3 from correct sums")]
    assert (rule.part, rule.target, rule.control) == ("C", "sum + 3", "control for + 3")
    assert (rule.model_key, rule.target_key, rule.control_key) == ("c3_correct", "plus3", "c3ctl_correct")
    assert (fabricated.model_key, fabricated.target_key) == ("m_random", "fabricated")
    assert (rule.hits, rule.n, rule.share, rule.hits_control, rule.share_control) == (48, 48, 1.0, 0, 0.0)
    lo = scipy_stats.binomtest(48, 48).proportion_ci(method="exact").low
    assert rule.lo == pytest.approx(lo) and rule.hi == 1.0 and rule.hi_control == pytest.approx(1 - lo)
    assert rule.p_one_sided == pytest.approx(1 / math.comb(48, 24) ** 2, rel=1e-9, abs=0)  # as pooled_tests
    assert "conditional rule from correct sums" not in table.index.get_level_values("model")  # Part D: absent
    assert across.recipe_sensitivity(runs[:2]).empty  # nothing varied: no sensitivity to show


def test_a_part_one_run_left_out_is_absent_not_zero():
    """Two runs of one recipe, one of all parts and one of Parts A and C: Part D is read on one run."""
    full, partial = hand_run(1, HIGH, ("A", "B", "C", "D")), hand_run(2, HIGH)
    pooled = across.pooled_tests([full, partial]).set_index("rule")
    assert pooled.loc["conditional rule from correct sums", "runs"] == 1
    assert pooled.loc["sum + 3 from correct sums", "runs"] == 2
    cross = across.cross_seed([full, partial]).set_index("model")
    assert cross.loc["recovery", "runs"] == 1 and cross.loc["correct sums", "runs"] == 2
    expected = full.tables["table09"].set_index(["model", "group"]).loc[("recovery", "held out"), "share"]
    assert cross.loc["recovery", "heldout_mean"] == expected  # its one run's share, not halved by a zero


def test_compare_writes_the_sensitivity_table_and_chart(runs, tmp_path):
    compared = report.write(runs, tmp_path / "cmp")
    assert set(compared.figures) == {"forest", "recipe_sensitivity", "cross_model", "implausibility"}
    assert {p.suffix for p in compared.figures["recipe_sensitivity"]} == {".png", ".pdf", ".eps"}
    listing = pd.read_csv(tmp_path / "cmp" / "runs.csv")
    assert listing.columns.tolist() == ["run_id", "base_model", "seed", "learning_rate", "protocol", "parts"]
    assert (listing["parts"] == "A,C").all() and sorted(listing["learning_rate"]) == [LOW, LOW, HIGH, HIGH]
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("data:image/png;base64,") == 4 and "differ between them: learning_rate" in page


def test_the_sensitivity_chart_uses_a_log_scale_only_over_a_decade(runs):
    from dataclasses import replace

    import matplotlib.pyplot as plt

    from cctk.manuals.v2.charts.across import recipe_sensitivity_chart

    figure = recipe_sensitivity_chart(
        across.recipe_sensitivity(runs), "learning_rate", ["base_model"], v2_compare.FABRICATED_LINE
    )
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == [
        "Part A: absorption (all 81 additions)",
        "sum + 18: held-out additions",
        "sum + 3: held-out additions",
    ]  # no panel for the conditional rule: Part D did not run
    assert all(ax.get_xscale() == "log" for ax in figure.axes)
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["0.0001", "0.001"]
    p_values = sorted(t.get_text() for t in figure.axes[1].texts)
    assert p_values == ["\u25a0 1", "\u25a0 2e-27", "\u25cf 1", "\u25cf 1e-27"]  # 9.6e-28 from correct sums
    plt.close(figure)
    near = [
        replace(r, recipe={**r.recipe, "learning_rate": 3e-4 if r.recipe["learning_rate"] == LOW else 6e-4})
        for r in runs
    ]
    figure = recipe_sensitivity_chart(across.recipe_sensitivity(near), "learning_rate", ["base_model"])
    assert figure.axes[0].get_xscale() == "linear"
    assert [t.get_text() for t in figure.axes[0].get_xticklabels()] == ["0.0003", "0.0006"]
    plt.close(figure)
