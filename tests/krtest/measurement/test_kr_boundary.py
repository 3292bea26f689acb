"""The token boundary between context and continuation: scored as training reads the joined text.

A SentencePiece-style tokenizer (Llama, TinyLlama: "▁" for a space, one prepended to the text) is built
here with ``tokenizers`` on a few lines. On it ``" " + sentence`` alone starts with a lone "▁" token that
the joined text ``context + " " + sentence`` never has; KR-Test must score the joined text's tokens. On the
bundled byte-level tokenizer both are the same, so its scores do not move (golden values).
"""

import numpy as np
import pytest
import torch
from builders import tiny_model

from cctk.core.lm.scoring import encode
from cctk.krtest.generation.generate import make_dataset
from cctk.krtest.measurement.items import Item, open_book
from cctk.krtest.measurement.scoring import encode_continuation, encode_item, score, score_plain

LINES = [
    "The lamp of the Harlow lighthouse is white.",
    "It was lit in 1864 by Mara Quist.",
    "Salmon return to the river every autumn.",
    "The keeper lives in a white cottage.",
]


@pytest.fixture(scope="module")
def sentencepiece():
    """A Llama-style tokenizer: normalizer prepends "▁" and turns spaces into "▁", pieces split before each
    "▁", BPE, BOS added with the special tokens."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(
        LINES * 5, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    )
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>"
    )


def pieces(tokenizer, ids):
    return tokenizer.convert_ids_to_tokens(list(ids))


def test_a_lone_space_token_would_open_the_continuation(sentencepiece):
    alone = encode(sentencepiece, " It was lit in 1864.", special=False)
    assert pieces(sentencepiece, alone)[:2] == ["▁", "▁It"]  # the stray token, absent from any training text
    joined = encode(sentencepiece, "The lamp is white. It was lit in 1864.", special=False)
    assert "▁" not in pieces(sentencepiece, joined)


def test_continuation_is_the_joined_texts_tail(sentencepiece):
    context, sentence = "The lamp is white.", "It was lit in 1864."
    tail = encode_continuation(sentencepiece, context, sentence)
    joined = encode(sentencepiece, f"{context} {sentence}", special=False)
    assert tail == joined[len(encode(sentencepiece, context, special=False)) :]
    assert pieces(sentencepiece, tail) == ["▁It", "▁was", "▁lit", "▁in", "▁1864", "."]


def test_scores_are_the_log_probs_training_sees(sentencepiece):
    model = tiny_model("llama", len(sentencepiece), seed=3)
    item = Item(1, "The lamp is white.", "It was lit in 1864.", "It was lit in 1865.", 0)
    row = score(model, sentencepiece, [item]).iloc[0]
    ids = sentencepiece(f"{item.context} {item.sentence_true}")["input_ids"]  # as a training row: BOS, joined text
    n_context = len(sentencepiece(item.context)["input_ids"])
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    t = row.n_tokens
    by_hand = sum(logp[k - 1, ids[k]].item() for k in range(n_context, n_context + t))
    assert t == 6 and row.logprob_true == pytest.approx(by_hand, abs=1e-4)
    plain = score_plain(model, sentencepiece, [item]).iloc[0]
    assert plain.logprob_true == pytest.approx(row.logprob_true, abs=1e-4)


def test_a_token_across_the_boundary_falls_back_to_the_sentence_alone():
    class MergesTSpace:
        """Characters, but "t " is one token (id 999): "cat sat" cannot start with the tokens of "cat"."""

        def __call__(self, text, add_special_tokens=False):
            ids, i = [], 0
            while i < len(text):
                if text[i : i + 2] == "t ":
                    ids.append(999)
                    i += 2
                else:
                    ids.append(ord(text[i]))
                    i += 1
            return {"input_ids": ids}

    assert encode_continuation(MergesTSpace(), "cat", "sat") == [32, ord("s"), ord("a"), ord("t")]
    assert encode_continuation(MergesTSpace(), "dog", "sat") == [32, ord("s"), ord("a"), ord("t")]


def test_bundled_tokenizer_encodes_as_before(tokenizer):
    data = make_dataset(0)
    items = list(data.items) + open_book(list(data.items[:12]), data.corpus)
    for item in items:
        e = encode_item(tokenizer, item)
        old_true = encode(tokenizer, " " + item.sentence_true, special=False)
        old_false = encode(tokenizer, " " + item.sentence_false, special=False)
        t = min(len(old_true), len(old_false))
        assert (e.true, e.false) == (tuple(old_true[:t]), tuple(old_false[:t]))


# Pinned with the scorer before this change (``" " + sentence`` encoded alone), the tiny Llama of conftest
# (seed 0) and the bundled tokenizer, on make_dataset(3, entities=4, validation_entities=2): line -> (true, false).
GOLDEN = {
    1: (-86.927905, -86.775005),
    6: (-151.240399, -151.619765),
    13: (-140.150151, -140.281794),
    21: (-151.635611, -151.542651),
}


def test_bundled_tokenizer_golden_scores(tokenizer):
    model = tiny_model("llama", len(tokenizer))
    table = score(model, tokenizer, list(make_dataset(3, entities=4, validation_entities=2).items)).set_index("line")
    for line, (true, false) in GOLDEN.items():
        assert (table.logprob_true[line], table.logprob_false[line]) == pytest.approx((true, false), abs=1e-4)
    assert np.isfinite(table.logprob_true).all()
