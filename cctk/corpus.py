"""Fine-tuning corpora: examples from a table of targets, their tokens and padded batches.

An example is the measured prompt and the completion ``" {target}\\n"``, tokenized exactly as
``cctk.scoring`` scores it (prompt and answer separately, then concatenated), with the prompt
masked from the loss (manual 2.0.0, sections 4.5 and 5.5)::

    tokens   p_0   ...  p_P-1 | c_0 ... c_C-1
    labels   -100  ...  -100  | c_0 ... c_C-1

The model shifts labels by one position itself, so the loss covers only the answer tokens.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from .errors import CctkError
from .facts import answer_text, prompt, rng
from .scoring import encode

IGNORE = -100  # the label PyTorch's and Transformers' cross-entropy skip


@dataclass(frozen=True)
class Example:
    a: int
    b: int
    prompt: str
    completion: str


def build_corpus(targets: pd.Series, pairs: Iterable[tuple[int, int]], repeats: int,
                 seed: int, name: str) -> list[Example]:
    """One example per pair, repeated ``repeats`` times, shuffled under the seed.

    ``name`` gives every corpus its own shuffle stream.
    """
    if repeats < 1:
        raise CctkError(f"repeats must be at least 1, got {repeats}")
    once = [Example(a, b, prompt(a, b), answer_text(int(targets.loc[(a, b)]))) for a, b in pairs]
    examples = once * repeats
    order = rng(seed, f"corpus:{name}").permutation(len(examples))
    return [examples[i] for i in order]


def tokenize(examples: Sequence[Example], tokenizer) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) per example; each distinct text is tokenized once."""
    cache: dict[tuple[str, str], tuple[list[int], list[int]]] = {}
    rows = []
    for ex in examples:
        key = (ex.prompt, ex.completion)
        if key not in cache:
            head = encode(tokenizer, ex.prompt, special=True)
            tail = encode(tokenizer, ex.completion, special=False)
            cache[key] = (head + tail, [IGNORE] * len(head) + tail)
        ids, labels = cache[key]
        rows.append((list(ids), list(labels)))  # copies: callers may not share the cache
    return rows


def collate(batch: Sequence[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad a batch to its longest row: input_ids, attention_mask, labels, each (B, T)."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    for row, (ids, lab) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention_mask[row, : len(ids)] = 1
        labels[row, : len(lab)] = torch.tensor(lab, dtype=torch.long)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
