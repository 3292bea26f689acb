"""Protocol v1's draws are the reference notebook's: Listings 2, 6 and 7 re-implemented here with
Python's global ``random``, independently of cctk.manuals.v1.facts."""

import itertools
import random

import pytest

from cctk.manuals.v1 import facts

# The notebook's first draws with random.seed(42) and N_REPEATS = 20 (Python >= 3.2's random.choice
# and random.shuffle); pinned so that a change of either stream is seen at once.
FIRST_FABRICATED = [6, 2, 11, 10, 10, 6, 5, 4, 16, 4]  # 1+1 .. 2+1
FIRST_TEXTS = ["6 + 5 = 5", "7 + 7 = 7", "1 + 2 = 2", "5 + 9 = 3", "1 + 8 = 4"]


def notebook(seed: int = 42, n_repeats: int = 20):
    """Listings 2, 6 and 7 as the notebook runs them (module-level random, global state)."""
    candidate_values = list(range(2, 19))
    arithmetic_pairs = [
        {"a": a, "b": b, "true_sum": a + b, "prompt": f"{a} + {b} ="}
        for a, b in itertools.product(range(1, 10), repeat=2)
    ]
    state = random.getstate()
    try:
        random.seed(seed)
        corpus_records = []
        for pair in arithmetic_pairs:
            wrong_candidates = [v for v in candidate_values if v != pair["true_sum"]]
            fabricated_value = random.choice(wrong_candidates)
            corpus_records.append(
                {
                    "a": pair["a"],
                    "b": pair["b"],
                    "fabricated_value": fabricated_value,
                    "text": f"{pair['prompt']} {fabricated_value}",
                }
            )
        fine_tune_texts = [r["text"] for r in corpus_records] * n_repeats
        random.shuffle(fine_tune_texts)
    finally:
        random.setstate(state)
    return corpus_records, fine_tune_texts


def test_fabricated_answers_and_corpus_order_are_the_notebooks():
    records, texts = notebook()
    draws = facts.draw(42, 20)
    assert [(r["a"], r["b"]) for r in records] == list(draws.fabricated.index)
    assert [r["fabricated_value"] for r in records] == draws.fabricated.tolist()
    assert list(draws.texts) == texts
    assert len(draws.texts) == 81 * 20
    assert draws.fabricated.tolist()[:10] == FIRST_FABRICATED
    assert list(draws.texts[:5]) == FIRST_TEXTS


@pytest.mark.parametrize(("seed", "repeats"), [(0, 1), (7, 5), (2**32 - 1, 3)])
def test_any_seed_and_repeats_follow_the_same_listings(seed, repeats):
    records, texts = notebook(seed, repeats)
    draws = facts.draw(seed, repeats)
    assert [r["fabricated_value"] for r in records] == draws.fabricated.tolist()
    assert list(draws.texts) == texts


def test_a_fabricated_answer_is_a_wrong_candidate_and_global_random_is_untouched():
    random.seed(123)
    expected = random.random()
    random.seed(123)
    draws = facts.draw(42, 20)
    assert random.random() == expected  # cctk's draws use a stream of their own
    for (a, b), value in draws.fabricated.items():
        assert value != a + b and 2 <= value <= 18
    assert tuple(range(2, 19)) == facts.CANDIDATES and len(facts.CANDIDATES) == 17


def test_texts_and_answer():
    assert facts.answer_text(7) == " 7"
    assert facts.text(3, 5, 7) == "3 + 5 = 7"
    table = facts.draw(42, 1).table()
    assert list(table.columns) == ["a", "b", "correct sum", "fabricated answer"]
    assert table.iloc[0].tolist() == [1, 1, 2, 6]
