import copy

import pytest
import torch

from cctk.config import Recipe
from cctk.corpus import build_corpus, collate, tokenize
from cctk.facts import ADDITIONS, correct_sums
from cctk.finetune import NonFiniteLoss, completion_loss, fine_tune

RECIPE = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16)


@pytest.fixture(scope="module")
def rows(tokenizer):
    return tokenize(build_corpus(correct_sums(), ADDITIONS[:20], 2, seed=3, name="t"), tokenizer)


def test_completion_loss_equals_transformers_loss(tiny, rows, tokenizer):
    batch = collate(rows[:8], tokenizer.pad_token_id)
    ours = completion_loss(tiny, batch)
    theirs = tiny(**batch).loss
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)


def test_same_seed_same_weights_and_loss_falls(tiny, rows, tokenizer):
    first, second = copy.deepcopy(tiny), copy.deepcopy(tiny)
    a = fine_tune(first, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(second, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    assert a.losses == b.losses
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters()))
    assert a.losses[-1] < a.losses[0]
    assert a.steps == 2 * -(-len(rows) // 16) and a.examples == len(rows)
    assert not first.training


def test_different_seed_different_batch_order(tiny, rows, tokenizer):
    a = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(copy.deepcopy(tiny), rows, RECIPE, seed=6, pad_id=tokenizer.pad_token_id, name="arm")
    assert a.losses != b.losses


def test_non_finite_loss_stops_the_run(tiny, rows, tokenizer):
    broken = copy.deepcopy(tiny)
    with torch.no_grad():
        broken.model.norm.weight.fill_(float("nan"))
    with pytest.raises(NonFiniteLoss, match="arm: the loss became nan at epoch 1, step 1"):
        fine_tune(broken, rows, RECIPE, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
