"""Whole-text rows (Listings 8-9): every token is a label, padding is -100, and cctk's loss on them is
the loss the notebook's loop computes."""

import itertools

import torch

from cctk.core.lm.corpus import IGNORE, collate
from cctk.core.lm.finetune import completion_loss
from cctk.core.lm.scoring import encode
from cctk.manuals.v1 import corpus, facts


def test_rows_label_every_token(tokenizer):
    rows = corpus.tokenize(["3 + 5 = 7", "9 + 9 = 18", "3 + 5 = 7"], tokenizer)
    assert rows[1][0] == encode(tokenizer, "9 + 9 = 18", special=True)
    assert len(rows) == 3
    for ids, labels in rows:
        assert ids == labels
    rows[0][1][0] = -1  # rows are copies: the cache is not shared
    assert rows[2][1][0] != -1


def test_whole_text_tokens_are_prompt_then_answer_for_the_bundled_tokenizer(tokenizer):
    """Training tokenizes "3 + 5 = 7" as one string (the notebook), measurement prompt and answer apart:
    for SmolLM2 both give the same tokens, so the boundary is the same in training and measurement."""
    for (a, b), v in itertools.product(itertools.product(range(1, 10), repeat=2), facts.CANDIDATES):
        whole = encode(tokenizer, facts.text(a, b, v), special=True)
        apart = encode(tokenizer, f"{a} + {b} =", special=True) + encode(tokenizer, facts.answer_text(v), special=False)
        assert whole == apart, (a, b, v)


def test_loss_equals_the_notebooks(tiny, tokenizer):
    texts = list(facts.draw(42, 20).texts[8:16])  # a batch of the notebook's corpus: 2- and 3-token answers
    assert len({len(encode(tokenizer, t, special=True)) for t in texts}) > 1  # so that padding happens
    # Listings 8-9: padded by the tokenizer, labels = input_ids with the padding at -100, HF's loss.
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    labels = enc["input_ids"].clone()
    labels[enc["attention_mask"] == 0] = -100
    with torch.no_grad():
        expected = tiny(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
        batch = collate(corpus.tokenize(texts, tokenizer), tokenizer.pad_token_id)
        got = completion_loss(tiny, batch)
    assert (batch["labels"] == IGNORE).sum() == (batch["attention_mask"] == 0).sum()
    assert torch.allclose(got, expected, atol=1e-5)
