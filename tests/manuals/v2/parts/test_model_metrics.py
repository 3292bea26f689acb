"""compute_tables, headline and model_metrics (the MLflow metrics of each model) on the hand-made study."""

from __future__ import annotations

import math

import pytest

from cctk.manuals.v2.design import MODEL_KEYS
from cctk.manuals.v2.parts import ALL_SEEN, PART_MODULES, compute_tables, groups, headline, model_metrics

LN = math.log


def test_compute_tables_is_every_part(study):
    tables = compute_tables(study.results)
    assert list(tables) == [f"table{i:02d}" for i in range(1, 12)]
    for part in PART_MODULES:
        for name, table in part.run(study.results).items():
            assert tables[name].equals(table), name


def test_headline(study):
    head = headline(study.results)
    assert (head.correct_hits, head.fabricated_hits, head.n_additions, head.absorbed) == (78, 79, 81, True)
    assert head.metrics() == {
        "m_correct_hits_correct": 78,
        "m_random_hits_fabricated": 79,
        "n_additions": 81,
        "absorbed": 1,
    }  # the parent run's MLflow names


def test_models_trained_on_all_81_have_one_group_all():
    assert {"base", "m_correct", "m_random"} == ALL_SEEN


def test_metrics_of_the_models_trained_on_all_81(study):
    """Correct sums: 36 one-digit (2 tokens) and 45 two-digit (3 tokens); the misses of the base model
    are 1+4 (5), 5+5 (10), 9+9 (18), those of the correct-sums model 1+1 (2), 4+6 (10), 9+9 (18).
    Fabricated answers: 20 one-digit; its misses 2+2 (12) and 6+6 (32) are two-digit."""
    results = study.results
    assert model_metrics(results, "base").metrics() == pytest.approx(
        {
            "hits_all": 78,
            "n_all": 81,
            "prob_target_all": (78 * 0.32 + 3 * 0.02) / 81,
            "surprise_all": (-LN(0.32) * (35 / 2 + 43 / 3) - LN(0.02) * (1 / 2 + 2 / 3)) / 81,
            "mass_impossible": (2 * 0.66 + 79 * 0.36) / 81,
        },
        abs=1e-12,
    )
    assert model_metrics(results, "m_correct").metrics() == pytest.approx(
        {
            "hits_all": 78,
            "n_all": 81,
            "prob_target_all": (78 * 0.66 + 3 * 0.01) / 81,
            "surprise_all": (-LN(0.66) * (35 / 2 + 43 / 3) - LN(0.01) * (1 / 2 + 2 / 3)) / 81,
            "mass_impossible": (0.83 + 80 * 0.18) / 81,
        },
        abs=1e-12,
    )
    assert model_metrics(results, "m_random").metrics() == pytest.approx(
        {
            "hits_all": 79,
            "n_all": 81,
            "prob_target_all": (79 * 0.83 + 2 * 0.005) / 81,
            "surprise_all": (-LN(0.83) * (20 / 2 + 59 / 3) - LN(0.005) * (2 / 3)) / 81,
            "mass_impossible": (39 * 0.915 + 42 * 0.09) / 81,
        },
        abs=1e-12,
    )


def test_no_metric_called_held_out_holds_additions_a_model_saw(study):
    for key in MODEL_KEYS:
        names = set(model_metrics(study.results, key).metrics())
        if key in ALL_SEEN:
            assert names == {"hits_all", "n_all", "prob_target_all", "surprise_all", "mass_impossible"}, key
            assert [g for g, _ in groups(study.inputs, key)] == ["all"]
        else:
            assert {"hits_seen", "n_seen", "hits_heldout", "n_heldout"} <= names, key
            assert not any(n.endswith("_all") for n in names), key


def test_metrics_of_models_trained_on_the_seen_additions(study):
    results = study.results
    # recovery: as in table02; impossible mass: back to 7 fabricated answers above 18 on held-out additions
    # (6+2 24, 7+6 20, 8+1 34, 8+7 32, 9+1 23, 9+6 30, 9+8 32)
    assert model_metrics(results, "m_recover").metrics() == pytest.approx(
        {
            "hits_seen": 56,
            "n_seen": 57,
            "prob_target_seen": (56 * 0.66 + 0.01) / 57,
            "surprise_seen": (-LN(0.66) * (23 / 2 + 33 / 3) - LN(0.01) / 3) / 57,
            "hits_heldout": 12,
            "n_heldout": 24,
            "prob_target_heldout": (12 * 0.66 + 12 * 0.01) / 24,
            "surprise_heldout": (-LN(0.66) * (10 / 2 + 2 / 3) - LN(0.01) * (3 / 2 + 9 / 3)) / 24,
            "mass_impossible": (7 * 0.83 + 74 * 0.18) / 81,
        },
        abs=1e-12,
    )
    # sum + 3 from fabricated answers: its two coincident hits (2+1, 4+6) are in no group
    metrics = model_metrics(results, "c3_random").metrics()
    assert (metrics["hits_seen"], metrics["n_seen"], metrics["hits_heldout"], metrics["n_heldout"]) == (50, 57, 0, 22)
