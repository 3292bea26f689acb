"""The hand-made study itself: the draws of seed 12345 the tests rely on, and tables that say what
they were built to say."""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import HELD, HELD_EQ, HELD_GT, HELD_LT, STUDY_SEED as SEED

from cctk.core.facts import ADDITIONS
from cctk.manuals.v2.design import MODEL_KEYS, build_study_inputs
from cctk.manuals.v2.facts import condition


def test_the_draws_of_seed_12345_that_the_tests_rely_on():
    inputs = build_study_inputs(SEED)
    assert list(inputs.split.heldout) == HELD and len(inputs.split.seen) == 57
    assert [p for p in HELD if condition(*p) == ">"] == HELD_GT
    assert [p for p in HELD if condition(*p) == "="] == HELD_EQ
    assert [p for p in HELD if condition(*p) == "<"] == HELD_LT
    seen = inputs.split.seen
    assert [sum(condition(*p) == c for p in seen) for c in ">=<"] == [21, 8, 28]
    assert inputs.excluded == {
        "m_recover": (),
        "c18_random": ((3, 9),),
        "c3_random": ((2, 1), (4, 6)),
        "d_random": (),
        "dctl_random": (),
    }
    fab = inputs.targets["fabricated"]
    assert {p: fab[p] for p in [(1, 4), (5, 5), (9, 9), (2, 2), (6, 6), (2, 1), (4, 6), (3, 9), (9, 1)]} == {
        (1, 4): 36,
        (5, 5): 7,
        (9, 9): 31,
        (2, 2): 12,
        (6, 6): 32,
        (2, 1): 6,
        (4, 6): 13,
        (3, 9): 30,
        (9, 1): 23,
    }
    assert int((fab > 18).sum()) == 40
    offsets18 = inputs.targets["ctl18"] - inputs.targets["correct"]
    offsets3 = inputs.targets["ctl3"] - inputs.targets["correct"]
    assert [p for p in HELD if offsets18[p] == 18] == [(5, 8), (9, 1)]
    assert [p for p in HELD if offsets3[p] == 3] == [(1, 3), (3, 2), (3, 5), (9, 8)]
    condctl, cond = inputs.targets["condctl"], inputs.targets["cond"]
    assert [p for p in HELD if condctl[p] == cond[p]] == [(8, 3)]
    assert {p: condctl[p] for p in [(1, 3), (1, 7), (2, 7), (3, 3), (3, 5), (9, 8)]} == {
        (1, 3): 16,
        (1, 7): 22,
        (2, 7): 29,
        (3, 3): 34,
        (3, 5): 34,
        (9, 8): 20,
    }


def test_every_hand_table_has_its_designed_top_choices(study):
    for key in MODEL_KEYS:
        table = study.results.measurements[key]
        assert len(table) == 81 * 35
        top = table.loc[table.groupby(["a", "b"])["prob"].idxmax()]
        assert (
            dict(zip(zip(top["a"], top["b"], strict=True), top["candidate_value"], strict=True)) == study.choices[key]
        ), key


def test_a_hand_table_is_what_the_measurement_assembles(make_table):
    """Same scores through cctk.core.lm.scoring._table: the same table, to the last bit."""
    from cctk.core.lm.scoring import _table  # imports torch: only here

    choices = {p: sum(p) for p in ADDITIONS}
    ours = make_table(choices, 0.66, offset=-1.5)
    scores = ours["logprob"].to_numpy().reshape(81, 35)
    answers = [[0] * (2 if v < 10 else 3) for v in range(2, 37)]  # only their lengths matter
    theirs = _table(ADDITIONS, tuple(range(2, 37)), answers, scores)
    assert ours.equals(theirs)
    one = ours[(ours["a"] == 1) & (ours["b"] == 1)]
    assert one["prob"].to_numpy() == pytest.approx([0.66] + [0.01] * 34, abs=1e-15)
    assert one["logprob"].iloc[0] == pytest.approx(math.log(0.66) - 1.5, abs=1e-15)
    assert list(one["n_tokens"]) == [2] * 8 + [3] * 27
    assert np.allclose(ours.groupby(["a", "b"])["prob"].sum(), 1.0, atol=1e-15)


def test_the_study_design_is_declared_once_and_derived_everywhere():
    """lineage.ARMS is the design; the pairs, a part's arms and a profile's models read as the manual lists them."""
    from cctk.manuals.v2 import catalog
    from cctk.manuals.v2.design import ARM_BY_KEY, CONTROLS, RULE_VS_CONTROL, family_arms
    from cctk.manuals.v2.parts import part_c, part_d

    assert RULE_VS_CONTROL == (
        ("c18_correct", "c18ctl_correct"),
        ("c18_random", "c18ctl_correct"),
        ("c3_correct", "c3ctl_correct"),
        ("c3_random", "c3ctl_correct"),
        ("d_correct", "dctl_correct"),
        ("d_random", "dctl_random"),
    )
    assert {"c18ctl_correct", "c3ctl_correct", "dctl_correct", "dctl_random"} == CONTROLS
    assert part_c.ARMS == ("c18_correct", "c18_random", "c3_correct", "c3_random", "c18ctl_correct", "c3ctl_correct")
    assert part_d.ARMS == ("d_correct", "d_random", "dctl_correct", "dctl_random")
    assert part_d.RULE_AND_CONTROL == (("d_correct", "dctl_correct"), ("d_random", "dctl_random"))
    assert family_arms("plus18") == ("c18_correct", "c18_random", "c18ctl_correct")
    assert family_arms("cond") == ("d_correct", "d_random", "dctl_correct", "dctl_random")
    assert catalog.MAIN_SEQUENCE == ("m_correct", "m_random", "m_recover")
    rule, control, plain = ARM_BY_KEY["c3_random"], ARM_BY_KEY["c3ctl_correct"], ARM_BY_KEY["m_recover"]
    assert (rule.is_rule, rule.is_control, rule.family) == (True, False, "plus3")
    assert (control.is_rule, control.is_control, control.family) == (False, True, "plus3")
    assert (plain.is_rule, plain.is_control, plain.family) == (False, False, None)
    assert [k for k, _ in catalog.ORDER if k.startswith("heatmap:")][5:] == [
        f"heatmap:{k}" for k in (*part_c.ARMS, *part_d.ARMS)
    ]
