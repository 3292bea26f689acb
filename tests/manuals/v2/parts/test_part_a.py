"""table01 (Part A, corpus absorption) from the hand-made study, every cell worked out by hand."""

from __future__ import annotations

from builders import assert_rows, cp

from cctk.manuals.v2.parts import part_a


def row(model, target, hits, prob_target, mass_impossible):
    """``model``, ``target``: (label, key)."""
    lo, hi = cp(hits, 81)
    return {
        "model": model[0],
        "model_key": model[1],
        "target": target[0],
        "target_key": target[1],
        "hits": hits,
        "n": 81,
        "lo": lo,
        "hi": hi,
        "prob_target": prob_target,
        "mass_impossible": mass_impossible,
    }


def test_table01(study):
    # base (0.32 on its choice, 0.02 elsewhere): fabricated answers on 1+4 (36), 5+5 (7), 9+9 (31).
    #   impossible mass: 36 and 31 are above 18 (0.32 + 17 * 0.02 = 0.66); the other 79 additions
    #   put 0.02 on each of the 18 candidates 19..36 (0.36).
    # correct sums (0.66 / 0.01): sum + 1 on 1+1, 4+6, 9+9 (19, above 18: 0.66 + 17 * 0.01 = 0.83).
    # fabricated answers (0.83 / 0.005): correct sums on 2+2, 6+6; 39 choices above 18 (the 40
    #   fabricated answers above 18 but 6+6's 32): 0.83 + 17 * 0.005 = 0.915; 42 others: 18 * 0.005.
    #   A fabricated answer is never the correct sum, so the correct-sums model has 0 hits on it.
    base_mass = (2 * 0.66 + 79 * 0.36) / 81
    correct_mass = (0.83 + 80 * 0.18) / 81
    fabricated_mass = (39 * 0.915 + 42 * 0.09) / 81
    base, correct = ("base model", "base"), ("correct sums", "m_correct")
    fabricated = ("fabricated answers", "m_random")
    on_sum, on_fabricated = ("correct sum", "correct"), ("fabricated answer", "fabricated")
    assert_rows(
        part_a.run(study.results)["table01"],
        [
            row(base, on_sum, 78, (78 * 0.32 + 3 * 0.02) / 81, base_mass),
            row(base, on_fabricated, 3, (3 * 0.32 + 78 * 0.02) / 81, base_mass),
            row(correct, on_sum, 78, (78 * 0.66 + 3 * 0.01) / 81, correct_mass),
            row(correct, on_fabricated, 0, 0.01, correct_mass),
            row(fabricated, on_sum, 2, (2 * 0.83 + 79 * 0.005) / 81, fabricated_mass),
            row(fabricated, on_fabricated, 79, (79 * 0.83 + 2 * 0.005) / 81, fabricated_mass),
        ],
    )


def test_table01_intervals_are_exact_clopper_pearson(study):
    """Literal values beside SciPy's: 0 / 81 has the closed form 1 - 0.025 ** (1 / 81)."""
    table = part_a.run(study.results)["table01"].set_index(["model", "target"])
    lo, hi = table.loc[("correct sums", "fabricated answer"), ["lo", "hi"]]
    assert lo == 0.0 and abs(hi - (1 - 0.025 ** (1 / 81))) < 1e-12
    lo, hi = table.loc[("fabricated answers", "fabricated answer"), ["lo", "hi"]]
    assert (round(lo, 6), round(hi, 6)) == (0.913637, 0.996996)  # 79 / 81
