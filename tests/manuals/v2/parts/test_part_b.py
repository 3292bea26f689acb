"""table02 (recovery) and table03 (loss per epoch, Parts A and B) from the hand-made study."""

from __future__ import annotations

import math

from builders import assert_rows, cp

from cctk.core.records import TrainRecord
from cctk.manuals.v2.parts import StudyResults, part_b

LN = math.log


def recovery_row(model, model_key, seen, held):
    """``seen`` / ``held``: (hits, n, mean prob on target, mean surprise)."""
    row = {"model": model, "model_key": model_key, "target": "correct sum", "target_key": "correct"}
    for name, (hits, n, prob, surprise) in (("recovery_seen", seen), ("recovery_heldout", held)):
        lo, hi = cp(hits, n)
        row.update(
            {
                f"hits_{name}": hits,
                f"n_{name}": n,
                f"lo_{name}": lo,
                f"hi_{name}": hi,
                f"prob_target_{name}": prob,
                f"surprise_{name}": surprise,
            }
        )
    row["surprise_gap"] = held[3] - seen[3]
    return row


def test_table02(study):
    # Surprise = -ln(prob on the correct sum) / tokens (2 for a one-digit sum, 3 for a two-digit one).
    # Seen: 23 one-digit and 34 two-digit sums; held out: 13 and 11.
    # fabricated answers (0.83 / 0.005) hits the correct sum on the seen 2+2 (4) and 6+6 (12) only.
    fabricated_seen = (-LN(0.83) * (1 / 2 + 1 / 3) - LN(0.005) * (22 / 2 + 33 / 3)) / 57
    fabricated_held = -LN(0.005) * (13 / 2 + 11 / 3) / 24
    # recovery (0.66 / 0.01) misses the seen 5+5 (10); held out, it hits the first 12
    # (1+3 1+4 1+7 2+1 2+7 3+2 3+3 3+5 3+9 4+6 5+1 5+4: 10 one-digit sums) and misses the last 12
    # (5+8 6+2 6+4 7+2 7+6 8+1 8+3 8+5 8+7 9+1 9+6 9+8: 3 one-digit sums).
    recover_seen = (-LN(0.66) * (23 / 2 + 33 / 3) - LN(0.01) / 3) / 57
    recover_held = (-LN(0.66) * (10 / 2 + 2 / 3) - LN(0.01) * (3 / 2 + 9 / 3)) / 24
    assert_rows(
        part_b.run(study.results)["table02"],
        [
            recovery_row(
                "fabricated answers",
                "m_random",
                (2, 57, (2 * 0.83 + 55 * 0.005) / 57, fabricated_seen),
                (0, 24, 0.005, fabricated_held),
            ),
            recovery_row(
                "recovery",
                "m_recover",
                (56, 57, (56 * 0.66 + 0.01) / 57, recover_seen),
                (12, 24, (12 * 0.66 + 12 * 0.01) / 24, recover_held),
            ),
        ],
    )


def test_table02_calls_no_group_of_a_model_trained_on_all_81_held_out(study):
    """The fabricated-answers model saw every addition: both groups are the recovery run's."""
    columns = part_b.run(study.results)["table02"].columns
    grouped = [c for c in columns if c.endswith(("_seen", "_heldout"))]
    assert len(grouped) == 12 and all("_recovery_" in c for c in grouped)


def test_table03_one_column_per_run_and_a_shorter_run_padded(study):
    nan = float("nan")
    assert_rows(
        part_b.run(study.results)["table03"],
        [
            {"epoch": 1, "correct sums": 2.0, "fabricated answers": 3.0, "recovery": 1.25},
            {"epoch": 2, "correct sums": 0.5, "fabricated answers": 1.5, "recovery": 0.5},
            {"epoch": 3, "correct sums": 0.25, "fabricated answers": 0.75, "recovery": nan},
        ],
    )


def test_table03_leaves_out_runs_without_a_record(study):
    """A resumed run before recovery trained: only the runs on record, and no rule run ever."""
    record = TrainRecord(1620, 203, 81.0, (2.0, 0.5), 0)
    results = StudyResults(
        study.inputs,
        study.results.measurements,
        {"m_correct": record, "c18_correct": TrainRecord(1, 1, 1.0, (9.0,), 0)},
    )
    assert_rows(part_b.run(results)["table03"], [{"epoch": 1, "correct sums": 2.0}, {"epoch": 2, "correct sums": 0.5}])
