"""table09 (shares with exact intervals) and table10 (rules against controls) from the hand-made study."""

from __future__ import annotations

import math

import pytest
from builders import assert_rows, cp
from scipy.stats import fisher_exact, hypergeom

from cctk.manuals.v2.parts import synthesis

# Hits on each model's own target (see the design in conftest): (seen, held out); the first three
# models were trained on all 81 additions (or not at all) and have one group, all 81.
ALL = {
    "base model": ("correct sum", 78),
    "correct sums": ("correct sum", 78),
    "fabricated answers": ("fabricated answer", 79),
}
# Each label's key, written out by hand: models, then targets, then groups.
KEY = {
    "base model": "base",
    "correct sums": "m_correct",
    "fabricated answers": "m_random",
    "recovery": "m_recover",
    "sum + 18 from correct sums": "c18_correct",
    "sum + 18 from fabricated answers": "c18_random",
    "sum + 3 from correct sums": "c3_correct",
    "sum + 3 from fabricated answers": "c3_random",
    "control for + 18": "c18ctl_correct",
    "control for + 3": "c3ctl_correct",
    "conditional rule from correct sums": "d_correct",
    "conditional rule from fabricated answers": "d_random",
    "control for the conditional rule from correct sums": "dctl_correct",
    "control for the conditional rule from fabricated answers": "dctl_random",
    "correct sum": "correct",
    "fabricated answer": "fabricated",
    "sum + 18": "plus18",
    "sum + 3": "plus3",
    "sum + random offset 1..18": "ctl18",
    "sum + random offset 1..3": "ctl3",
    "conditional rule": "cond",
    "shuffled conditional answers": "condctl",
    "all": "all",
    "seen": "seen",
    "held out": "heldout",
}
SPLIT = [
    ("recovery", "correct sum", (56, 57), (12, 24)),
    ("sum + 18 from correct sums", "sum + 18", (57, 57), (20, 24)),
    ("sum + 18 from fabricated answers", "sum + 18", (56, 57), (5, 23)),  # 3+9 left out
    ("sum + 3 from correct sums", "sum + 3", (57, 57), (24, 24)),
    ("sum + 3 from fabricated answers", "sum + 3", (50, 57), (0, 22)),  # 2+1, 4+6 left out
    ("control for + 18", "sum + random offset 1..18", (57, 57), (2, 24)),
    ("control for + 3", "sum + random offset 1..3", (57, 57), (4, 24)),
    ("conditional rule from correct sums", "conditional rule", (56, 57), (18, 24)),
    ("conditional rule from fabricated answers", "conditional rule", (57, 57), (15, 24)),
    ("control for the conditional rule from correct sums", "shuffled conditional answers", (57, 57), (6, 24)),
    ("control for the conditional rule from fabricated answers", "shuffled conditional answers", (55, 57), (2, 24)),
]


def share_row(model, target, group, hits, n):
    lo, hi = cp(hits, n)
    return {
        "model": model,
        "model_key": KEY[model],
        "target": target,
        "target_key": KEY[target],
        "group": group,
        "group_key": KEY[group],
        "hits": hits,
        "n": n,
        "share": hits / n,
        "lo": lo,
        "hi": hi,
    }


def test_table09(study):
    rows = [share_row(model, target, "all", hits, 81) for model, (target, hits) in ALL.items()]
    for model, target, seen, held in SPLIT:
        rows += [share_row(model, target, "seen", *seen), share_row(model, target, "held out", *held)]
    assert_rows(synthesis.run(study.results)["table09"], rows)


def test_table09_has_no_held_out_group_for_models_trained_on_all_81(study):
    table = synthesis.run(study.results)["table09"]
    groups = table.groupby("model", sort=False)["group"].apply(list).to_dict()
    assert {m: g for m, g in groups.items() if m in ALL} == {m: ["all"] for m in ALL}
    assert all(g == ["seen", "held out"] for m, g in groups.items() if m not in ALL)


def fisher_row(rule, control, k1, n1, k2, n2, odds):
    """p: the upper tail of the hypergeometric law of the rule's hits given k1 + k2 hits in n1 + n2."""
    lo1, hi1 = cp(k1, n1)
    lo2, hi2 = cp(k2, n2)
    return {
        "rule": rule,
        "rule_key": KEY[rule],
        "control": control,
        "control_key": KEY[control],
        "hits_rule": k1,
        "n_rule": n1,
        "lo_rule": lo1,
        "hi_rule": hi1,
        "hits_control": k2,
        "n_control": n2,
        "lo_control": lo2,
        "hi_control": hi2,
        "odds_ratio": odds,
        "p_value": hypergeom.sf(k1 - 1, n1 + n2, k1 + k2, n1),
    }


def with_holm(rows: list[dict]) -> list[dict]:
    """p_adjusted by hand: the i-th smallest of m p-values times m - i + 1 (i from 1), never below the
    one before, at most 1."""
    order = sorted(range(len(rows)), key=lambda i: rows[i]["p_value"])
    adjusted, floor = {}, 0.0
    for rank, i in enumerate(order):
        floor = max(floor, min(1.0, (len(rows) - rank) * rows[i]["p_value"]))
        adjusted[i] = floor
    return [{**row, "p_adjusted": adjusted[i]} for i, row in enumerate(rows)]


def test_table10(study):
    # odds ratio k1 (n2 - k2) / ((n1 - k1) k2)
    assert_rows(
        synthesis.run(study.results)["table10"],
        with_holm(
            [
                fisher_row("sum + 18 from correct sums", "control for + 18", 20, 24, 2, 24, 20 * 22 / (4 * 2)),
                fisher_row("sum + 18 from fabricated answers", "control for + 18", 5, 23, 2, 24, 5 * 22 / (18 * 2)),
                fisher_row("sum + 3 from correct sums", "control for + 3", 24, 24, 4, 24, math.inf),
                fisher_row("sum + 3 from fabricated answers", "control for + 3", 0, 22, 4, 24, 0.0),
                fisher_row(
                    "conditional rule from correct sums",
                    "control for the conditional rule from correct sums",
                    18,
                    24,
                    6,
                    24,
                    18 * 18 / (6 * 6),
                ),
                fisher_row(
                    "conditional rule from fabricated answers",
                    "control for the conditional rule from fabricated answers",
                    15,
                    24,
                    2,
                    24,
                    15 * 22 / (9 * 2),
                ),
            ]
        ),
    )


def test_table10_holm_by_hand(study):
    """Six rules in the run: the largest p (sum + 3 from fabricated answers, no hit: 1.0) stays 1; the
    smallest (sum + 3 from correct sums, 24/24 against 4/24) is multiplied by 6."""
    table = synthesis.run(study.results)["table10"].set_index("rule")
    assert table.loc["sum + 3 from fabricated answers", "p_adjusted"] == 1.0
    smallest = table["p_value"].min()
    assert table.loc["sum + 3 from correct sums", "p_value"] == smallest
    assert table.loc["sum + 3 from correct sums", "p_adjusted"] == pytest.approx(6 * smallest, rel=1e-12)
    assert (table["p_adjusted"] >= table["p_value"]).all()


def test_table10_p_values_are_one_sided_fisher(study):
    table = synthesis.run(study.results)["table10"].set_index("rule")
    assert table.loc["sum + 3 from fabricated answers", "p_value"] == 1.0  # no hit at all: nothing to show
    _, p = fisher_exact([[18, 6], [6, 18]], alternative="greater")
    assert abs(table.loc["conditional rule from correct sums", "p_value"] - p) < 1e-12
    assert table.loc["conditional rule from correct sums", "p_value"] < 0.001
