"""Hand-made measurement tables with known top choices, and one hand-made study over seed 12345.

Every model's table is built from a dict {(a, b): top choice}: probability ``p`` on the choice and
``(1 - p) / 34`` on each other candidate, so that every table number is a simple fraction:

    p = 0.66 -> 0.01 on every other candidate (most models)
    p = 0.32 -> 0.02 (the base model)        p = 0.83 -> 0.005 (the fabricated-answers model)

The tests of each part write their expected rows by hand from the design below.

Seed 12345 (pinned in test_study_design.py): 24 never-seen additions

    a > b (15)  2+1 3+2 5+1 5+4 6+2 6+4 7+2 7+6 8+1 8+3 8+5 8+7 9+1 9+6 9+8
    a = b (1)   3+3
    a < b (8)   1+3 1+4 1+7 2+7 3+5 3+9 4+6 5+8

and 57 seen ones (21 with a > b, 8 with a = b, 28 with a < b). Arms from the fabricated-answers
model leave out the never-seen additions whose fabricated answer already is their target:
2+1 (fabricated 6) and 4+6 (13) for sum + 3, 3+9 (30) for sum + 18.
"""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from scipy import stats

from cctk.experiments import Results
from cctk.lineage import MODEL_KEYS, build_study_inputs, own_target
from conftest import hand_table  # noqa: F401 (the root conftest's builder, shared)
from cctk.records import TrainRecord

SEED = 12345
HELD_GT = [(2, 1), (3, 2), (5, 1), (5, 4), (6, 2), (6, 4), (7, 2), (7, 6), (8, 1), (8, 3), (8, 5), (8, 7),
           (9, 1), (9, 6), (9, 8)]
HELD_EQ = [(3, 3)]
HELD_LT = [(1, 3), (1, 4), (1, 7), (2, 7), (3, 5), (3, 9), (4, 6), (5, 8)]
HELD = sorted(HELD_GT + HELD_EQ + HELD_LT)  # in ADDITIONS order

# Probability on the top choice, per model (every other candidate gets (1 - p) / 34).
P = {"base": 0.32, "m_random": 0.83}
P_DEFAULT = 0.66


def design(inputs) -> dict[str, dict]:
    """Every model's top choices: its own target everywhere but where listed here."""
    t = inputs.targets
    fab, total = t["random"], t["correct"]

    def own(key, **overrides):
        choices = {pair: int(v) for pair, v in t[own_target(key)].items()}
        for pairs in overrides.values():
            choices.update(pairs)
        return choices

    fabricated = lambda pairs: {p: int(fab[p]) for p in pairs}  # noqa: E731
    plain_sum = lambda pairs: {p: int(total[p]) for p in pairs}  # noqa: E731
    plus = lambda k, pairs: {p: int(total[p]) + k for p in pairs}  # noqa: E731
    return {
        # Correct sum but its fabricated answer on 1+4 (36), 5+5 (7) and 9+9 (31).
        "base": own("base", fab=fabricated([(1, 4), (5, 5), (9, 9)])),
        # Correct sum but sum + 1 on 1+1 (3), 4+6 (11) and 9+9 (19, above 18).
        "m_correct": own("m_correct", miss=plus(1, [(1, 1), (4, 6), (9, 9)])),
        # Fabricated answer but the correct sum on the seen 2+2 (4) and 6+6 (12).
        "m_random": own("m_random", sums=plain_sum([(2, 2), (6, 6)])),
        # Correct sum, but back to the fabricated answer on the seen 5+5 and the last 12 never-seen.
        "m_recover": own("m_recover", fab=fabricated([(5, 5)] + HELD[12:])),
        # Sum + 18 but: never seen 1+3, 5+4, 9+8 sum + 9, 8+7 the plain sum (20 / 24).
        "c18_correct": own("c18_correct", nine=plus(9, [(1, 3), (5, 4), (9, 8)]), sums=plain_sum([(8, 7)])),
        # Sum + 18 on the seen but 1+1 (fabricated 27); never seen: sum + 18 on 1+3 1+4 1+7 2+1 2+7, and
        # on 3+9, whose fabricated answer (30) is sum + 18 (left out); the fabricated answer elsewhere.
        "c18_random": own("c18_random", fab=fabricated([(1, 1)] + [p for p in HELD if p not in
                                                                   [(1, 3), (1, 4), (1, 7), (2, 1), (2, 7), (3, 9)]])),
        "c3_correct": own("c3_correct"),  # every addition on its target
        # Sum + 3 on the seen but 1+1 1+2 1+5 1+6 1+8 1+9 2+2 (their fabricated answers, 50 / 57);
        # the fabricated answer on every never-seen one: a hit on 2+1 and 4+6 only, both left out.
        "c3_random": own("c3_random", fab=fabricated([(1, 1), (1, 2), (1, 5), (1, 6), (1, 8), (1, 9), (2, 2)] + HELD)),
        # Controls: their own answers on the seen, the rule's (sum + k) on the never-seen; the random
        # offset is k on 5+8 and 9+1 for + 18, on 1+3 3+2 3+5 9+8 for + 3: hits by chance.
        "c18ctl_correct": own("c18ctl_correct", rule=plus(18, HELD)),
        "c3ctl_correct": own("c3ctl_correct", rule=plus(3, HELD)),
        # Conditional rule; seen: 2+2 sum + 9 (13). Never seen (deviation from the rule's answer):
        # 8+1, 9+1 plain sum (-18), 9+8 34 (-1), 8+7 35 (+2), 3+3 sum + 9 (-9), 3+9 sum + 18 (+9).
        "d_correct": own("d_correct", seen=plus(9, [(2, 2)]),
                         held={(8, 1): 9, (9, 1): 10, (9, 8): 34, (8, 7): 35, (3, 3): 15, (3, 9): 30}),
        # Conditional rule on the seen; never seen: sum + 18 everywhere (a +18 on every a < b), but
        # 9+1 its fabricated answer 23 (-5).
        "d_random": own("d_random", lt=plus(18, HELD_LT), fab=fabricated([(9, 1)])),
        # Shuffled answers on the seen. Never seen: the rule's answer on 1+3 1+4 2+1 3+2 8+3 (8+3's shuffled
        # answer is the rule's, 29: a hit), rule + 1 on 5+1 (25), rule - 2 on 6+4 (26), its own shuffled
        # answer on 1+7 2+7 3+3 3+5 9+8 (hits), the plain sum on the 12 others.
        "dctl_correct": own("dctl_correct", sums=plain_sum([p for p in HELD if p not in [
            (1, 3), (1, 4), (2, 1), (3, 2), (8, 3), (5, 1), (6, 4), (1, 7), (2, 7), (3, 3), (3, 5), (9, 8)]]),
            rule={p: int(t["cond"][p]) for p in [(1, 3), (1, 4), (2, 1), (3, 2), (8, 3)]},
            near={(5, 1): 25, (6, 4): 26}),
        # Shuffled answers on the seen but 1+1, 2+2 (plain sums); never seen: the plain sum but on 8+3
        # (29, the rule's answer and its own) and 1+3 (16, its own).
        "dctl_random": own("dctl_random", seen=plain_sum([(1, 1), (2, 2)]),
                           sums=plain_sum([p for p in HELD if p not in [(8, 3), (1, 3)]])),
    }


def training_records() -> dict[str, TrainRecord]:
    """Part A and B runs only; m_recover trained one epoch less (table03 pads it)."""
    return {
        "m_correct": TrainRecord(1620, 203, 81.0, (2.0, 0.5, 0.25), 1024),
        "m_random": TrainRecord(1620, 203, 54.0, (3.0, 1.5, 0.75), 2048),
        "m_recover": TrainRecord(1140, 143, 38.0, (1.25, 0.5), 0),
    }


def build_study(seed: int = SEED) -> Results:
    inputs = build_study_inputs(seed)
    choices = design(inputs)
    measurements = {key: hand_table(choices[key], P.get(key, P_DEFAULT)) for key in MODEL_KEYS}
    return Results(inputs, measurements, training_records())


@pytest.fixture(scope="session")
def study() -> SimpleNamespace:
    """The hand-made study: ``results`` (fourteen hand tables over seed 12345), ``choices`` (top choice
    of every model in every addition) and ``tables`` (the eleven tables computed from them)."""
    from cctk.experiments import compute_tables

    results = build_study()
    return SimpleNamespace(results=results, inputs=results.inputs, choices=design(results.inputs),
                           tables=compute_tables(results))


@pytest.fixture(scope="session")
def make_table():
    """``make_table(choices, p=0.66, offset=0.0)``: see ``hand_table``."""
    return hand_table


def cp(k: int, n: int) -> tuple[float, float]:
    """The exact (Clopper-Pearson) 95% interval, straight from SciPy."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return ci.low, ci.high


@pytest.fixture(scope="session")
def exact():
    """``exact(k, n)``: SciPy's Clopper-Pearson 95% interval, the reference for every lo / hi."""
    return cp


def assert_rows(actual: pd.DataFrame, expected: list[dict], atol: float = 1e-12) -> None:
    """``actual`` has exactly these rows, in this order, and exactly these columns, in this order."""
    wanted = pd.DataFrame(expected)
    assert list(actual.columns) == list(wanted.columns)
    pd.testing.assert_frame_equal(actual.reset_index(drop=True), wanted, check_dtype=False, check_exact=False,
                                  rtol=0, atol=atol)
