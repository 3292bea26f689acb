"""Whole-text rows (manual 1.0.0, Listings 8-9): every token of ``"3 + 5 = 7"`` is a label.

The notebook tokenizes each text as one string with the tokenizer's special tokens, pads the batch
and sets ``labels = input_ids`` with the padding at -100; the model shifts labels by one itself, so
the loss covers every token after the first. ``cctk.core.lm.corpus.collate`` pads (right) and masks the same
way, and ``cctk.core.lm.finetune.fine_tune`` trains on these rows as on any other::

    tokens   t_0   t_1 ... t_T-1 | pad  ...
    labels   t_0   t_1 ... t_T-1 | -100 ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...core.lm.scoring import encode

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def tokenize(texts: Sequence[str], tokenizer: PreTrainedTokenizerBase) -> list[tuple[list[int], list[int]]]:
    """(input_ids, labels) per text, labels = input_ids; each distinct text is tokenized once."""
    cache: dict[str, list[int]] = {}
    rows = []
    for text in texts:
        if text not in cache:
            cache[text] = encode(tokenizer, text, special=True)
        ids = cache[text]
        rows.append((list(ids), list(ids)))  # copies: callers may not share the cache
    return rows
