"""Findings across seeds on hand-made runs: per-run rows, k of n, Holm over the family, each verdict and
its sentence, the pooled table's new columns, the forest plot and the files compare writes.

Three runs (seeds 1, 2, 3), 24 held-out additions on each side of every contrast; (rule hits, control
hits) per seed:

    sum + 18 from correct sums           (10, 1) (8, 0) (9, 2)    every run above: supported
    sum + 3 from correct sums            (20, 1) (2, 3) (18, 2)   2 of 3 above, but heterogeneous: inconsistent
    sum + 3 from fabricated answers      (14, 0) (1, 3) (0, 2)    pooled above, 1 of 3 agrees: inconsistent
    conditional rule from correct sums   (3, 2) (4, 3) (2, 2)     no pooled effect: not supported
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import pytest
from builders import synthetic_results
from scipy.stats import beta, hypergeom

from cctk.compare import report
from cctk.manuals.pooled import PooledRun
from cctk.manuals.v2.compare import findings as ev
from cctk.manuals.v2.compare.tables import _cmh
from cctk.manuals.v2.manual import V2

N = 24
DESIGN = {
    "sum + 18 from correct sums": ("control for + 18", [(10, 1), (8, 0), (9, 2)]),
    "sum + 3 from correct sums": ("control for + 3", [(20, 1), (2, 3), (18, 2)]),
    "sum + 3 from fabricated answers": ("control for + 3", [(14, 0), (1, 3), (0, 2)]),
    "conditional rule from correct sums": (
        "control for the conditional rule from correct sums",
        [(3, 2), (4, 3), (2, 2)],
    ),
}
SEEDS = (1, 2, 3)
KEY = {
    "sum + 18 from correct sums": "c18_correct",
    "control for + 18": "c18ctl_correct",
    "sum + 3 from correct sums": "c3_correct",
    "sum + 3 from fabricated answers": "c3_random",
    "control for + 3": "c3ctl_correct",
    "conditional rule from correct sums": "d_correct",
    "control for the conditional rule from correct sums": "dctl_correct",
}  # what compare joins on
SUPPORTED, HETEROGENEOUS, DISAGREEING, NULL = (f"{rule} vs {control}" for rule, (control, _) in DESIGN.items())


def hand_runs() -> list[PooledRun]:
    """Runs that carry only their table10 (all that the findings read)."""
    runs = []
    for i, seed in enumerate(SEEDS):
        table10 = pd.DataFrame(
            [
                {
                    "rule": rule,
                    "rule_key": KEY[rule],
                    "control": control,
                    "control_key": KEY[control],
                    "hits_rule": counts[i][0],
                    "n_rule": N,
                    "hits_control": counts[i][1],
                    "n_control": N,
                }
                for rule, (control, counts) in DESIGN.items()
            ]
        )
        runs.append(PooledRun(f"run-{seed}", "tiny", seed, V2, None, {"table10": table10}))
    return runs


@pytest.fixture(scope="module")
def found():
    contrasts = ev.contrasts(hand_runs())
    return contrasts, {f.contrast: f for f in ev.findings(contrasts)}


def fisher(k1: int, k2: int) -> float:
    """One-sided Fisher p: P(X >= k1), X hypergeometric (48 additions, k1 + k2 hits, 24 of them the rule's)."""
    return hypergeom.sf(k1 - 1, 2 * N, k1 + k2, N)


def test_per_run_rows_by_hand(found):
    contrasts, _ = found
    table = ev.per_run(contrasts)
    assert len(table) == 12 and list(table.columns[:6]) == [
        "base_model",
        "contrast",
        "rule",
        "rule_key",
        "control",
        "control_key",
    ]
    for rule, (control, counts) in DESIGN.items():
        rows = table[table["rule"] == rule]
        assert rows["seed"].tolist() == list(SEEDS) and (rows["control"] == control).all()
        assert (rows["rule_key"] == KEY[rule]).all() and (rows["control_key"] == KEY[control]).all()
        assert list(zip(rows["hits_rule"], rows["hits_control"], strict=True)) == counts
        assert (rows["n_rule"] == N).all() and (rows["n_control"] == N).all()
        assert rows["p_one_sided"].tolist() == pytest.approx([fisher(*c) for c in counts], rel=1e-9)
        for side, hits in (("rule", [r for r, _ in counts]), ("control", [k for _, k in counts])):  # SPEC 3
            lo = [beta.ppf(0.025, h, N - h + 1) if h else 0.0 for h in hits]  # the exact bounds by definition
            hi = [beta.ppf(0.975, h + 1, N - h) if h < N else 1.0 for h in hits]
            assert rows[f"lo_{side}"].tolist() == pytest.approx(lo, abs=1e-9)
            assert rows[f"hi_{side}"].tolist() == pytest.approx(hi, abs=1e-9)
    directions = table.set_index(["rule", "seed"])["direction"]
    assert directions["sum + 3 from fabricated answers"].tolist() == ["above", "below", "below"]
    assert directions["conditional rule from correct sums"].tolist() == ["above", "above", "equal"]
    # 8/24 against 0/24: the control never hits, the odds ratio is infinite, its interval bounded below
    infinite = table.set_index(["rule", "seed"]).loc[("sum + 18 from correct sums", 2)]
    assert infinite["odds_ratio"] == math.inf and infinite["or_hi"] == math.inf and infinite["or_lo"] > 1
    nothing = table.set_index(["rule", "seed"]).loc[("sum + 3 from fabricated answers", 3)]  # 0/24 vs 2/24
    assert (nothing["odds_ratio"], nothing["or_lo"]) == (0.0, 0.0)


def test_per_run_holm_is_within_each_run(found):
    """Seed 1's four Fisher p sorted: sum + 3 (20 vs 1), sum + 3 fabricated (14 vs 0), sum + 18 (10 vs 1),
    conditional (3 vs 2): times 4, 3, 2, 1, each never below the one before."""
    table = ev.per_run(found[0])
    first = table[table["seed"] == 1].set_index("rule")
    p = [fisher(20, 1), fisher(14, 0), fisher(10, 1), fisher(3, 2)]
    assert p == sorted(p)
    expected = [
        4 * p[0],
        max(4 * p[0], 3 * p[1]),
        max(4 * p[0], 3 * p[1], 2 * p[2]),
        max(4 * p[0], 3 * p[1], 2 * p[2], p[3]),
    ]
    order = [
        "sum + 3 from correct sums",
        "sum + 3 from fabricated answers",
        "sum + 18 from correct sums",
        "conditional rule from correct sums",
    ]
    assert first.loc[order, "p_adjusted"].tolist() == pytest.approx(expected, rel=1e-9)


def test_k_of_n_by_hand(found):
    """Pooled direction: the sign of sum((ad - bc) / N) over the runs. sum + 3 from fabricated answers:
    (14 x 24 - 10 x 0) / 48 = 7, (1 x 21 - 23 x 3) / 48 = -1, (0 x 22 - 24 x 2) / 48 = -1: sum 5, above;
    only seed 1 is above."""
    _, by = found
    assert [
        (by[c].direction, by[c].runs_agreeing, by[c].runs) for c in (SUPPORTED, HETEROGENEOUS, DISAGREEING, NULL)
    ] == [("above", 3, 3), ("above", 2, 3), ("above", 1, 3), ("above", 2, 3)]


def test_pooled_counts_and_holm_over_the_family_by_hand(found):
    _, by = found
    assert (by[SUPPORTED].hits_rule, by[SUPPORTED].n_rule, by[SUPPORTED].hits_control) == (27, 72, 3)
    # each pooled share with its exact interval (SPEC 3: every share of hits, in every table)
    assert (by[SUPPORTED].lo_rule, by[SUPPORTED].hi_rule) == pytest.approx(
        (beta.ppf(0.025, 27, 46), beta.ppf(0.975, 28, 45)), abs=1e-9
    )
    assert by[SUPPORTED].lo_control == pytest.approx(beta.ppf(0.025, 3, 70), abs=1e-9)
    pooled = {
        c: _cmh([np.array([[r, N - r], [k, N - k]], dtype=float) for r, k in counts])["p_one_sided"]
        for c, (_, counts) in zip(by, DESIGN.values(), strict=True)
    }
    assert {c: f.p_pooled for c, f in by.items()} == pytest.approx(pooled)
    # sorted: heterogeneous (4e-11) < supported (4e-7) < disagreeing (0.011) < null (0.40); times 4, 3, 2, 1
    p = [pooled[c] for c in (HETEROGENEOUS, SUPPORTED, DISAGREEING, NULL)]
    assert p == sorted(p)
    expected = [4 * p[0], 3 * p[1], 2 * p[2], p[3]]  # already increasing: no step is lifted
    assert expected == sorted(expected)
    got = [by[c].p_adjusted for c in (HETEROGENEOUS, SUPPORTED, DISAGREEING, NULL)]
    assert got == pytest.approx(expected, rel=1e-9)
    # 2 x the exact conditional p 0.0106501 (tests/core/test_stats.py enumerates such a test by hand)
    assert by[DISAGREEING].p_adjusted == pytest.approx(0.0213003, rel=1e-5)


def test_each_verdict(found):
    _, by = found
    assert by[SUPPORTED].p_heterogeneity > 0.05 and by[HETEROGENEOUS].p_heterogeneity < 0.05
    assert {c: f.verdict for c, f in by.items()} == {
        SUPPORTED: "supported",
        HETEROGENEOUS: "inconsistent",
        DISAGREEING: "inconsistent",
        NULL: "not supported",
    }
    assert by[SUPPORTED].seeds_for_80_power <= 3 and by[NULL].seeds_for_80_power is None


@pytest.mark.parametrize(
    ("p_adjusted", "p_het", "runs", "agreeing", "expected"),
    [
        (0.01, 0.50, 3, 3, "supported"),
        (0.01, math.nan, 2, 2, "supported"),  # heterogeneity not computable (an infinite pooled odds ratio)
        (0.01, 0.01, 3, 3, "inconsistent"),  # pooled effect, heterogeneous runs
        (0.01, 0.50, 3, 1, "inconsistent"),  # 1 of 3 is fewer than two thirds
        (0.01, 0.50, 5, 3, "inconsistent"),  # 3 of 5 too
        (0.01, 0.50, 3, 2, "supported"),  # 2 of 3 is two thirds
        (0.20, 0.50, 5, 3, "not supported"),  # runs that scatter around no pooled effect
        (0.20, 0.01, 3, 3, "not supported"),  # heterogeneous but no pooled effect
        (0.20, 0.50, 3, 3, "not supported"),
        (0.01, math.nan, 1, 1, "not supported"),  # one run shows nothing across seeds
        (math.nan, math.nan, 3, 3, "not supported"),  # no hit anywhere: no test
    ],
)
def test_verdict_rule(p_adjusted, p_het, runs, agreeing, expected):
    assert ev.verdict(p_adjusted, p_het, runs, agreeing) == expected


def test_sentences_carry_the_numbers(found):
    _, by = found
    supported = ev.sentence(by[SUPPORTED])
    assert supported.startswith("sum + 18 from correct sums vs control for + 18 (base model tiny): SUPPORTED:")
    assert "hit 27/72 against 3/72 over 3 runs" in supported and "holds in 3 of 3 runs" in supported
    assert f"Holm-adjusted {by[SUPPORTED].p_adjusted:.2g}" in supported
    assert f"odds ratio {by[SUPPORTED].odds_ratio_mh:.3g}" in supported
    assert "INCONSISTENT: the runs' odds ratios differ (Breslow-Day p = " in ev.sentence(by[HETEROGENEOUS])
    assert "INCONSISTENT: only 1 of 3 runs point the way of the pooled estimate" in ev.sentence(by[DISAGREEING])
    null = ev.sentence(by[NULL])
    assert "NOT SUPPORTED: no pooled effect at the corrected level (Holm-adjusted p = 0.4)" in null
    assert "hit 9/72 against 7/72" in null and null.endswith("runs for 80% power: more than 50.")


def test_findings_table_has_the_names_scripts_read(found):
    table = ev.findings_table(list(found[1].values()))
    for column in (
        "contrast",
        "verdict",
        "runs",
        "runs_agreeing",
        "p_pooled",
        "p_adjusted",
        "p_heterogeneity",
        "odds_ratio_mh",
        "or_lo",
        "or_hi",
        "seeds_for_80_power",
    ):
        assert column in table.columns, column
    assert table["base_model"].tolist() == ["tiny"] * 4
    assert list(table.columns[:4]) == ["base_model", "contrast", "rule_key", "control_key"]
    assert table[["rule_key", "control_key"]].to_numpy().tolist() == [[KEY[r], KEY[c]] for r, (c, _) in DESIGN.items()]
    assert table.set_index("contrast").loc[NULL, "seeds_for_80_power"] == "more than 50"


def test_pooled_table_gains_holm_agreement_and_heterogeneity():
    tables = report.compute(hand_runs_with_results()).tables
    pooled = tables["rule_vs_control_pooled"]
    found = tables["findings"]
    assert list(pooled.columns).index("p_adjusted") == list(pooled.columns).index("p_one_sided") + 1
    assert pooled["p_adjusted"].tolist() == pytest.approx(found["p_adjusted"].tolist())
    assert pooled["p_heterogeneity"].tolist() == pytest.approx(found["p_heterogeneity"].tolist(), nan_ok=True)
    assert (pooled["runs_agreeing"] == found["runs_agreeing"]).all()


def hand_runs_with_results() -> list[PooledRun]:
    return [PooledRun.of(f"run-{seed}", "tiny", seed, V2, synthetic_results(seed)) for seed in (7, 8, 9)]


def test_forest_draws_every_run_and_marks_infinity(found):
    import matplotlib.pyplot as plt

    from cctk.manuals.v2.charts.forest import forest_chart

    contrasts, by = found
    figure = forest_chart(ev.per_run(contrasts), ev.findings_table(list(by.values())))
    panels = list(figure.axes)
    assert len(panels) == 4
    assert [ax.get_title(loc="left").splitlines()[-1] for ax in panels] == [
        "supported: holds in 3 of 3 runs",
        "inconsistent: holds in 2 of 3 runs",
        "inconsistent: holds in 1 of 3 runs",
        "not supported: holds in 2 of 3 runs",
    ]
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["seed 1", "seed 2", "seed 3", "pooled (MH)"]
    assert panels[0].get_xscale() == "log"
    assert "\u221e" in [t.get_text() for t in panels[0].texts]  # 8/24 against 0/24
    assert len(panels[0].patches) == 1  # the pooled diamond
    plt.close(figure)


def test_compare_writes_findings_per_run_and_the_forest_first(tmp_path):
    compared = report.write(hand_runs_with_results(), tmp_path)
    findings = pd.read_csv(tmp_path / "tables" / "findings" / "findings.csv")
    per_run = pd.read_csv(tmp_path / "tables" / "per_run" / "per_run.csv")
    assert len(findings) == 6 and len(per_run) == 18  # six contrasts, three runs each
    assert {p.name for p in (tmp_path / "figures" / "forest").iterdir()} == {"forest.png", "forest.pdf", "forest.eps"}
    page = html.unescape((tmp_path / "compare.html").read_text())
    assert page.index("Findings across seeds") < page.index("Runs compared") < page.index('id="cross_seed"')
    assert 'href="figures/forest/forest.png"' in page and 'id="forest"' in page
    assert len(compared.findings) == 6 and all(line in page for line in compared.findings)


def test_runs_that_cancel_point_nowhere():
    """(ad - bc) / N of 1/24 against 2/24 is (21 - 46) / 48 = -25/48 and of 2/24 against 1/24 is +25/48:
    the pooled estimate is exactly equal (0.1 + 0.2 - 0.3 in floating point would not be)."""
    runs = []
    for seed, (rule, control) in ((1, (1, 2)), (2, (2, 1))):
        table10 = pd.DataFrame(
            [
                {
                    "rule": "sum + 18 from correct sums",
                    "rule_key": "c18_correct",
                    "control": "control for + 18",
                    "control_key": "c18ctl_correct",
                    "hits_rule": rule,
                    "n_rule": N,
                    "hits_control": control,
                    "n_control": N,
                }
            ]
        )
        runs.append(PooledRun(f"run-{seed}", "tiny", seed, V2, None, {"table10": table10}))
    (finding,) = ev.findings(ev.contrasts(runs))
    assert (finding.direction, finding.runs_agreeing) == ("equal", 0)
    assert finding.verdict == "not supported"  # no pooled effect: 0 of 2 is scatter, not an inconsistency
    assert finding.odds_ratio_mh == pytest.approx(1.0)
    assert "0 of 2 runs have the rule equal to its control, as pooled" in ev.sentence(finding)


def test_runs_for_power_at_the_familys_corrected_level(found):
    """sum + 3 from fabricated answers (runs 14/24 vs 0/24, 1/24 vs 3/24, 0/24 vs 2/24): at 0.05 / 4 (four
    contrasts in the family) and 80% power the simulation needs 12 runs; 11 at an uncorrected 0.05, 5 at 50%
    power (both survived a mutation audit: only `<= 3` was checked)."""
    from cctk.core import stats

    _, by = found
    rates = stats.RunRates(np.full(3, 24), np.array([14, 1, 0]) / 24, np.full(3, 24), np.array([0, 3, 2]) / 24)
    assert stats.runs_for_power(rates, 0.05 / 4, ev.POWER_SEED, 0.8, 50) == 12
    assert by[DISAGREEING].seeds_for_80_power == 12


def test_heterogeneity_threshold_is_alpha():
    assert ev.verdict(0.01, 0.07, 3, 3) == "supported"  # Breslow-Day p 0.07 >= 0.05: not heterogeneous
    assert ev.verdict(0.01, 0.049, 3, 3) == "inconsistent"
