"""table05..table08 (Part D, the conditional rule) from the hand-made study, worked out by hand.

The rule asks sum + 18 when a >= b and sum + 9 when a < b; its control, the same answers shuffled.
Every answer of both is two-digit, so a group's mean surprise is (hits * -ln 0.66 + misses * -ln 0.01)
/ 3 / n and its mean probability on the target (0.66 * hits + 0.01 * misses) / n.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import STUDY_SEED as SEED, assert_rows, cp

from cctk.core.stats import band_with_interval
from cctk.manuals.v2.parts import part_d

HIT, MISS = -math.log(0.66), -math.log(0.01)
RULE_C, RULE_R = "conditional rule from correct sums", "conditional rule from fabricated answers"
CTL_C = "control for the conditional rule from correct sums"
CTL_R = "control for the conditional rule from fabricated answers"
KEY = {
    RULE_C: "d_correct",
    RULE_R: "d_random",
    CTL_C: "dctl_correct",
    CTL_R: "dctl_random",
    "correct sums": "m_correct",
    "fabricated answers": "m_random",
}  # each label's key, by hand

# Held-out deviations, top choice minus the *rule's* answer, in the order of the split
# (1+3 1+4 1+7 2+1 2+7 3+2 3+3 3+5 3+9 4+6 5+1 5+4 5+8 6+2 6+4 7+2 7+6 8+1 8+3 8+5 8+7 9+1 9+6 9+8).
RULE_C_DEV = [0, 0, 0, 0, 0, 0, -9, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, -18, 0, 0, 2, -18, 0, -1]
# The control from correct sums: the rule's answer on 1+3 1+4 2+1 3+2 8+3 (0), 5+1 rule + 1, 6+4 rule - 2,
# its own shuffled answer on 1+7 (22 - 17) 2+7 (29 - 18) 3+3 (34 - 24) 3+5 (34 - 17) 9+8 (20 - 35),
# the plain sum elsewhere: -9 when a < b, -18 when a >= b.
CTL_C_DEV = [0, 0, 5, 0, 11, 0, 10, 17, -9, -9, 1, -18, -9, -18, -2, -18, -18, -18, 0, -18, -18, -18, -18, -15]
# From fabricated answers: sum + 18 on every a < b (+9), 9+1 its fabricated answer 23 (-5).
RULE_R_DEV = [9, 9, 9, 0, 9, 0, 0, 9, 9, 9, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, -5, 0, 0]
# Its control: the plain sum everywhere but 1+3 (its own 16: +3) and 8+3 (29, the rule's answer).
CTL_R_DEV = [
    3,
    -9,
    -9,
    -18,
    -9,
    -18,
    -18,
    -9,
    -9,
    -9,
    -18,
    -18,
    -9,
    -18,
    -18,
    -18,
    -18,
    -18,
    0,
    -18,
    -18,
    -18,
    -18,
    -18,
]


def split_group(prefix, hits, n):
    lo, hi = cp(hits, n)
    return {
        f"hits_{prefix}": hits,
        f"n_{prefix}": n,
        f"lo_{prefix}": lo,
        f"hi_{prefix}": hi,
        f"prob_target_{prefix}": (0.66 * hits + 0.01 * (n - hits)) / n,
        f"surprise_{prefix}": (hits * HIT + (n - hits) * MISS) / 3 / n,
    }


def test_table05(study):
    def row(model, target, parent, seen, held):
        target, target_key = target
        return {
            "model": model,
            "model_key": KEY[model],
            "target": target,
            "target_key": target_key,
            **split_group("seen", seen, 57),
            **split_group("heldout", held, 24),
            "n_excluded": 0,
            "parent": parent,
            "parent_key": KEY[parent],
        }

    rule, shuffled = ("conditional rule", "cond"), ("shuffled conditional answers", "condctl")

    assert_rows(
        part_d.run(study.results)["table05"],
        [
            row(RULE_C, rule, "correct sums", 56, 18),  # seen miss: 2+2 (sum + 9)
            row(RULE_R, rule, "fabricated answers", 57, 15),
            row(CTL_C, shuffled, "correct sums", 57, 6),
            row(CTL_R, shuffled, "fabricated answers", 55, 2),  # seen misses: 1+1, 2+2
        ],
    )


def test_table06_hits_by_condition(study):
    """Seen: 21 a > b, 8 a = b, 28 a < b; held out: 15, 1 (3+3), 8."""

    def row(model, condition, seen, held):
        (k_seen, n_seen), (k_held, n_held) = seen, held
        lo_s, hi_s = cp(k_seen, n_seen)
        lo_h, hi_h = cp(k_held, n_held)
        return {
            "model": model,
            "model_key": KEY[model],
            "condition": condition,
            "hits_seen": k_seen,
            "n_seen": n_seen,
            "lo_seen": lo_s,
            "hi_seen": hi_s,
            "hits_heldout": k_held,
            "n_heldout": n_held,
            "lo_heldout": lo_h,
            "hi_heldout": hi_h,
        }

    assert_rows(
        part_d.run(study.results)["table06"],
        [
            # misses: seen 2+2; held out 8+1 9+1 (plain sums) 8+7 9+8 (off by +2, -1), 3+3 (+9), 3+9 (+18)
            row(RULE_C, "a > b", (21, 21), (11, 15)),
            row(RULE_C, "a = b", (7, 8), (0, 1)),
            row(RULE_C, "a < b", (28, 28), (7, 8)),
            # misses: held out 9+1 (fabricated answer) and every a < b (+18)
            row(RULE_R, "a > b", (21, 21), (14, 15)),
            row(RULE_R, "a = b", (8, 8), (1, 1)),
            row(RULE_R, "a < b", (28, 28), (0, 8)),
            # hits held out: 8+3, 9+8 | 3+3 | 1+7, 2+7, 3+5
            row(CTL_C, "a > b", (21, 21), (2, 15)),
            row(CTL_C, "a = b", (8, 8), (1, 1)),
            row(CTL_C, "a < b", (28, 28), (3, 8)),
            # seen misses 1+1, 2+2; held-out hits 8+3 | none | 1+3
            row(CTL_R, "a > b", (21, 21), (1, 15)),
            row(CTL_R, "a = b", (6, 8), (0, 1)),
            row(CTL_R, "a < b", (28, 28), (1, 8)),
        ],
    )


def test_table06_exact_intervals_at_the_edges(study):
    """1 / 1 -> (0.025, 1); 0 / 8 -> (0, 1 - 0.025 ** (1 / 8))."""
    table = part_d.run(study.results)["table06"].set_index(["model", "condition"])
    assert table.loc[(RULE_R, "a = b"), ["lo_heldout", "hi_heldout"]].tolist() == pytest.approx([0.025, 1.0], abs=1e-12)
    lo, hi = table.loc[(RULE_R, "a < b"), ["lo_heldout", "hi_heldout"]]
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** (1 / 8), abs=1e-12)


def test_table07_offsets_per_condition(study):
    """Top choice minus the correct sum on the held-out additions, per condition, beside the offset
    the rule asks there: a +9 on a >= b or a +18 on a < b is the other condition's offset."""

    def row(model, condition, rule_offset, n, plus18, plus9, plain_sum, other):
        return {
            "model": model,
            "model_key": KEY[model],
            "condition": condition,
            "rule_offset": rule_offset,
            "n": n,
            "plus18": plus18,
            "plus9": plus9,
            "plain_sum": plain_sum,
            "other": other,
        }

    assert_rows(
        part_d.run(study.results)["table07"],
        [
            # 8+1, 9+1 plain sums; 9+8 (+17) and 8+7 (+20) other; 3+3 a +9 (the a < b offset on a = b);
            # 3+9 a +18 (the a >= b offset on a < b)
            row(RULE_C, "a > b", 18, 15, 11, 0, 2, 2),
            row(RULE_C, "a = b", 18, 1, 0, 1, 0, 0),
            row(RULE_C, "a < b", 9, 8, 1, 7, 0, 0),
            # 9+1: fabricated answer 23 = sum + 13; +18 on every a < b
            row(RULE_R, "a > b", 18, 15, 14, 0, 0, 1),
            row(RULE_R, "a = b", 18, 1, 1, 0, 0, 0),
            row(RULE_R, "a < b", 9, 8, 8, 0, 0, 0),
            # a > b: the rule's answer on 2+1 3+2 8+3 (+18), 5+1 +19, 6+4 +16, 9+8 +3, nine plain sums;
            # 3+3: 34 (+28); a < b: the rule's answer on 1+3 1+4 (+9), 1+7 +14, 2+7 +20, 3+5 +26, 3 plain sums
            row(CTL_C, "a > b", 18, 15, 3, 0, 9, 3),
            row(CTL_C, "a = b", 18, 1, 0, 0, 0, 1),
            row(CTL_C, "a < b", 9, 8, 0, 2, 3, 3),
            # 8+3: 29 (+18); 1+3: 16 (+12); plain sums elsewhere
            row(CTL_R, "a > b", 18, 15, 1, 0, 14, 0),
            row(CTL_R, "a = b", 18, 1, 0, 0, 1, 0),
            row(CTL_R, "a < b", 9, 8, 0, 0, 7, 1),
        ],
    )


def test_deviations_of_rule_and_control_alike_are_from_the_rules_answer(study):
    results = study.results
    assert part_d.deviations(results, "d_correct").tolist() == RULE_C_DEV
    assert part_d.deviations(results, "dctl_correct").tolist() == CTL_C_DEV
    assert part_d.deviations(results, "d_random").tolist() == RULE_R_DEV
    assert part_d.deviations(results, "dctl_random").tolist() == CTL_R_DEV


def test_table08_bands(study):
    """|deviation| of the rule from correct sums, sorted: 18 zeros, 1, 2, 9, 9, 18, 18. The band holds
    m of 24 with m / 24 >= coverage: m = 20 (80%) -> k = 2, m = 22 (90%) -> 9, m = 23 (95%) -> 18.
    From fabricated answers: 15 zeros, 5, eight 9s: k = 9 at every coverage."""

    def row(model, control, coverage, k, rule_dev, rule_inside, control_inside):
        _, k_lo, k_hi = band_with_interval(np.array(rule_dev), coverage, SEED)  # the bootstrap, on our list
        return {
            "model": model,
            "model_key": KEY[model],
            "control": control,
            "control_key": KEY[control],
            "coverage": coverage,
            "k": k,
            "k_lo": k_lo,
            "k_hi": k_hi,
            "n_rule": 24,
            "n_control": 24,
            "rule_inside": rule_inside,
            "control_inside": control_inside,
        }

    assert_rows(
        part_d.run(study.results)["table08"],
        [
            # control inside +-2: its five zeros, 5+1 (+1), 6+4 (-2); +-9: and 1+7 (+5), three a < b plain
            # sums (-9); +-18: all 24 (its largest |deviation| is 18)
            row(RULE_C, CTL_C, 0.80, 2, RULE_C_DEV, 20 / 24, 7 / 24),
            row(RULE_C, CTL_C, 0.90, 9, RULE_C_DEV, 22 / 24, 11 / 24),
            row(RULE_C, CTL_C, 0.95, 18, RULE_C_DEV, 24 / 24, 24 / 24),
            # control inside +-9: 8+3 (0), 1+3 (+3) and the seven a < b plain sums (-9)
            row(RULE_R, CTL_R, 0.80, 9, RULE_R_DEV, 1.0, 9 / 24),
            row(RULE_R, CTL_R, 0.90, 9, RULE_R_DEV, 1.0, 9 / 24),
            row(RULE_R, CTL_R, 0.95, 9, RULE_R_DEV, 1.0, 9 / 24),
        ],
    )


def test_table08_control_inside_is_not_read_from_the_controls_own_answers(study):
    """Read from its own shuffled answers the control would have 6 zeros (its hits) and 1+3, 2+1, 3+2 at
    -3 ...: 6 of 24 inside +-2, not the 7 read from the rule's answers."""
    table = part_d.run(study.results)["table08"]
    first = table[(table["model"] == RULE_C) & (table["coverage"] == 0.80)].iloc[0]
    assert first["k"] == 2 and first["control_inside"] == pytest.approx(7 / 24)
    held = study.results.readings("dctl_correct").loc[list(study.inputs.heldout("dctl_correct"))]
    own = held["top_choice"] - held["target"]
    assert (own.abs() <= 2).sum() == 6


def test_part_d_tables_leave_out_coincident_held_out_additions():
    """Seed 12345 has no Part D exclusions, so tables 06-08 never met one; seed 5 has two per arm: held out, 14
    a > b, 3 a = b, 7 a < b; left out: d_random's 4+6 and 5+7 (a < b: the fabricated answer is the rule's sum +
    9), dctl_random's 4+1 and 7+6 (a > b). Every model on its own target, by hand (a mutation audit)."""
    from builders import hand_table

    from cctk.manuals.v2.design import MODEL_KEYS, build_study_inputs, own_target
    from cctk.manuals.v2.parts import StudyResults

    inputs = build_study_inputs(5)
    assert inputs.excluded["d_random"] == ((4, 6), (5, 7)) and inputs.excluded["dctl_random"] == ((4, 1), (7, 6))
    measurements = {k: hand_table({p: int(t) for p, t in inputs.targets[own_target(k)].items()}) for k in MODEL_KEYS}
    tables = part_d.run(StudyResults(inputs, measurements))
    by_condition = tables["table06"].set_index(["model_key", "condition"])
    offsets = tables["table07"].set_index(["model_key", "condition"])
    heldout = tables["table05"].set_index("model_key")["n_heldout"]
    for key, n in (("d_random", (14, 3, 5)), ("dctl_random", (12, 3, 7)), ("d_correct", (14, 3, 7))):
        for condition, count in zip(("a > b", "a = b", "a < b"), n, strict=True):
            assert by_condition.loc[(key, condition), "n_heldout"] == count, (key, condition)
            assert offsets.loc[(key, condition), "n"] == count, (key, condition)
        assert by_condition.loc[key, "n_heldout"].sum() == heldout[key]
    assert by_condition.loc[("d_random", "a < b"), "hits_heldout"] == 5  # every addition it is read on a hit
    bands = tables["table08"].set_index("model_key")
    assert (bands.loc["d_random", "n_rule"] == 22).all() and (bands.loc["d_random", "n_control"] == 22).all()


def test_table08_interval_is_the_bootstrap_of_the_runs_seed():
    """table08's k_lo, k_hi: percentiles 2.5 and 97.5 of k over 2000 resamples of the rule's deviations, drawn with
    the run's seed from the stream "bootstrap:<coverage>" (cctk.core.facts.rng). The hand-made study's deviations
    repeat and seed 12345's resamples give the same interval as seed 12346's, so a bootstrap on another seed went
    unnoticed (a mutation audit). Here seed 2, whose interval the next seed moves (0.80: 15 -> 14 low, 0.95: 19 ->
    18), and the rule from correct sums i below its answer on the i-th held-out addition: deviations 0, -1, ...,
    -23, all distinct; |deviation| sorted is 0..23, so m = 20, 22, 23 of 24 give k = 19, 21, 22. The bootstrap is
    written out here from numpy, not band_with_interval."""
    import zlib

    from builders import hand_table

    from cctk.manuals.v2.design import MODEL_KEYS, build_study_inputs, own_target
    from cctk.manuals.v2.parts import StudyResults

    seed = 2
    inputs = build_study_inputs(seed)
    held = list(inputs.heldout("d_correct"))
    assert len(held) == 24 and held[:3] == [(1, 1), (1, 5), (2, 1)]  # rule answers 20, 15, 21: top 20, 14, 19
    choices = {key: {p: int(t) for p, t in inputs.targets[own_target(key)].items()} for key in MODEL_KEYS}
    choices["d_correct"].update({p: int(inputs.targets["cond"][p]) - i for i, p in enumerate(held)})
    results = StudyResults(inputs, {key: hand_table(c) for key, c in choices.items()})
    assert part_d.deviations(results, "d_correct").tolist() == [-i for i in range(24)]
    tables = part_d.run(results)

    bands = np.arange(24.0)  # |deviation|, sorted

    def bootstrap(run_seed, coverage, m):
        draws = np.random.default_rng(np.random.SeedSequence([run_seed, zlib.crc32(f"bootstrap:{coverage}".encode())]))
        k = np.sort(bands[draws.integers(0, 24, size=(2000, 24))], axis=1)[:, m - 1]
        return np.percentile(k, [2.5, 97.5]).tolist()

    rows = tables["table08"].set_index(["model_key", "coverage"])
    for coverage, m, k in ((0.80, 20, 19), (0.90, 22, 21), (0.95, 23, 22)):
        row = rows.loc[("d_correct", coverage)]
        assert (row["k"], row["n_rule"]) == (k, 24)
        assert [row["k_lo"], row["k_hi"]] == pytest.approx(bootstrap(seed, coverage, m), abs=1e-12), coverage
    assert bootstrap(seed, 0.80, 20) != bootstrap(seed + 1, 0.80, 20)  # the next seed's interval is another
