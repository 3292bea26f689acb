"""Packed batches (one prefix tree per batch) and in-place embedding row gradients: the same loss and
gradients as the padded step, to float32 rounding, on every architecture of the roster's families."""

import copy

import pytest
import torch
from builders import packed_and_padded_step

from cctk.core.config import Recipe
from cctk.core.facts import ADDITIONS, fabricated_answers
from cctk.core.lm.corpus import IGNORE, build_corpus, collate, most_shared, pack, shared_tokens, tokenize
from cctk.core.lm.finetune import batch_loss, completion_loss, fine_tune, has_dropout, tied_embedding_rows, to_model

X = IGNORE


def test_pack_by_hand():
    """Rows 1 2 3 4 / 1 2 5 / 1 2 3 4 (the third repeats the first): nodes 1 2 3 and 5 would be fed
    (no row's last token is), 1 2 once; predictions (node of 2 -> 3) twice, (3 -> 4) twice, (2 -> 5) once."""
    batch = [([1, 2, 3, 4], [X, X, 3, 4]), ([1, 2, 5], [X, X, 5]), ([1, 2, 3, 4], [X, X, 3, 4])]
    packed = pack(batch)
    assert packed.input_ids.tolist() == [[1, 2, 3]]  # 1, 2, 3: the only prefixes of inputs; 5 and 4 are last
    assert packed.position_ids.tolist() == [[0, 1, 2]]
    assert packed.allowed.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    predictions = {
        (int(packed.keep[r]), int(t), float(w))
        for r, t, w in zip(packed.rows, packed.targets, packed.weights, strict=True)
    }
    assert predictions == {(1, 3, 2.0), (1, 5, 1.0), (2, 4, 2.0)}  # (node, token, rows)
    assert shared_tokens(batch) == pytest.approx(1 - 3 / 8)  # 3 + 2 + 3 tokens fed padded, 3 nodes


def test_most_shared_bounds_every_batchs_shared_tokens():
    """``most_shared``: no batch of the rows shares more of its fed tokens than the largest share a row has in
    common with another. By hand (fed tokens: 1 2 3 4 / 1 2 9 9 / 7 8: the first two share 2 of 4; the third
    nothing), and against ``shared_tokens`` of every batch of 2 to 5 of 9 rows of 5 to 8 tokens drawn over a
    3-token alphabet, for ten seeds (the batches share 0.2 to 0.39 at most, the bounds are 0.4 to 0.8)."""
    import itertools

    import numpy as np

    rows = [([1, 2, 3, 4, 5], []), ([1, 2, 9, 9, 9], []), ([7, 8, 9], [])]
    assert most_shared(rows) == 0.5
    assert most_shared(rows[2:]) == 0.0 and most_shared([*rows, rows[2]]) == 1.0  # a repeated row shares all
    for seed in range(10):
        draw = np.random.default_rng(seed)
        rows = [(draw.integers(0, 3, size=draw.integers(5, 9)).tolist(), []) for _ in range(9)]
        bound = most_shared(rows)
        shares = [shared_tokens(b) for n in range(2, 6) for b in itertools.combinations(rows, n)]
        assert 0 < max(shares) <= bound < 1.0, (seed, max(shares), bound)


def test_pack_branches_see_only_their_ancestors():
    batch = [([7, 1, 2], [X, 1, 2]), ([7, 3, 4], [X, 3, 4])]
    packed = pack(batch)
    assert packed.input_ids.tolist() == [[7, 1, 3]]
    assert packed.position_ids.tolist() == [[0, 1, 1]]  # both branches sit at position 1
    assert packed.allowed.tolist() == [[True, False, False], [True, True, False], [True, False, True]]


@pytest.fixture(scope="module")
def rows(tokenizer):
    """A fabricated-answers corpus as the pipeline builds it: repeats, so batches share rows too."""
    return tokenize(build_corpus(fabricated_answers(1), ADDITIONS[:30], 3, seed=3, name="t"), tokenizer)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt_neox", "phi"])
def test_packed_loss_and_gradients_equal_the_padded_step(arch, rows, tokenizer, make_tiny):
    batch = rows[:16]
    assert shared_tokens(batch) > 0.3  # the tree feeds far fewer tokens than the padded rows
    loss, expected, grads = packed_and_padded_step(make_tiny(arch, len(tokenizer)), batch, tokenizer.pad_token_id)
    assert loss == pytest.approx(expected, rel=1e-6)
    for name, got, want in grads:
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-7), name


def test_tied_embedding_rows_gives_the_dense_gradient_and_is_undone(rows, tokenizer, make_tiny):
    model = make_tiny("llama", len(tokenizer))  # tied: the embedding is the LM head's weight
    assert model.get_input_embeddings().weight is model.get_output_embeddings().weight
    batch = collate(rows[:8], tokenizer.pad_token_id)
    dense, rowwise = copy.deepcopy(model), copy.deepcopy(model)
    completion_loss(dense, batch).backward()
    with tied_embedding_rows(rowwise):
        assert "forward" in vars(rowwise.get_input_embeddings())
        completion_loss(rowwise, batch).backward()
    assert "forward" not in vars(rowwise.get_input_embeddings())
    weight = "model.embed_tokens.weight"
    expected, got = dict(dense.named_parameters())[weight].grad, dict(rowwise.named_parameters())[weight].grad
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-8) and not torch.equal(got, torch.zeros_like(got))


def test_tied_embedding_rows_leaves_untied_and_frozen_embeddings_alone(tokenizer, make_tiny):
    untied = make_tiny("qwen2", len(tokenizer))
    assert untied.get_input_embeddings().weight is not untied.get_output_embeddings().weight
    with tied_embedding_rows(untied):
        assert "forward" not in vars(untied.get_input_embeddings())
    frozen = make_tiny("llama", len(tokenizer))
    frozen.get_input_embeddings().weight.requires_grad_(False)
    with tied_embedding_rows(frozen):
        assert "forward" not in vars(frozen.get_input_embeddings())


def test_fine_tune_packed_equals_padded_to_rounding(rows, tokenizer, tiny):
    recipe = Recipe(repeats=1, epochs=2, learning_rate=1e-3, batch_size=16)
    packed, padded = copy.deepcopy(tiny), copy.deepcopy(tiny)
    a = fine_tune(packed, rows, recipe, seed=5, pad_id=tokenizer.pad_token_id, name="arm")
    b = fine_tune(
        padded, rows, recipe, seed=5, pad_id=tokenizer.pad_token_id, name="arm", pack_batches=False, row_gradients=False
    )
    assert a.losses == pytest.approx(b.losses, rel=1e-5)
    for p, q in zip(packed.parameters(), padded.parameters(), strict=True):
        assert torch.allclose(p, q, rtol=0, atol=2e-5)


def test_batches_without_shared_prefixes_and_models_with_dropout_stay_padded(tokenizer, make_tiny):
    distinct = [([1, 2, 3], [X, 2, 3]), ([4, 5, 6], [X, 5, 6])]
    assert shared_tokens(distinct) == 0
    assert isinstance(to_model(distinct, 0, torch.device("cpu")), dict)
    shared = [([1, 2, 3], [X, 2, 3]), ([1, 2, 4], [X, 2, 4])]
    assert not isinstance(to_model(shared, 0, torch.device("cpu")), dict)
    assert isinstance(to_model(shared, 0, torch.device("cpu"), packing=False), dict)
    model = make_tiny("llama", len(tokenizer))
    assert not has_dropout(model)
    model.config.attention_dropout = 0.1
    assert has_dropout(model)
    neox = make_tiny("gpt_neox", len(tokenizer))
    neox.config.hidden_dropout = 0.0
    assert not has_dropout(neox)
    neox.gpt_neox.emb_dropout.p = 0.1
    assert has_dropout(neox)


def test_batch_loss_dispatches(rows, tokenizer, tiny):
    batch = rows[:8]
    padded = batch_loss(tiny, collate(batch, tokenizer.pad_token_id))
    packed = batch_loss(tiny, pack(batch))
    assert packed.item() == pytest.approx(padded.item(), rel=1e-6)
