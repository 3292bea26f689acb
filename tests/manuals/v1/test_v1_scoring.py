"""The v1 reading (mean log-probability per token over 2..18, no end marker) comes from the one
packed scorer and equals the reference notebook's one-candidate loop (Listings 3-5)."""

import itertools
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from builders import tiny_model

from cctk.core.facts import ADDITIONS
from cctk.core.lm.scoring import measure, measure_plain
from cctk.manuals.v1 import facts

SOME = (*ADDITIONS[:4], (3, 5), (5, 8), (7, 4), (9, 9))


def compute_answer_logprob(model, tokenizer, prompt, answer):
    """Listing 3, as printed (device: the CPU)."""
    answer_text = f" {answer}"
    prompt_ids = tokenizer.encode(prompt, return_tensors="pt")
    answer_ids = tokenizer.encode(answer_text, return_tensors="pt")
    input_ids = torch.cat([prompt_ids, answer_ids], dim=1)
    with torch.no_grad():
        logits = model(input_ids).logits
        log_probs = torch.log_softmax(logits, dim=-1)
    n_prompt = prompt_ids.shape[1]
    n_answer = answer_ids.shape[1]
    token_logprobs = [log_probs[0, n_prompt + i - 1, input_ids[0, n_prompt + i]].item() for i in range(n_answer)]
    total_logprob = sum(token_logprobs)
    return total_logprob, total_logprob / n_answer, n_answer


def notebook_table(model, tokenizer, pairs) -> pd.DataFrame:
    """Listings 4 and 5: every candidate of every pair, then a softmax of mean_logprob per pair."""
    rows = []
    for a, b in pairs:
        for value in range(2, 19):
            total, mean, n = compute_answer_logprob(model, tokenizer, f"{a} + {b} =", value)
            rows.append(
                {"a": a, "b": b, "candidate_value": value, "total_logprob": total, "mean_logprob": mean, "n_tokens": n}
            )
    df = pd.DataFrame(rows)
    probs = []
    for _, group in df.groupby(["a", "b"]):
        x = group.sort_values("candidate_value")["mean_logprob"].to_numpy()
        e = np.exp(x - x.max())
        probs += list(e / e.sum())
    return df.sort_values(["a", "b", "candidate_value"], ignore_index=True).assign(prob=probs)


def v1_measure(model, tokenizer, pairs=ADDITIONS):
    return measure(model, tokenizer, pairs, facts.SCORING)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_packed_v1_reading_equals_the_notebooks_loop(arch, tokenizer):
    model = tiny_model(arch, len(tokenizer), seed=3)
    fast, slow = v1_measure(model, tokenizer, SOME), notebook_table(model, tokenizer, SOME)
    assert len(fast) == len(SOME) * 17
    assert (fast["n_tokens"].to_numpy() == slow["n_tokens"].to_numpy()).all()
    assert np.abs(fast["logprob"] - slow["total_logprob"]).max() <= 1e-4
    assert np.abs(fast["logprob"] / fast["n_tokens"] - slow["mean_logprob"]).max() <= 1e-4
    assert np.abs(fast["prob"] - slow["prob"]).max() <= 1e-4


def test_v1_probabilities_sum_to_one_over_2_to_18(tiny, tokenizer):
    table = v1_measure(tiny, tokenizer)
    assert len(table) == 81 * 17 and sorted(table["candidate_value"].unique()) == list(range(2, 19))
    assert np.allclose(table.groupby(["a", "b"])["prob"].sum(), 1.0, atol=1e-12)
    one = table[(table.a == 5) & (table.b == 8)]
    mean = one["logprob"] / one["n_tokens"]
    assert np.allclose(one["prob"], np.exp(mean - mean.max()) / np.exp(mean - mean.max()).sum())


def test_v1_equals_the_plain_loop_of_cctk_too(tiny, tokenizer):
    args = (SOME, facts.SCORING)
    fast, plain = measure(tiny, tokenizer, *args), measure_plain(tiny, tokenizer, *args)
    assert np.abs(fast["prob"] - plain["prob"]).max() <= 1e-6


def test_bundled_tokenizer_adds_no_special_tokens(tokenizer):
    """Listing 3 encodes prompt and answer with the default special tokens; cctk gives the prompt its
    special tokens and the answer none. For SmolLM2 (no BOS added) both are the same."""
    for a, b in itertools.product(range(1, 10), repeat=2):
        text = f"{a} + {b} ="
        assert tokenizer.encode(text) == tokenizer(text, add_special_tokens=False)["input_ids"]
    for v in facts.CANDIDATES:
        answer = facts.answer_text(v)
        ids = tokenizer.encode(answer)
        assert ids == tokenizer(answer, add_special_tokens=False)["input_ids"]
        assert len(ids) == (2 if v < 10 else 3)  # " ", then one token per digit (manual 1.0.0, 4.3)


def test_unknown_index_is_refused(tiny, tokenizer):
    with pytest.raises(ValueError, match="index"):
        measure(tiny, tokenizer, SOME, replace(facts.SCORING, index="max"))
