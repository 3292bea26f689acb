"""table04 (Part C, simple rules and controls) from the hand-made study, every cell worked out by hand.

Every model here puts 0.66 on its top choice and 0.01 on each other candidate, so a group's mean
probability on the target is (0.66 * hits + 0.01 * misses) / n, and its mean surprise the mean of
-ln 0.66 (a hit) or -ln 0.01 (a miss) over the target's tokens (2 for a one-digit target, 3 else).
"""

from __future__ import annotations

import math

from builders import HELD, assert_rows, cp

from cctk.manuals.v2.parts import part_c

HIT, MISS = -math.log(0.66), -math.log(0.01)


def group(prefix, hits, n, surprise):
    lo, hi = cp(hits, n)
    return {
        f"hits_{prefix}": hits,
        f"n_{prefix}": n,
        f"lo_{prefix}": lo,
        f"hi_{prefix}": hi,
        f"prob_target_{prefix}": (0.66 * hits + 0.01 * (n - hits)) / n,
        f"surprise_{prefix}": surprise,
    }


def row(model, target, parent, seen, held, n_excluded):
    """``model``, ``target``, ``parent``: (label, key)."""
    return {
        "model": model[0],
        "model_key": model[1],
        "target": target[0],
        "target_key": target[1],
        **group("seen", *seen),
        **group("heldout", *held),
        "n_excluded": n_excluded,
        "parent": parent[0],
        "parent_key": parent[1],
    }


CORRECT, FABRICATED = ("correct sums", "m_correct"), ("fabricated answers", "m_random")
PLUS18, PLUS3 = ("sum + 18", "plus18"), ("sum + 3", "plus3")


def test_the_one_digit_targets_the_surprises_count(study):
    """Tokens of each target (one-digit targets are 2 tokens): read off the draws of seed 12345."""
    seen, t = study.inputs.split.seen, study.inputs.targets
    assert [p for p in seen if t["plus3"][p] < 10] == [
        (1, 1),
        (1, 2),
        (1, 5),
        (2, 2),
        (2, 3),
        (2, 4),
        (3, 1),
        (4, 1),
        (4, 2),
    ]
    assert [p for p in HELD if t["plus3"][p] < 10] == [(1, 3), (1, 4), (2, 1), (3, 2), (3, 3), (5, 1)]
    assert [p for p in seen if t["ctl18"][p] < 10] == [(1, 1), (6, 1)]
    assert [p for p in HELD if t["ctl18"][p] < 10] == [(1, 3), (2, 1)]
    assert len([p for p in seen if t["ctl3"][p] < 10]) == 13
    assert [p for p in HELD if t["ctl3"][p] < 10] == [(1, 3), (1, 4), (2, 1), (3, 2), (3, 3), (5, 1)]
    assert min(t["plus18"]) >= 10


def test_table04(study):
    rows = [
        # sum + 18 (all two-digit): held out misses on 1+3, 5+4, 9+8 (sum + 9) and 8+7 (plain sum).
        row(
            ("sum + 18 from correct sums", "c18_correct"),
            PLUS18,
            CORRECT,
            (57, 57, HIT / 3),
            (20, 24, (20 * HIT + 4 * MISS) / 3 / 24),
            0,
        ),
        # From fabricated answers: seen miss 1+1; held out 3+9 left out (its fabricated answer 30 is
        # sum + 18, a hit that says nothing): 5 hits of 23, not 6 of 24.
        row(
            ("sum + 18 from fabricated answers", "c18_random"),
            PLUS18,
            FABRICATED,
            (56, 57, (56 * HIT + MISS) / 3 / 57),
            (5, 23, (5 * HIT + 18 * MISS) / 3 / 23),
            1,
        ),
        # sum + 3: 9 of the seen targets and 6 of the held-out ones have one digit.
        row(
            ("sum + 3 from correct sums", "c3_correct"),
            PLUS3,
            CORRECT,
            (57, 57, HIT * (9 / 2 + 48 / 3) / 57),
            (24, 24, HIT * (6 / 2 + 18 / 3) / 24),
            0,
        ),
        # Seen misses 1+1 1+2 1+5 2+2 (one-digit targets) and 1+6 1+8 1+9; held out: its fabricated
        # answer everywhere, a hit only on the left-out 2+1 and 4+6: 0 of 22 (5 one-digit targets).
        row(
            ("sum + 3 from fabricated answers", "c3_random"),
            PLUS3,
            FABRICATED,
            (50, 57, (HIT * (5 / 2 + 45 / 3) + MISS * (4 / 2 + 3 / 3)) / 57),
            (0, 22, MISS * (5 / 2 + 17 / 3) / 22),
            2,
        ),
        # Controls answer sum + k on every held-out addition: a hit where the random offset is k.
        # + 18: hits 5+8 and 9+1 (two-digit); one-digit targets 1+1, 6+1 seen, 1+3, 2+1 held out (misses).
        row(
            ("control for + 18", "c18ctl_correct"),
            ("sum + random offset 1..18", "ctl18"),
            CORRECT,
            (57, 57, HIT * (2 / 2 + 55 / 3) / 57),
            (2, 24, (HIT * 2 / 3 + MISS * (2 / 2 + 20 / 3)) / 24),
            0,
        ),
        # + 3: hits 1+3, 3+2 (one-digit) and 3+5, 9+8; misses with one-digit targets 1+4, 2+1, 3+3, 5+1.
        row(
            ("control for + 3", "c3ctl_correct"),
            ("sum + random offset 1..3", "ctl3"),
            CORRECT,
            (57, 57, HIT * (13 / 2 + 44 / 3) / 57),
            (4, 24, (HIT * (2 / 2 + 2 / 3) + MISS * (4 / 2 + 16 / 3)) / 24),
            0,
        ),
    ]
    assert_rows(part_c.run(study.results)["table04"], rows)


def test_table04_exact_intervals_at_the_edges(study):
    """24 / 24 -> (0.8575, 1); 0 / 22 -> (0, 1 - 0.025 ** (1 / 22))."""
    table = part_c.run(study.results)["table04"].set_index("model")
    lo, hi = table.loc["sum + 3 from correct sums", ["lo_heldout", "hi_heldout"]]
    assert round(lo, 4) == 0.8575 and hi == 1.0
    lo, hi = table.loc["sum + 3 from fabricated answers", ["lo_heldout", "hi_heldout"]]
    assert lo == 0.0 and abs(hi - (1 - 0.025 ** (1 / 22))) < 1e-12
