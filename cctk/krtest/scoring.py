"""The KR-Test rule: which of two continuations a model prefers after a shared context.

An item is scored as the paper says (section 3, "Likelihood Evaluation")::

    context  c_0 ... c_P-1            encode(tokenizer, context, special=True), as the arithmetic prompt
    true     x+_0 ... x+_T-1 ...      encode(" " + sentence_true, special=False), first T tokens
    false    x-_0 ... x-_T-1 ...      encode(" " + sentence_false, special=False), first T tokens
    T = min(len(true tokens), len(false tokens))
    score(side) = sum_t log p(x_t | c, x_<t) for t < T;   correct when score(true) > score(false)

An item whose two sides have the same first T token ids is a tie (margin 0, never correct), decided
on the ids, not on floats. ``score`` shares each distinct context's forward work across all of its
continuations (every item with that context, both sides, cut at T) as a prefix tree under a 4D
attention mask, as ``cctk.scoring.measure`` does, one tree per row; ``score_plain`` is the
reference, one forward pass per side. They agree to float32 rounding.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from ..scoring import LOGIT_BUDGET, AnswerTree, _device_dtype, _forward, _pad_id, _vocab_size, answer_tree, encode
from ..stats import clopper_pearson
from .items import Item

ITEM_COLUMNS = ["line", "logprob_true", "logprob_false", "margin", "n_tokens", "correct"]
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
        text = (f"KR accuracy {100 * self.accuracy:.1f}% (exact 95% CI {100 * self.lo:.1f}%-{100 * self.hi:.1f}%), "
                f"{self.n} items, {self.ties} ties, {self.identical} identical")
        if self.identical:
            text += (f"; {self.identical} items have continuations identical over their first T tokens "
                     "and cannot discriminate (scored as ties, never correct)")
        return text


def encode_item(tokenizer, item: Item) -> Encoded:
    true = encode(tokenizer, " " + item.sentence_true, special=False)
    false = encode(tokenizer, " " + item.sentence_false, special=False)
    t = min(len(true), len(false))
    return Encoded(tuple(encode(tokenizer, item.context, special=True)), tuple(true[:t]), tuple(false[:t]))


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


def score(model, tokenizer, items: Sequence[Item]) -> pd.DataFrame:
    """One row per item, in the order given: ``ITEM_COLUMNS`` and ``identical``."""
    encoded = [encode_item(tokenizer, item) for item in items]
    groups: dict[tuple[int, ...], list[int]] = {}  # context -> the items that share it
    for i, e in enumerate(encoded):
        groups.setdefault(e.context, []).append(i)
    rows = [Row(context, tuple(members), answer_tree([s for i in members for s in (encoded[i].true, encoded[i].false)]))
            for context, members in groups.items()]
    rows.sort(key=lambda row: row.length)  # similar sizes share a pass: less padding
    sums = np.zeros((len(items), 2))
    for chunk in _chunks(rows, _vocab_size(model)):
        per_answer = _score_forest(model, [r.context for r in chunk], [r.tree for r in chunk], _pad_id(tokenizer))
        sums[[i for r in chunk for i in r.members]] = per_answer.reshape(-1, 2)
    return _table(items, encoded, sums)


def _chunks(rows: Sequence[Row], vocab: int):
    """Consecutive rows whose logits, (rows, Nmax + 1, vocab) float32, fit ``LOGIT_BUDGET`` and whose
    tokens, rows * (Pmax + Nmax), fit ``TOKENS_PER_PASS`` (a bound on activations and masks)."""
    chunk: list[Row] = []
    for row in rows:
        grown = chunk + [row]
        width, length = max(r.width for r in grown), max(r.length for r in grown)
        if chunk and (len(grown) * width * vocab > LOGIT_BUDGET or len(grown) * length > TOKENS_PER_PASS):
            yield chunk
            grown = [row]
        chunk = grown
    if chunk:
        yield chunk


@torch.inference_mode()
def _score_forest(model, prompts, trees: Sequence[AnswerTree], pad_id: int) -> np.ndarray:
    """Summed log-probability of every answer of every row, rows' answers one after the other."""
    device, dtype = _device_dtype(model)
    ids, pos, allowed, out_cols = pack_forest(prompts, trees, pad_id)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    logits = _forward(model, ids.to(device), pos.to(device), mask[:, None].to(device), out_cols.to(device))
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, Nmax+1, V)
    row = torch.cat([torch.full_like(t.term_slot, r) for r, t in enumerate(trees)])
    slot, token = torch.cat([t.term_slot for t in trees]), torch.cat([t.term_token for t in trees])
    counts = [int(t.term_owner.max()) + 1 for t in trees]  # answers of each row (each has >= 1 token)
    first = np.cumsum([0] + counts)[:-1]
    owner = torch.cat([t.term_owner + int(f) for t, f in zip(trees, first)])
    per_token = logp[row.to(device), slot.to(device), token.to(device)].double().cpu()  # (all answer tokens,)
    return torch.zeros(sum(counts), dtype=torch.float64).index_add_(0, owner, per_token).numpy()


def pack_forest(prompts: Sequence[Sequence[int]], trees: Sequence[AnswerTree], pad_id: int):
    """Like ``cctk.scoring.pack_rows``, but row r carries its own tree ``trees[r]``.

    Prompts are left-padded to Pmax, trees right-padded to the largest, Nmax nodes::

        column    0 .. Pmax-P-1 | Pmax-P ... Pmax-1 | Pmax ... Pmax+N-1 | Pmax+N ... Pmax+Nmax-1
        token     pad           | p_0  ...  p_P-1   | n_0 .... n_N-1    | pad
        position  0             | 0    ...  P-1     | P-1+depth(n_k)    | 0
        sees      itself        | causal, prompt    | prompt + n_k's ancestors and n_k | itself

    Every row has its outputs in the same columns, ``Pmax-1`` (slot 0) and ``Pmax + k`` (slot k+1),
    so the tree's ``term_slot`` indexes them directly. Returns ids, positions, allowed (B, L, L), out_cols.
    """
    p_max, n_max = max(len(p) for p in prompts), max(len(t.tokens) for t in trees)
    size = p_max + n_max
    ids = torch.full((len(prompts), size), pad_id, dtype=torch.long)
    pos = torch.zeros((len(prompts), size), dtype=torch.long)
    allowed = torch.eye(size, dtype=torch.bool).repeat(len(prompts), 1, 1)  # pads see only themselves
    causal = torch.ones(p_max, p_max, dtype=torch.bool).tril()
    for r, (p, tree) in enumerate(zip(prompts, trees)):
        start, end = p_max - len(p), p_max + len(tree.tokens)
        ids[r, start:p_max] = torch.tensor(p)
        pos[r, start:p_max] = torch.arange(len(p))
        allowed[r, start:p_max, start:p_max] = causal[: len(p), : len(p)]
        if tree.tokens:
            ids[r, p_max:end] = torch.tensor(tree.tokens)
            pos[r, p_max:end] = len(p) - 1 + torch.tensor(tree.depth)
            allowed[r, p_max:end, start:p_max] = True
            allowed[r, p_max:end, p_max:end] = tree.ancestors
    return ids, pos, allowed, torch.arange(p_max - 1, size)


@torch.inference_mode()
def score_plain(model, tokenizer, items: Sequence[Item]) -> pd.DataFrame:
    """The reference: one forward pass per side of every item (whole continuation fed, first T scored)."""
    device, _ = _device_dtype(model)
    was_training = model.training
    model.eval()
    sums = np.zeros((len(items), 2))
    for i, item in enumerate(items):
        context = encode(tokenizer, item.context, special=True)
        sides = [encode(tokenizer, " " + s, special=False) for s in (item.sentence_true, item.sentence_false)]
        t = min(len(s) for s in sides)
        for j, side in enumerate(sides):
            logp = torch.log_softmax(model(torch.tensor([context + side], device=device)).logits.float(), -1)[0]
            sums[i, j] = sum(logp[len(context) + k - 1, side[k]].item() for k in range(t))
    model.train(was_training)
    return _table(items, [encode_item(tokenizer, item) for item in items], sums)


def _table(items: Sequence[Item], encoded: Sequence[Encoded], sums: np.ndarray) -> pd.DataFrame:
    identical = np.array([e.identical for e in encoded], dtype=bool)
    margin = np.where(identical, 0.0, sums[:, 0] - sums[:, 1])
    return pd.DataFrame({
        "line": [item.line for item in items],
        "logprob_true": sums[:, 0],
        "logprob_false": sums[:, 1],
        "margin": margin,
        "n_tokens": [e.n_tokens for e in encoded],
        "correct": ~identical & (margin > 0),
        "identical": identical,
    })


def summarize(table: pd.DataFrame) -> Summary:
    n, correct = len(table), int(table["correct"].sum())
    lo, hi = clopper_pearson(correct, n)
    return Summary(n=n, correct=correct, accuracy=correct / n if n else float("nan"), lo=lo, hi=hi,
                   mean_margin=float(table["margin"].mean()), ties=int((table["margin"] == 0).sum()),
                   identical=int(table["identical"].sum()))
