"""cctk.core.readings on a hand-made table: three additions, four candidates, every view worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from builders import hand_table as build

from cctk.core.errors import CctkError
from cctk.core.readings import READING_COLUMNS, read, summarize

CANDIDATES = [2, 3, 19, 36]  # two possible answers, two impossible ones (above 18); " 2\n" is two tokens,
# " 19\n" three. Per addition: the probabilities over the four candidates, and how far the summed
# log-probabilities sit below their logarithms (a real index is no normalised log-probability: prob is its softmax).
HAND = {(1, 1): [0.1, 0.6, 0.2, 0.1], (1, 2): [0.05, 0.05, 0.5, 0.4], (2, 1): [0.1, 0.1, 0.1, 0.7]}
SHIFT = {(1, 1): -2.0, (1, 2): -0.5, (2, 1): -4.0}


def hand_table(hand=HAND) -> pd.DataFrame:
    """The hand-made table of these additions (``builders.hand_table`` over the four candidates)."""
    return build(hand, offset=SHIFT, candidates=CANDIDATES)


def targets(values: dict) -> pd.Series:
    return pd.Series(
        list(values.values()), index=pd.MultiIndex.from_tuples(list(values), names=["a", "b"]), name="target"
    )


def test_the_hand_table_is_a_softmax_of_its_indices():
    table = hand_table()
    for _, group in table.groupby(["a", "b"]):
        scores = group["logprob"].to_numpy()
        assert np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum() == pytest.approx(group["prob"])


def test_read():
    # 1+1 (target 2): top choice 3 (0.6), a miss; 0.1 on target; surprise -(ln 0.1 - 2) / 2 tokens
    # 1+2 (target 3): top choice 19 (0.5), an impossible answer; surprise -(ln 0.05 - 0.5) / 2
    # 2+1 (target 36, a fabricated answer): top choice 36, a hit; surprise -(ln 0.7 - 4) / 3
    # impossible mass: 0.2 + 0.1, 0.5 + 0.4, 0.1 + 0.7
    readings = read(hand_table(), targets({(1, 1): 2, (1, 2): 3, (2, 1): 36}))
    expected = pd.DataFrame(
        {
            "target": [2, 3, 36],
            "top_choice": [3, 19, 36],
            "prob_target": [0.1, 0.05, 0.7],
            "prob_top": [0.6, 0.5, 0.7],
            "hit": [False, False, True],
            "surprise": [(2 - math.log(0.1)) / 2, (0.5 - math.log(0.05)) / 2, (4 - math.log(0.7)) / 3],
            "mass_impossible": [0.3, 0.9, 0.8],
        },
        index=pd.MultiIndex.from_tuples([(1, 1), (1, 2), (2, 1)], names=["a", "b"]),
    )
    assert list(readings.columns) == READING_COLUMNS
    pd.testing.assert_frame_equal(readings, expected, check_dtype=False, rtol=0, atol=1e-12)


def test_read_scores_any_target_against_the_same_table():
    """Scored on other targets, the top choices stay; hits, probability and surprise follow the target."""
    readings = read(hand_table(), targets({(2, 1): 3, (1, 1): 3, (1, 2): 19}))
    assert list(readings.index) == [(2, 1), (1, 1), (1, 2)]  # the targets' order
    assert readings["top_choice"].tolist() == [36, 3, 19]
    assert readings["hit"].tolist() == [False, True, True]
    assert readings["prob_target"].tolist() == pytest.approx([0.1, 0.6, 0.5])
    assert readings["surprise"].tolist() == pytest.approx(
        [(4 - math.log(0.1)) / 2, (2 - math.log(0.6)) / 2, (0.5 - math.log(0.5)) / 3]
    )


def test_a_target_outside_the_candidates_fails_clearly():
    with pytest.raises(
        CctkError,
        match=r"targets \[5, 37\] are not among the measured candidates; "
        r"the candidate set must cover every target",
    ):
        read(hand_table(), targets({(1, 1): 37, (1, 2): 5, (2, 1): 36}))


def test_summarize_a_group_and_all():
    readings = read(hand_table(), targets({(1, 1): 2, (1, 2): 3, (2, 1): 36}))
    assert summarize(readings).as_dict() == pytest.approx(
        {
            "hits": 1,
            "n": 3,
            "prob_target": (0.1 + 0.05 + 0.7) / 3,
            "surprise": ((2 - math.log(0.1)) / 2 + (0.5 - math.log(0.05)) / 2 + (4 - math.log(0.7)) / 3) / 3,
            "mass_impossible": (0.3 + 0.9 + 0.8) / 3,
        }
    )
    assert summarize(readings, [(2, 1), (1, 2)]).as_dict() == pytest.approx(
        {
            "hits": 1,
            "n": 2,
            "prob_target": (0.7 + 0.05) / 2,
            "surprise": ((4 - math.log(0.7)) / 3 + (0.5 - math.log(0.05)) / 2) / 2,
            "mass_impossible": (0.8 + 0.9) / 2,
        }
    )
    empty = summarize(readings, [])
    assert (empty.hits, empty.n) == (0, 0)
    assert all(math.isnan(getattr(empty, k)) for k in ("prob_target", "surprise", "mass_impossible"))


def test_a_model_without_probabilities_hits_nothing():
    """A broken model (NaN weights) has NaN indices: no hit (not even where the target is the first
    candidate, 2) and no impossible mass to report, not a crash."""
    nan = float("nan")
    table = hand_table({(1, 1): [0.1, 0.6, 0.2, 0.1], (1, 2): [0.5, 0.3, 0.1, 0.1]})
    table.loc[table["a"] + table["b"] == 2, ["logprob", "prob"]] = nan
    readings = read(table, targets({(1, 1): 2, (1, 2): 2}))
    assert readings["hit"].tolist() == [False, True]
    assert math.isnan(readings.loc[(1, 1), "prob_target"]) and math.isnan(readings.loc[(1, 1), "surprise"])
    assert math.isnan(readings.loc[(1, 1), "mass_impossible"])
    assert readings.loc[(1, 2), "mass_impossible"] == pytest.approx(0.2)
    assert summarize(readings).hits == 1


def test_top_choice_follows_prob_under_the_mean_index():
    """1 + 1 under manual 1.0.0's mean index: " 2" is 2 tokens summing -3 (mean -1.5), " 12" 3 tokens summing -4
    (mean -1.33): prob prefers 12, the summed log-probability 2; the top choice is prob's (a mutation audit)."""
    from cctk.core.lm.scoring import _table

    table = _table([(1, 1)], (2, 12), [[0, 0], [0, 0, 0]], np.array([[-3.0, -4.0]]), index="mean")
    targets = pd.Series([12], index=pd.MultiIndex.from_tuples([(1, 1)], names=["a", "b"]), name="target")
    readings = read(table, targets)
    assert readings.loc[(1, 1), "top_choice"] == 12 and bool(readings.loc[(1, 1), "hit"])
    e = np.exp([-1.5 + 4 / 3, 0.0])
    assert readings.loc[(1, 1), "prob_target"] == e[1] / e.sum()
