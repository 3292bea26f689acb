"""The KR-Test rule on hand-made items whose answer is known, and packing against one pass per side."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from builders import tiny_model

from cctk.krtest.generation.generate import make_dataset
from cctk.krtest.measurement.items import Item, open_book
from cctk.krtest.measurement.scoring import ITEM_COLUMNS, score, score_plain, summarize

WORDS = ["<pad>", "<bos>", "ctx", "other", "a", "b", "c", "d", "e", "f", "x", "y", "z", "w", "p", "q"]


class WordTokenizer:
    """Words to ids; a leading space is no token of its own; ``<bos>`` with the special tokens."""

    pad_token_id = 0

    def __call__(self, text, add_special_tokens=True):
        ids = [WORDS.index(w) for w in text.split()]
        return {"input_ids": ([1] if add_special_tokens else []) + ids}


class Bigram(torch.nn.Module):
    """A language model whose next-token distribution depends on the last token only: log p(j | i) = table[i, j]."""

    def __init__(self, logits: torch.Tensor):
        super().__init__()
        self.head = torch.nn.Linear(1, len(WORDS), bias=False)  # only for the vocabulary size
        self.table = torch.nn.Parameter(logits.log_softmax(-1))

    def get_output_embeddings(self):
        return self.head

    def forward(self, input_ids, position_ids=None, attention_mask=None, logits_to_keep=None, use_cache=None):
        logits = self.table[input_ids]
        return SimpleNamespace(logits=logits if logits_to_keep is None else logits[:, logits_to_keep])


def bigram(**probs) -> Bigram:
    """Uniform rows, except ``probs["a_b"] = p``: p(b | a) = p (the rest of a's row shared evenly)."""
    table = torch.full((len(WORDS), len(WORDS)), 1.0)
    rows: dict[str, dict[str, float]] = {}
    for key, p in probs.items():
        prev, nxt = key.split("_")
        rows.setdefault(prev, {})[nxt] = p
    for prev, nexts in rows.items():
        rest = (1 - sum(nexts.values())) / (len(WORDS) - len(nexts))
        table[WORDS.index(prev)] = rest
        for nxt, p in nexts.items():
            table[WORDS.index(prev), WORDS.index(nxt)] = p
    return Bigram(table.log())


def lp(model, prev, nxt) -> float:
    return model.table[WORDS.index(prev), WORDS.index(nxt)].item()


TOK = WordTokenizer()


def test_unequal_lengths_compare_the_first_t_tokens_only():
    # true "a b" (2 tokens) against false "a c e f" (4): T = 2, so only b against c counts.
    model = bigram(a_b=0.3, a_c=0.5, c_e=0.001, e_f=0.001)
    table = score(model, TOK, [Item(1, "ctx", "a b", "a c e f", 0)])
    row = table.iloc[0]
    assert row.n_tokens == 2
    assert row.logprob_true == pytest.approx(lp(model, "ctx", "a") + lp(model, "a", "b"))
    assert row.logprob_false == pytest.approx(lp(model, "ctx", "a") + lp(model, "a", "c"))
    assert not row.correct  # the whole false sentence is far less likely, but its first T tokens are likelier
    swapped = score(model, TOK, [Item(1, "ctx", "a c e f", "a b", 0)]).iloc[0]
    assert swapped.correct and swapped.n_tokens == 2


def test_shared_prefix_cancels_and_the_margin_is_the_differing_token():
    model = bigram(ctx_x=0.4, x_y=0.3, y_z=0.6, y_w=0.1)
    row = score(model, TOK, [Item(5, "ctx", "x y z", "x y w", 0)]).iloc[0]
    assert row.line == 5 and row.n_tokens == 3 and row.correct
    assert row.margin == pytest.approx(np.log(0.6) - np.log(0.1), abs=1e-6)


def test_equal_scores_are_a_tie_and_never_correct():
    model = bigram(ctx_p=0.2, ctx_q=0.2)
    table = score(model, TOK, [Item(1, "ctx", "p", "q", 0)])
    assert table.margin.iloc[0] == 0 and not table.correct.iloc[0] and not table.identical.iloc[0]
    s = summarize(table)
    assert (s.ties, s.identical, s.correct) == (1, 0, 0)


def test_identical_over_the_first_t_tokens_is_a_tie_decided_on_ids():
    # "a b" against "a b c": the same first 2 tokens, whatever c's probability.
    model = bigram(a_b=0.5, b_c=0.9, y_z=0.3)
    items = [Item(1, "ctx", "a b", "a b c", 0), Item(2, "ctx", "a b c", "a b", 0), Item(3, "ctx", "x y z", "x y w", 0)]
    table = score(model, TOK, items)
    assert table.identical.tolist() == [True, True, False]
    assert table.margin.tolist()[:2] == [0.0, 0.0] and not table.correct[:2].any()
    s = summarize(table)
    assert (s.n, s.ties, s.identical) == (3, 2, 2)
    assert "2 items have continuations identical over their first T tokens" in s.line()


def test_mean_margin_counts_identical_items_as_zero():
    """The mean margin is over every item, an identical one counting as a margin of 0: left out, the mean of the
    items below would be item 3's margin alone, and that went unnoticed (a mutation audit). Item 3, "x y z"
    against "x y w", differs on the last token only: log p(z | y) - log p(w | y) = log 0.3 - log(0.7 / 15), the
    rest of y's row shared by the 15 other words; the mean over 3 items is a third of it."""
    model = bigram(a_b=0.5, b_c=0.9, y_z=0.3)
    items = [Item(1, "ctx", "a b", "a b c", 0), Item(2, "ctx", "a b c", "a b", 0), Item(3, "ctx", "x y z", "x y w", 0)]
    s = summarize(score(model, TOK, items))
    assert s.identical == 2
    assert s.mean_margin == pytest.approx((np.log(0.3) - np.log(0.7 / 15)) / 3, abs=1e-6)


def test_summary_counts_and_interval():
    model = bigram(ctx_a=0.5, ctx_b=0.1)
    items = [Item(i + 1, "ctx", "a", "b", 0) for i in range(3)] + [Item(4, "ctx", "b", "a", 0)]
    s = summarize(score(model, TOK, items))
    assert (s.n, s.correct, s.accuracy, s.ties) == (4, 3, 0.75, 0)
    assert s.lo == pytest.approx(0.194120, abs=1e-5) and s.hi == pytest.approx(0.993690, abs=1e-5)
    assert s.mean_margin == pytest.approx(np.log(5) / 2)
    assert s.line().startswith("KR accuracy 75.0% (exact 95% CI 19.4%-99.4%), 4 items, 0 ties, 0 identical")


@pytest.fixture(scope="module")
def items():
    """Generated items (six per context) and hand-made ones of unequal lengths and contexts."""
    data = make_dataset(3, entities=4, validation_entities=2)
    hand = [
        Item(100, "The cat sat on", "the mat.", "the hat and the bat.", 0),
        Item(101, "The cat sat on", "a mat.", "a mat. Then it left.", 0),
        Item(102, "Hello", "world", "there, world", 0),
    ]
    return list(data.items) + hand + open_book(list(data.items[:6]), data.corpus)


@pytest.mark.parametrize("arch", ["llama", "gpt_neox", "phi", "qwen2"])
def test_packing_equals_one_forward_pass_per_side(arch, items, tokenizer):
    model = tiny_model(arch, len(tokenizer))
    packed, plain = score(model, tokenizer, items), score_plain(model, tokenizer, items)
    assert list(packed.columns[:8]) == ITEM_COLUMNS
    assert packed.line.tolist() == [i.line for i in items]
    both = ["logprob_true", "logprob_false", "margin"]
    assert np.abs(packed[both].to_numpy() - plain[both].to_numpy()).max() <= 1e-4
    assert packed.n_tokens.tolist() == plain.n_tokens.tolist()
    assert packed.identical.tolist() == plain.identical.tolist()
    assert packed.identical.iloc[len(items) - 8]  # "a mat." against "a mat. Then it left.": T = 3, the same 3


def test_packing_in_small_chunks_gives_the_same_numbers(items, tokenizer, tiny, monkeypatch):
    import cctk.krtest.measurement.scoring as kr

    whole = score(tiny, tokenizer, items)
    monkeypatch.setattr(kr, "TOKENS_PER_PASS", 64)  # one row per pass
    chunked = score(tiny, tokenizer, items)
    assert np.abs(whole.logprob_true - chunked.logprob_true).max() <= 1e-5


def test_scoring_leaves_the_model_in_its_mode(items, tokenizer, tiny):
    tiny.train()
    score(tiny, tokenizer, items[:2])
    assert tiny.training
    tiny.eval()
