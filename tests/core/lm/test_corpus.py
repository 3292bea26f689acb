"""Corpora: seeded examples, prompt-masked tokens with the measurement's token boundary."""

import pickle

import pytest
import torch
from transformers import AutoTokenizer

from cctk.core import facts
from cctk.core.errors import CctkError
from cctk.core.lm import corpus
from cctk.core.lm.models import bundled_gguf
from cctk.core.lm.scoring import encode
from cctk.manuals.v2 import facts as study

SUMS = facts.correct_sums()
PAIRS = study.split_additions(0).seen


@pytest.fixture(scope="module")
def tokenizer():
    folder, name = bundled_gguf()
    return AutoTokenizer.from_pretrained(folder, gguf_file=name)


def test_corpus_has_repeats_times_pairs_examples_with_each_pair_repeats_times():
    examples = corpus.build_corpus(SUMS, PAIRS, repeats=3, seed=0, name="m_correct")
    assert len(examples) == 3 * len(PAIRS)
    counts = {}
    for ex in examples:
        counts[(ex.a, ex.b)] = counts.get((ex.a, ex.b), 0) + 1
    assert counts == dict.fromkeys(PAIRS, 3)


def test_example_text_is_the_measured_prompt_and_answer():
    rule = study.conditional_rule()
    examples = corpus.build_corpus(rule, [(5, 3), (3, 5)], repeats=1, seed=0, name="d")
    by_pair = {(ex.a, ex.b): ex for ex in examples}
    assert by_pair[(5, 3)] == corpus.Example(5, 3, "5 + 3 =", " 26\n")
    assert by_pair[(3, 5)].completion == " 17\n"


def test_corpus_is_byte_identical_per_seed_and_name_and_differs_otherwise():
    def make(seed, name):
        return pickle.dumps(corpus.build_corpus(SUMS, PAIRS, 2, seed, name))

    assert make(0, "a") == make(0, "a")
    assert make(0, "a") != make(1, "a")
    assert make(0, "a") != make(0, "b")


def test_corpus_is_shuffled():
    examples = corpus.build_corpus(SUMS, facts.ADDITIONS, 2, seed=0, name="m_correct")
    assert [(ex.a, ex.b) for ex in examples] != list(facts.ADDITIONS) * 2


def test_corpus_needs_a_repeat():
    with pytest.raises(CctkError):
        corpus.build_corpus(SUMS, PAIRS, repeats=0, seed=0, name="x")


def test_tokens_mask_the_prompt_and_label_the_answer(tokenizer):
    targets = study.shifted_sums(18)
    examples = corpus.build_corpus(targets, facts.ADDITIONS, 2, seed=0, name="c18")
    rows = corpus.tokenize(examples, tokenizer)
    assert len(rows) == len(examples)
    for ex, (ids, labels) in zip(examples, rows, strict=True):
        head = encode(tokenizer, ex.prompt, special=True)
        tail = encode(tokenizer, facts.answer_text(int(targets.loc[(ex.a, ex.b)])), special=False)
        assert ids == head + tail
        assert labels == [-100] * len(head) + tail
        assert len(tail) >= 2  # the number and the end marker are both learned


def test_tokenize_caches_each_distinct_text_once(tokenizer):
    calls = []

    class Counting:
        def __call__(self, text, add_special_tokens):
            calls.append(text)
            return tokenizer(text, add_special_tokens=add_special_tokens)

    examples = corpus.build_corpus(SUMS, facts.ADDITIONS, 3, seed=0, name="m_correct")
    corpus.tokenize(examples, Counting())
    assert len(calls) == 2 * 81


def test_tokenized_rows_do_not_share_lists(tokenizer):
    examples = corpus.build_corpus(SUMS, [(1, 1)], 2, seed=0, name="x")
    rows = corpus.tokenize(examples, tokenizer)
    rows[0][0].append(-1)
    assert rows[1][0][-1] != -1


def test_collate_right_pads_and_masks_padding():
    batch = [([5, 6, 7, 8], [-100, -100, 7, 8]), ([1, 2], [-100, 2])]
    out = corpus.collate(batch, pad_id=0)
    assert set(out) == {"input_ids", "attention_mask", "labels"}
    assert all(t.shape == (2, 4) and t.dtype == torch.long for t in out.values())
    assert out["input_ids"].tolist() == [[5, 6, 7, 8], [1, 2, 0, 0]]
    assert out["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert out["labels"].tolist() == [[-100, -100, 7, 8], [-100, 2, -100, -100]]


def test_collate_on_real_tokens(tokenizer):
    examples = corpus.build_corpus(study.shifted_sums(18), [(1, 1), (9, 9)], 1, seed=0, name="x")
    rows = corpus.tokenize(examples, tokenizer)
    out = corpus.collate(rows, pad_id=tokenizer.pad_token_id)
    width = max(len(ids) for ids, _ in rows)
    assert out["input_ids"].shape == (2, width)
    assert out["attention_mask"].sum(1).tolist() == [len(ids) for ids, _ in rows]
    assert ((out["labels"] != -100).sum(1) >= 2).all()
