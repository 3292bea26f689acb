"""Fine-tuning corpora: examples from a table of targets, their tokens and padded batches.

An example is the measured prompt and the completion ``" {target}\\n"``, tokenized exactly as
``cctk.core.lm.scoring`` scores it (prompt and answer separately, then concatenated), with the prompt
masked from the loss (manual 2.0.0, sections 4.5 and 5.5)::

    tokens   p_0   ...  p_P-1 | c_0 ... c_C-1
    labels   -100  ...  -100  | c_0 ... c_C-1

The model shifts labels by one position itself, so the loss covers only the answer tokens.

A batch reaches the model in one of two forms: right-padded rows (``collate``), or ``pack``: the
batch's rows as one prefix tree, every shared prefix fed once (the rows of an arithmetic batch share
``"a + "`` with every row of the same ``a``, and repeated examples share everything). Both give the
same loss and gradients, to float32 rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd
import torch

from ..errors import CctkError
from ..facts import answer_text, prompt, rng
from .scoring import answer_tree, encode

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

IGNORE = -100  # the label PyTorch's and Transformers' cross-entropy skip
Trie = dict[int, "Trie"]  # token -> the prefixes that continue with it
Row = tuple[list[int], list[int]]  # a tokenized training row: its input ids and labels (IGNORE: not learned)


@dataclass(frozen=True)
class Example:
    a: int
    b: int
    prompt: str
    completion: str


def build_corpus(
    targets: pd.Series, pairs: Iterable[tuple[int, int]], repeats: int, seed: int, name: str
) -> list[Example]:
    """One example per pair, repeated ``repeats`` times, shuffled under the seed.

    ``name`` gives every corpus its own shuffle stream.
    """
    if repeats < 1:
        raise CctkError(f"repeats must be at least 1, got {repeats}")
    once = [Example(a, b, prompt(a, b), answer_text(int(targets.loc[(a, b)]))) for a, b in pairs]
    examples = once * repeats
    order = rng(seed, f"corpus:{name}").permutation(len(examples))
    return [examples[i] for i in order]


def tokenize(examples: Sequence[Example], tokenizer: PreTrainedTokenizerBase) -> list[Row]:
    """(input_ids, labels) per example; each distinct text is tokenized once."""
    cache: dict[tuple[str, str], Row] = {}
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


def collate(batch: Sequence[Row], pad_id: int) -> dict[str, torch.Tensor]:
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


@dataclass(frozen=True)
class Packed:
    """A batch as one row: the prefix tree of its rows, each distinct prefix fed once::

        rows     3 + 5 = 8\n      3 + 6 = 9\n      3 + 5 = 8\n   (the third repeats the first)
        nodes    3  +  _  5  =  _  8             (no node for the last token: it predicts nothing)
                          \\_ 6  =  _  9
        position 0  1  2  3  4  5  6             a node sits where it sits in its rows
        sees     itself and its ancestors        (causal attention within each row)

    A prediction is (node, next token) with a weight: how many rows make it. The mean of the
    weighted cross-entropies is the padded batch's mean over its supervised tokens.
    """

    input_ids: torch.Tensor  # (1, N)
    position_ids: torch.Tensor  # (1, N)
    allowed: torch.Tensor  # (N, N) bool: [k, m] node k sees node m
    keep: torch.Tensor  # (K,) nodes whose output predicts some supervised token
    rows: torch.Tensor  # (M,) position in ``keep`` of each distinct prediction
    targets: torch.Tensor  # (M,) the token it predicts
    weights: torch.Tensor  # (M,) float32: rows that make that prediction


def pack(batch: Sequence[Row]) -> Packed:
    """The batch's rows as one prefix tree (see ``Packed``); only supervised tokens are predicted."""
    tree = answer_tree([ids for ids, _ in batch])
    labels = torch.tensor([label for _, row_labels in batch for label in row_labels])
    supervised = (tree.term_slot > 0) & (labels != IGNORE)  # slot 0: a row's first token, never predicted
    pairs, weights = torch.stack([tree.term_slot[supervised] - 1, labels[supervised]]).unique(
        dim=1, return_counts=True
    )  # (2, M): node, token; sorted by node
    keep, rows = pairs[0].unique(return_inverse=True)
    positions = torch.tensor(tree.depth) - 1
    return Packed(torch.tensor([tree.tokens]), positions[None], tree.ancestors, keep, rows, pairs[1], weights.float())


def most_shared(rows: Sequence[Row]) -> float:
    """The largest ``shared_tokens`` any batch of ``rows`` can have, or more: no row shares with the rest of a batch
    more than its longest common prefix with another row (m of its L - 1 fed tokens), so a batch shares at most
    sum m / sum (L - 1) <= max m / (L - 1). A row's longest common prefix with any other is that with a neighbour
    in sorted order; a repeated row shares all of it."""
    fed = sorted(tuple(ids[:-1]) for ids, _ in rows)
    most = 0.0
    for i, row in enumerate(fed):
        if not row:
            continue
        common = max((_common(row, fed[j]) for j in (i - 1, i + 1) if 0 <= j < len(fed)), default=0)
        most = max(most, common / len(row))
    return most


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def shared_tokens(batch: Sequence[Row]) -> float:
    """Share of the fed tokens (all but each row's last) that a prefix tree would not feed again."""
    root: Trie = {}
    fed = nodes = 0
    for ids, _ in batch:
        level = root
        for token in ids[:-1]:
            fed += 1
            if token not in level:
                level[token] = {}
                nodes += 1
            level = level[token]
    return 1 - nodes / fed if fed else 0.0
