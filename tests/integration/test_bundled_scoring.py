"""End-to-end checks on the bundled SmolLM2-135M (GGUF, Q4_1 dequantized to float32)."""

import numpy as np
import pytest
from builders import packed_and_padded_step

from cctk import load_model, measure
from cctk.core.facts import correct_sums
from cctk.core.lm.scoring import measure_plain
from cctk.core.readings import read

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bundled():
    return load_model("smollm2-135m-bundled")


@pytest.fixture(scope="module")
def table(bundled):
    return measure(*bundled)


# The plain loop costs a forward pass per row (four minutes for all 2835 here; tests/integration/
# test_scoring_full_grid.py reads every row on the tiny Llama). On the bundled model `measure` packs the 81
# additions in three passes of 27 rows, every prompt 5 tokens (no padding): the first and last row of each pass,
# a middle one and the golden rows' additions, 8 x 35 = 280 rows, read from the table of all 81.
READ = ((1, 1), (3, 5), (3, 9), (4, 1), (5, 5), (6, 9), (7, 1), (9, 9))


# slow: 45 s of the default suite's 10 minutes; the packed scorer against the plain loop stays in on tiny models
# (tests/core/lm/test_scoring.py), and the bundled model's golden log-probs below
@pytest.mark.slow
def test_measure_equals_plain_loop_on_the_first_and_last_rows_of_every_pass(bundled, table):
    assert len(table) == 2835
    plain = measure_plain(*bundled, READ)
    fast = table[[pair in READ for pair in zip(table["a"], table["b"], strict=True)]].reset_index(drop=True)
    assert len(plain) == len(fast) == len(READ) * 35
    assert (
        (fast[["a", "b", "candidate_value", "n_tokens"]] == plain[["a", "b", "candidate_value", "n_tokens"]])
        .all()
        .all()
    )
    assert np.abs(fast["logprob"].to_numpy() - plain["logprob"].to_numpy()).max() <= 1e-3


# Pinned from `measure` on the bundled model (transformers 5.24, torch 2.13 CPU, float32).
# A change in tokenization, masking, positions or the end marker moves these by far more than 1e-3.
GOLDEN = {
    (3, 5, 8): -4.426402,
    (3, 5, 18): -6.415199,
    (3, 5, 2): -6.74855,
    (9, 9, 18): -4.626058,
    (1, 1, 36): -8.400526,
}


def test_golden_logprobs(table):
    keyed = table.set_index(["a", "b", "candidate_value"])["logprob"]
    for key, expected in GOLDEN.items():
        assert keyed[key] == pytest.approx(expected, abs=1e-3), key


def test_golden_n_tokens_and_hits(table):
    keyed = table.set_index(["a", "b", "candidate_value"])["n_tokens"]
    assert keyed[(3, 5, 8)] == 3 and keyed[(3, 5, 18)] == 4
    assert read(table, correct_sums())["hit"].sum() == 9  # the base model is weak at arithmetic


def test_packed_step_equals_the_padded_step_on_the_bundled_model(bundled):
    """Issue 19's savings on the real model: a quick-profile batch of 32 fabricated answers, trained
    as one prefix tree with in-place embedding row gradients, gives the padded step's loss and
    gradients to float32 rounding; two optimizer steps (batches of 8: the batch of 32 is the gradients' check)
    give the same weights."""
    import copy
    import dataclasses

    from cctk.core.facts import ADDITIONS, fabricated_answers
    from cctk.core.lm.corpus import build_corpus, shared_tokens, tokenize
    from cctk.core.lm.finetune import fine_tune
    from cctk.manuals.v2.config import PROFILES

    model, tokenizer = bundled
    recipe = PROFILES["quick"]
    rows = tokenize(build_corpus(fabricated_answers(7), ADDITIONS, recipe.repeats, seed=7, name="f"), tokenizer)
    batch = rows[: recipe.batch_size]
    assert shared_tokens(batch) > 0.3
    loss, expected, grads = packed_and_padded_step(model, batch, tokenizer.pad_token_id)
    assert loss == pytest.approx(expected, rel=1e-5)
    for name, got, want in grads:
        assert (got - want).norm() <= 1e-4 * want.norm(), name
    del grads

    two_steps = dataclasses.replace(recipe, repeats=1, epochs=1, batch_size=8, schedule="constant", warmup=0.0)
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    ra = fine_tune(a, rows[:16], two_steps, seed=3, pad_id=tokenizer.pad_token_id, name="arm")
    rb = fine_tune(
        b,
        rows[:16],
        two_steps,
        seed=3,
        pad_id=tokenizer.pad_token_id,
        name="arm",
        pack_batches=False,
        row_gradients=False,
    )
    assert ra.steps == 2 and ra.losses == pytest.approx(rb.losses, rel=1e-5)
    # AdamW divides by the gradient's own scale, so a weight whose gradient is near 0 turns float32 rounding
    # into a visible move: on one machine 1 of the 134.5M weights (an embedding row) ended 2.9e-5 apart.
    # Every weight stays within AdamW's largest move (lr a step), and at most a handful beyond 2e-5.
    beyond, largest = 0, 0.0
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        gap = (p - q).abs().detach()
        beyond, largest = beyond + int((gap > 2e-5).sum()), max(largest, float(gap.max()))
    assert largest <= two_steps.learning_rate * ra.steps and beyond <= 10, (largest, beyond)
