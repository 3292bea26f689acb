"""The KR-Test rule: which of two continuations a model prefers after a shared context.

An item is scored as the paper says (section 3, "Likelihood Evaluation")::

    context  c_0 ... c_P-1            encode(tokenizer, context, special=True), as the arithmetic prompt
    true     x+_0 ... x+_T-1 ...      the tokens of sentence_true in the joined text, first T tokens
    false    x-_0 ... x-_T-1 ...      the tokens of sentence_false in the joined text, first T tokens
    T = min(len(true tokens), len(false tokens))
    score(side) = sum_t log p(x_t | c, x_<t) for t < T;   correct when score(true) > score(false)

A continuation's tokens are those the joined text ``context + " " + sentence`` has after the
context's own tokens: the way training reads a passage, context and sentence in one string. On a
byte-level BPE (GPT-2, SmolLM2, Qwen) that is exactly ``encode(" " + sentence)``; on a SentencePiece
tokenizer (Llama, TinyLlama) ``" " + sentence`` alone would start with a lone "▁" token that the
joined text never has. Where a token spans the boundary (the joined text does not start with the
context's tokens), the continuation is encoded alone as ``" " + sentence``.

An item whose two sides have the same first T token ids is a tie (margin 0, never correct), decided
on the ids, not on floats. ``score`` shares each distinct context's forward work across all of its
continuations (every item with that context, both sides, cut at T): one answer tree per context,
scored by the toolkit's one kernel ``cctk.core.lm.scoring.score_forest``; ``score_plain`` is the reference,
one forward pass per side. They agree to float32 rounding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import numpy as np
import pandas as pd
import torch

from ...core.errors import CctkError
from ...core.lm.scoring import (
    LOGIT_BUDGET,
    AnswerTree,
    answer_tree,
    encode,
    evaluating,
    pad_id,
    score_forest,
    vocab_size,
)
from ...core.stats import clopper_pearson
from .items import Item

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

ITEM_COLUMNS = ["line", "location", "context", "logprob_true", "logprob_false", "margin", "n_tokens", "correct"]
TOKENS_PER_PASS = 8192  # packed tokens per forward pass


@dataclass(frozen=True)
class Encoded:
    """One item in tokens, each side already cut to its first T tokens."""

    context: tuple[int, ...]
    true: tuple[int, ...]
    false: tuple[int, ...]

    @property
    def n_tokens(self) -> int:
        return len(self.true)

    @property
    def identical(self) -> bool:
        return self.true == self.false


@dataclass(frozen=True)
class Summary:
    n: int
    correct: int
    accuracy: float
    lo: float  # exact (Clopper-Pearson) 95% interval of the accuracy
    hi: float
    mean_margin: float  # mean of logprob_true - logprob_false
    ties: int  # margin exactly 0 (identical items included), never correct
    identical: int  # both sides the same over their first T tokens: cannot discriminate

    def line(self) -> str:
        text = (
            f"KR accuracy {100 * self.accuracy:.1f}% (exact 95% CI {100 * self.lo:.1f}%-{100 * self.hi:.1f}%), "
            f"{self.n} items, {self.ties} ties, {self.identical} identical"
        )
        if self.identical:
            text += (
                f"; {self.identical} items have continuations identical over their first T tokens "
                "and cannot discriminate (scored as ties, never correct)"
            )
        return text


def encode_continuation(tokenizer: PreTrainedTokenizerBase, context: str, sentence: str) -> list[int]:
    """The tokens of ``sentence`` in the joined text ``context + " " + sentence`` (see the module docstring)."""
    head = encode(tokenizer, context, special=False)
    joined = encode(tokenizer, context + " " + sentence, special=False)
    if len(joined) > len(head) and joined[: len(head)] == head:
        return joined[len(head) :]
    return encode(tokenizer, " " + sentence, special=False)  # a token spans the boundary


def encode_item(tokenizer: PreTrainedTokenizerBase, item: Item) -> Encoded:
    context = item.scored_context
    true = encode_continuation(tokenizer, context, item.sentence_true)
    false = encode_continuation(tokenizer, context, item.sentence_false)
    t = min(len(true), len(false))
    return Encoded(tuple(encode(tokenizer, context, special=True)), tuple(true[:t]), tuple(false[:t]))


def check_fits(tokenizer: PreTrainedTokenizerBase, items: Sequence[Item], limit: int, source: str) -> None:
    """Every item as the scorer feeds it (its context, after the passage in an open book, then an answer
    side) within ``limit`` tokens of ``tokenizer``; else one line naming the item's line and the count,
    before anything is scored (a 5 MB context would ask the model for terabytes)."""
    for item in items:
        encoded = encode_item(tokenizer, item)
        size = len(encoded.context) + len(encoded.true)
        if size > limit:
            raise CctkError(
                f"{source} line {item.line}: the item is {size} tokens of the scoring tokenizer "
                f"({len(encoded.context)} of context{', passage included' if item.book else ''}, "
                f"{len(encoded.true)} of answer); the model reads at most {limit} tokens"
            )


@dataclass(frozen=True)
class Row:
    """One packed row: a distinct context and the tree of both sides of every item that has it."""

    context: tuple[int, ...]
    members: tuple[int, ...]  # indices of those items; answers of the tree: true, false of each in turn
    tree: AnswerTree

    @property
    def width(self) -> int:  # output slots: the context's last token and every node
        return len(self.tree.tokens) + 1

    @property
    def length(self) -> int:
        return len(self.context) + len(self.tree.tokens)


def score(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, items: Sequence[Item]) -> pd.DataFrame:
    """One row per item, in the order given: ``ITEM_COLUMNS`` and ``identical``."""
    encoded = [encode_item(tokenizer, item) for item in items]
    groups: dict[tuple[int, ...], list[int]] = {}  # context -> the items that share it
    for i, e in enumerate(encoded):
        groups.setdefault(e.context, []).append(i)
    rows = [
        Row(context, tuple(members), answer_tree([s for i in members for s in (encoded[i].true, encoded[i].false)]))
        for context, members in groups.items()
    ]
    rows.sort(key=lambda row: row.length)  # similar sizes share a pass: less padding
    sums = np.zeros((len(items), 2))
    for chunk in _chunks(rows, vocab_size(model)):
        per_answer = score_forest(model, [r.context for r in chunk], [r.tree for r in chunk], pad_id(tokenizer))
        sums[[i for r in chunk for i in r.members]] = per_answer.numpy().reshape(-1, 2)
    return _table(items, encoded, sums)


def _chunks(rows: Sequence[Row], vocab: int) -> Iterator[list[Row]]:
    """Consecutive rows whose logits, (rows, Nmax + 1, vocab) float32, fit ``LOGIT_BUDGET`` and whose
    tokens, rows * (Pmax + Nmax), fit ``TOKENS_PER_PASS`` (a bound on activations and masks)."""
    chunk: list[Row] = []
    for row in rows:
        grown = [*chunk, row]
        width, length = max(r.width for r in grown), max(r.length for r in grown)
        if chunk and (len(grown) * width * vocab > LOGIT_BUDGET or len(grown) * length > TOKENS_PER_PASS):
            yield chunk
            grown = [row]
        chunk = grown
    if chunk:
        yield chunk


@torch.inference_mode()
def score_plain(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, items: Sequence[Item]) -> pd.DataFrame:
    """The reference: one forward pass per side of every item (whole continuation fed, first T scored)."""
    device = next(model.parameters()).device
    sums = np.zeros((len(items), 2))
    with evaluating(model):
        for i, item in enumerate(items):
            context = encode(tokenizer, item.scored_context, special=True)
            sides = [
                encode_continuation(tokenizer, item.scored_context, s)
                for s in (item.sentence_true, item.sentence_false)
            ]
            t = min(len(s) for s in sides)
            for j, side in enumerate(sides):
                logp = torch.log_softmax(model(torch.tensor([context + side], device=device)).logits.float(), -1)[0]
                sums[i, j] = sum(logp[len(context) + k - 1, side[k]].item() for k in range(t))
    return _table(items, [encode_item(tokenizer, item) for item in items], sums)


def _table(items: Sequence[Item], encoded: Sequence[Encoded], sums: np.ndarray) -> pd.DataFrame:
    identical = np.array([e.identical for e in encoded], dtype=bool)
    margin = np.where(identical, 0.0, sums[:, 0] - sums[:, 1])
    return pd.DataFrame(
        {
            "line": [item.line for item in items],
            "location": [item.location for item in items],
            "context": [item.context for item in items],
            "logprob_true": sums[:, 0],
            "logprob_false": sums[:, 1],
            "margin": margin,
            "n_tokens": [e.n_tokens for e in encoded],
            "correct": ~identical & (margin > 0),
            "identical": identical,
        }
    )


def summarize(table: pd.DataFrame) -> Summary:
    n, correct = len(table), int(table["correct"].sum())
    lo, hi = clopper_pearson(correct, n)
    return Summary(
        n=n,
        correct=correct,
        accuracy=correct / n if n else float("nan"),
        lo=lo,
        hi=hi,
        mean_margin=float(table["margin"].mean()),
        ties=int((table["margin"] == 0).sum()),
        identical=int(table["identical"].sum()),
    )


PASSAGE_COLUMNS = ["location", "items", "correct", "accuracy", "lo", "hi", "mean_margin"]


def by_passage(table: pd.DataFrame) -> pd.DataFrame:
    """One row per location (source passage), in location order: items, correct, accuracy with its exact
    (Clopper-Pearson) 95% interval, mean margin."""
    rows = []
    for location, part in table.groupby("location", sort=True):
        n, correct = len(part), int(part["correct"].sum())
        lo, hi = clopper_pearson(correct, n)
        rows.append(
            {
                "location": int(cast("int | np.integer", location)),  # items' locations: pandas-stubs says any scalar
                "items": n,
                "correct": correct,
                "accuracy": correct / n,
                "lo": lo,
                "hi": hi,
                "mean_margin": float(part["margin"].mean()),
            }
        )
    return pd.DataFrame(rows, columns=PASSAGE_COLUMNS)
