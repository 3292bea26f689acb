"""Targets, the split and the controls (the fact space every manual shares, and manual 2.0.0's own facts): pure,
seeded, and true to manual sections 4.6-4.12."""

import pickle

import numpy as np
import pandas as pd
import pytest

from cctk.core import facts
from cctk.core.errors import CctkError
from cctk.core.facts import ADDITIONS, CANDIDATES
from cctk.manuals.v2 import facts as study

SUMS = facts.correct_sums()


def _is_target_table(s: pd.Series) -> bool:
    return s.name == "target" and s.index.equals(facts.addition_index()) and pd.api.types.is_integer_dtype(s.dtype)


@pytest.mark.parametrize(
    "make",
    [
        facts.fabricated_answers,
        lambda seed: study.control_offsets(seed, 3),
        lambda seed: study.control_offsets(seed, 18),
        study.conditional_control,
    ],
)
def test_seeded_targets_are_byte_identical_per_seed_and_differ_across_seeds(make):
    assert make(7).to_csv() == make(7).to_csv()
    assert make(7).to_csv() != make(8).to_csv()
    assert _is_target_table(make(7))


def test_split_is_byte_identical_per_seed_and_differs_across_seeds():
    assert pickle.dumps(study.split_additions(7)) == pickle.dumps(study.split_additions(7))
    assert study.split_additions(7) != study.split_additions(8)


def test_streams_do_not_depend_on_earlier_draws():
    before = study.split_additions(3)
    facts.fabricated_answers(3), study.control_offsets(3, 18)
    assert study.split_additions(3) == before
    assert facts.rng(3, "split").integers(1 << 30) != facts.rng(3, "fabricated").integers(1 << 30)


def test_split_holds_out_24_of_81_disjoint_and_covering_in_order():
    split = study.split_additions(0)
    assert len(ADDITIONS) == 81
    assert (len(split.seen), len(split.heldout)) == (57, 24)
    assert not set(split.seen) & set(split.heldout)
    assert set(split.seen) | set(split.heldout) == set(ADDITIONS)
    assert list(split.seen) == sorted(split.seen) and list(split.heldout) == sorted(split.heldout)


@pytest.mark.parametrize("holdout", [0, 1, -0.1, 1.5, 0.001, 0.999])
def test_split_rejects_holdouts_that_leave_a_group_empty(holdout):
    with pytest.raises(CctkError):
        study.split_additions(0, holdout)


def test_split_holdout_sets_the_count():
    assert len(study.split_additions(0, 0.5).heldout) == round(81 * 0.5)


@pytest.mark.parametrize("seed", range(5))
def test_fabricated_answer_is_never_the_sum_and_is_a_candidate(seed):
    fab = facts.fabricated_answers(seed)
    assert (fab != SUMS).all()
    assert fab.between(min(CANDIDATES), max(CANDIDATES)).all()
    assert (fab > facts.IMPOSSIBLE_ABOVE).any()  # drawn over all candidates, not only sums


def test_shifted_sums():
    assert (study.shifted_sums(18) == SUMS + 18).all()
    assert study.shifted_sums(3).loc[(4, 5)] == 12
    assert _is_target_table(study.shifted_sums(3))


@pytest.mark.parametrize("k", [3, 18])
def test_control_offsets_lie_in_1_to_k(k):
    offsets = study.control_offsets(0, k) - SUMS
    assert offsets.between(1, k).all()


def test_control_offsets_reach_both_ends_for_k3():
    offsets = set((study.control_offsets(0, 3) - SUMS).tolist())
    assert offsets == {1, 2, 3}


def test_conditional_rule():
    rule = study.conditional_rule()
    assert rule.loc[(5, 3)] == 26 and rule.loc[(3, 5)] == 17 and rule.loc[(4, 4)] == 26
    assert (rule != SUMS).all()
    assert rule.max() <= max(CANDIDATES)
    assert _is_target_table(rule)


@pytest.mark.parametrize("seed", range(20))
def test_conditional_control_is_a_shuffle_of_the_rule_without_plain_sums(seed):
    control = study.conditional_control(seed)
    assert (control != SUMS).all()
    assert control.max() <= max(CANDIDATES)
    assert sorted(control) == sorted(study.conditional_rule())
    assert not control.equals(study.conditional_rule())


def test_conditional_control_is_redrawn_when_a_shuffle_hits_a_sum():
    # find a seed whose first shuffle hits a plain sum: the result must be a later shuffle
    rule, sums = study.conditional_rule().to_numpy(), SUMS.to_numpy()
    seed = next(s for s in range(1000) if np.any(facts.rng(s, "conditional-control").permutation(rule) == sums))
    assert (study.conditional_control(seed).to_numpy() != sums).all()


def test_condition():
    assert [study.condition(5, 3), study.condition(4, 4), study.condition(3, 5)] == [">", "=", "<"]


def test_coincident_on_a_hand_made_example():
    fab = SUMS + 1
    targets = SUMS + 3
    targets.loc[(2, 7)] = fab.loc[(2, 7)]
    targets.loc[(9, 1)] = fab.loc[(9, 1)]
    targets.loc[(5, 5)] = fab.loc[(5, 5)]
    pairs = [(9, 1), (1, 1), (2, 7), (3, 3)]  # (5, 5) coincides but is not asked about
    assert study.coincident(fab, targets, pairs) == ((9, 1), (2, 7))
    assert study.coincident(fab, SUMS + 3, ADDITIONS) == ()


@pytest.mark.parametrize("seed", [0, 7])
def test_every_target_column_of_targets_csv_holds_what_its_name_says(seed):
    """Names are claims: the controls' targets were named ``random offset 1..18`` while they hold the sum plus
    that offset (5 to 33 at seed 0); each target column is its rule applied to the sums."""
    from cctk.manuals.v2.design import build_study_inputs, targets_table

    table = targets_table(build_study_inputs(seed))
    sums = table["a"] + table["b"]
    assert (table["correct sum"] == sums).all()
    assert (table["sum + 18"] == sums + 18).all() and (table["sum + 3"] == sums + 3).all()
    for k in (18, 3):
        offset = table[f"sum + random offset 1..{k}"] - sums
        assert offset.between(1, k).all() and offset.min() < offset.max()
    rule = table["conditional rule"]
    assert (rule == sums + 18).where(table["a"] >= table["b"], rule == sums + 9).all()


def test_each_arms_dataset_is_named_by_its_target_and_its_additions():
    """An arm's MLflow dataset: the distinct pairs of its corpus, named so that one target on two sets of additions
    is two names (the correct-sums arm's 81 and the recovery's 57 seen were both 'correct sum', told apart in the
    UI's dataset filter by their digests alone)."""
    from cctk.manuals.configure import make_config
    from cctk.manuals.v2.manual import V2

    draws = V2.draw(make_config("smollm2-135m-bundled", "smoke", (7,)))
    seen = study.split_additions(7).seen
    named = {key: V2.dataset(draws, key) for key in ("m_correct", "m_recover", "m_random", "c18_correct")}
    assert {key: name for key, (name, _) in named.items()} == {
        "m_correct": "correct sum on 81 additions",
        "m_recover": "correct sum on 57 additions",
        "m_random": "fabricated answer on 81 additions",
        "c18_correct": "sum + 18 on 57 additions",
    }
    recovery = named["m_recover"][1]
    assert list(zip(recovery.a, recovery.b, strict=True)) == sorted(seen) and len(seen) == 57
    assert recovery.completion.tolist() == [f" {a + b}\n" for a, b in sorted(seen)]
    assert recovery.prompt.tolist() == [facts.prompt(a, b) for a, b in sorted(seen)]
