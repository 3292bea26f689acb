"""Teacher-forced scoring: the log-probability of every candidate answer of every addition.

``measure`` is the one measurement of the toolkit (manual 2.0.0, sections 4.2-4.4). The index of
a candidate is the sum of the log-probabilities of the tokens of ``" {v}\\n"`` teacher-forced after
the prompt, prompt and answer tokenized separately and concatenated. ``prob`` is the softmax of the
35 indices of one addition. Manual 1.0.0 has another candidate set (2..18), answer text (``" {v}"``)
and index: ``index="mean"``, the *mean* log-probability per answer token (Listings 3-5); ``logprob`` is
the sum either way.

``score_forest`` is the one scoring kernel: rows of (prompt, answer tree), packed by ``pack_forest``
under a 4D attention mask, one forward pass; ``measure`` gives every row the same tree, KR-Test
(``cctk.krtest.measurement.scoring``) each context the tree of its items. ``measure_plain`` is the
manual's loop, one candidate per forward pass: the same numbers to float32 rounding.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd
import torch
from torch import nn

from ..facts import ADDITIONS, SCORING, Pair, Scoring, prompt
from ..readings import COLUMNS

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

# ``pack_forest``'s row: input_ids (B, L), position_ids (B, L), allowed (B, L, L) bool, out_cols (Nmax+1,)
Forest = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]

INDEXES = ("sum", "mean")  # what the softmax of one addition is taken over
LOGIT_BUDGET = 2**26  # float32 logits held at once (256 MiB); sets the rows per forward pass


@dataclass(frozen=True)
class AnswerTree:
    """The candidates' tokens as a prefix tree; only tokens that are *inputs* become nodes.

    The last token of an answer is only ever predicted, never fed, so it is no node.
    Output slot 0 is the prompt's last token; slot ``k + 1`` is node ``k``.
    """

    tokens: tuple[int, ...]  # input token of each node
    depth: tuple[int, ...]  # 1 for a node holding an answer's first token
    ancestors: torch.Tensor  # (N, N) bool, [k, m]: node m is node k or above it
    term_slot: torch.Tensor  # (T,) output slot that predicts each answer token
    term_token: torch.Tensor  # (T,) the answer token it must predict
    term_owner: torch.Tensor  # (T,) index of the candidate the token belongs to


def answer_tree(answers: Sequence[Sequence[int]]) -> AnswerTree:
    nodes: dict[tuple[int, ...], int] = {}
    tokens: list[int] = []
    depth: list[int] = []
    parent: list[int] = []
    slots: list[int] = []
    owners: list[int] = []
    targets: list[int] = []
    for owner, ids in enumerate(answers):
        for j, token in enumerate(ids):
            prefix = tuple(ids[:j])
            if j > 0 and prefix not in nodes:
                nodes[prefix] = len(tokens)
                tokens.append(prefix[-1])
                depth.append(j)
                parent.append(nodes.get(prefix[:-1], -1))
            slots.append(0 if j == 0 else nodes[prefix] + 1)
            owners.append(owner)
            targets.append(token)
    n = len(tokens)
    ancestors = torch.eye(n, dtype=torch.bool)
    for k in range(n):
        m = parent[k]
        while m >= 0:
            ancestors[k, m] = True
            m = parent[m]
    return AnswerTree(
        tuple(tokens), tuple(depth), ancestors, torch.tensor(slots), torch.tensor(targets), torch.tensor(owners)
    )


def pack_forest(prompts: Sequence[Sequence[int]], trees: Sequence[AnswerTree], pad_id: int) -> Forest:
    """Pack each prompt and its own answer tree into one row; row r carries ``trees[r]``.

    Prompts are left-padded to Pmax, trees right-padded to the largest, Nmax nodes::

        column    0 .. Pmax-P-1 | Pmax-P ... Pmax-1 | Pmax ... Pmax+N-1 | Pmax+N ... Pmax+Nmax-1
        token     pad           | p_0  ...  p_P-1   | n_0 .... n_N-1    | pad
        position  0             | 0    ...  P-1     | P-1+depth(n_k)    | 0
        sees      itself        | causal, prompt    | prompt + n_k's ancestors and n_k | itself

    Logits at p_P-1 predict every answer's first token; logits at node n_k (the prefix answer[:j])
    predict answer[j]. Every row has its outputs in the same columns, ``Pmax-1`` (slot 0) and
    ``Pmax + k`` (slot k+1), so a tree's ``term_slot`` indexes them directly.

    Returns input_ids (B, L), position_ids (B, L), allowed (B, L, L) bool, out_cols (Nmax+1,).
    """
    p_max, n_max = max(len(p) for p in prompts), max(len(t.tokens) for t in trees)
    size = p_max + n_max
    ids = torch.full((len(prompts), size), pad_id, dtype=torch.long)
    pos = torch.zeros((len(prompts), size), dtype=torch.long)
    allowed = torch.eye(size, dtype=torch.bool).repeat(len(prompts), 1, 1)  # pads see only themselves
    causal = torch.ones(p_max, p_max, dtype=torch.bool).tril()
    for r, (p, tree) in enumerate(zip(prompts, trees, strict=True)):
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


def pack_rows(prompts: Sequence[Sequence[int]], tree: AnswerTree, pad_id: int) -> Forest:
    """``pack_forest`` with one tree for every row (the candidates of ``measure``)."""
    return pack_forest(prompts, [tree] * len(prompts), pad_id)


@torch.inference_mode()
def score_forest(
    model: PreTrainedModel, prompts: Sequence[Sequence[int]], trees: Sequence[AnswerTree], pad_id: int
) -> torch.Tensor:
    """The one scoring kernel: the summed log-probability of every answer of every row, teacher-forced
    after the row's prompt; float64, (answers of row 0, then of row 1, ...,).

    One forward pass over ``pack_forest(prompts, trees)``; the caller sizes the rows (``LOGIT_BUDGET``).
    """
    device, dtype = _device_dtype(model)
    ids, pos, allowed, out_cols = pack_forest(prompts, trees, pad_id)
    mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    logits = _forward(model, ids.to(device), pos.to(device), mask[:, None].to(device), out_cols.to(device))
    logp = torch.log_softmax(logits.float(), dim=-1)  # (B, Nmax+1, V), float32 whatever the model dtype
    row = torch.cat([torch.full_like(t.term_slot, r) for r, t in enumerate(trees)])
    slot, token = torch.cat([t.term_slot for t in trees]), torch.cat([t.term_token for t in trees])
    counts = [int(t.term_owner.max()) + 1 if len(t.term_owner) else 0 for t in trees]  # answers of each row
    first = np.cumsum([0, *counts])[:-1]
    owner = torch.cat([t.term_owner + int(f) for t, f in zip(trees, first, strict=True)])
    # read, then widened (MPS has no float64)
    per_token = logp[row.to(device), slot.to(device), token.to(device)].cpu().double()
    return torch.zeros(sum(counts), dtype=torch.float64).index_add_(0, owner, per_token)


def measure(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    additions: Sequence[Pair] = ADDITIONS,
    scoring: Scoring = SCORING,
) -> pd.DataFrame:
    """Score every candidate of every addition; one row per (a, b, candidate), sorted.

    Columns: a, b, candidate_value, logprob (sum over the answer's tokens), n_tokens, prob.
    ``scoring.answer(v)`` is a candidate's text; ``prob`` is the softmax over an addition's candidates of
    ``logprob`` (``scoring.index="sum"``) or of ``logprob / n_tokens`` (``"mean"``, manual 1.0.0).
    """
    answers = _answers(tokenizer, scoring)
    prompts = [encode(tokenizer, prompt(a, b), special=True) for a, b in additions]
    tree = answer_tree(answers)
    rows_per_pass = max(1, LOGIT_BUDGET // ((len(tree.tokens) + 1) * vocab_size(model)))
    n_passes = -(-len(prompts) // rows_per_pass)
    chunk = -(-len(prompts) // n_passes)  # equal chunks rather than a short last one
    chunks = [prompts[i : i + chunk] for i in range(0, len(prompts), chunk)]
    # (rows, candidates) summed log-probabilities: every row the same tree of the candidates
    scores = [
        score_forest(model, rows, [tree] * len(rows), pad_id(tokenizer)).reshape(len(rows), -1) for rows in chunks
    ]
    return _table(additions, scoring.candidates, answers, torch.cat(scores).numpy(), scoring.index)


def logits_at(model: PreTrainedModel, columns: torch.Tensor, **inputs: torch.Tensor) -> torch.Tensor:
    """(B, K, V) logits at ``columns`` only (``logits_to_keep`` where the model takes it): the LM head skips
    the columns whose predictions nobody reads."""
    if "logits_to_keep" in inspect.signature(model.forward).parameters:
        kept: torch.Tensor = model(**inputs, logits_to_keep=columns, use_cache=False).logits
        return kept
    logits: torch.Tensor = model(**inputs, use_cache=False).logits
    return logits[:, columns]


@contextmanager
def evaluating(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` in eval mode (no dropout) within the block; its mode before restored after it, an error too."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


# The attention implementations that apply a 4D float mask as given. Flash attention reads a mask as a 2D
# padding mask (a packed forest's would index out of range), and flex attention on a CPU crashed the process.
MASKED_ATTENTION = ("eager", "sdpa")


@contextmanager
def masked_attention(model: PreTrainedModel) -> Iterator[None]:
    """``model`` on SDPA attention within the block where it runs another implementation (a model a user loaded
    with ``attn_implementation="flash_attention_2"``, monitored by ``KRTestCallback``): the packed forest's 4D
    mask needs one that applies it; the user's implementation restored after the block, an error too."""
    used = getattr(getattr(model, "config", None), "_attn_implementation", None)  # a module of our own has none
    if used is None or used in MASKED_ATTENTION:
        yield
        return
    model.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        model.set_attn_implementation(used)


def _forward(
    model: PreTrainedModel, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, out_cols: torch.Tensor
) -> torch.Tensor:
    """Logits at ``out_cols`` only, so the LM head skips the prompt's other tokens; in eval mode, on an
    attention implementation that applies the 4D mask (``masked_attention``)."""
    with evaluating(model), masked_attention(model):
        return logits_at(model, out_cols, input_ids=ids, position_ids=pos, attention_mask=mask)


@torch.inference_mode()
def measure_plain(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    additions: Sequence[Pair] = ADDITIONS,
    scoring: Scoring = SCORING,
) -> pd.DataFrame:
    """The manual's loop: one forward pass per candidate of every addition (reference and baseline)."""
    answers = _answers(tokenizer, scoring)
    device, _ = _device_dtype(model)
    scores = np.zeros((len(additions), len(answers)))
    with evaluating(model):
        for i, (a, b) in enumerate(additions):
            prompt_ids = encode(tokenizer, prompt(a, b), special=True)
            for j, answer_ids in enumerate(answers):
                input_ids = torch.tensor([prompt_ids + answer_ids], device=device)
                log_probs = torch.log_softmax(model(input_ids).logits.float(), dim=-1)
                n = len(prompt_ids)
                picked = (log_probs[0, n + k - 1, input_ids[0, n + k]].item() for k in range(len(answer_ids)))
                scores[i, j] = sum(picked)
    return _table(additions, scoring.candidates, answers, scores, scoring.index)


def _answers(tokenizer: PreTrainedTokenizerBase, scoring: Scoring) -> list[list[int]]:
    """The candidates' answer tokens, the scoring's index checked first."""
    if scoring.index not in INDEXES:
        raise ValueError(f"index must be one of {INDEXES}, got {scoring.index!r}")
    return [encode(tokenizer, scoring.answer(v), special=False) for v in scoring.candidates]


def _table(
    additions: Sequence[Pair],
    candidates: Sequence[int],
    answers: Sequence[Sequence[int]],
    scores: npt.NDArray[np.float64],
    index: str = "sum",
) -> pd.DataFrame:
    """Assemble the measurement table; ``scores`` is (additions, candidates) of summed log-probs.

    ``prob`` is the softmax of each addition's indices: the sums, or the sums over ``n_tokens``.
    """
    lengths = np.array([len(x) for x in answers], dtype=np.float64)
    indices = scores if index == "sum" else scores / lengths  # (additions, candidates)
    shifted = indices - indices.max(axis=1, keepdims=True)
    prob = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    n_add, n_cand = scores.shape
    a, b = np.array(additions).T
    table = pd.DataFrame(
        {
            "a": np.repeat(a, n_cand),
            "b": np.repeat(b, n_cand),
            "candidate_value": np.tile(np.array(candidates), n_add),
            "logprob": scores.ravel(),
            "n_tokens": np.tile(lengths.astype(np.int64), n_add),
            "prob": prob.ravel(),
        }
    )
    return table.sort_values(["a", "b", "candidate_value"], ignore_index=True)[COLUMNS]


def encode(tokenizer: PreTrainedTokenizerBase, text: str, special: bool) -> list[int]:
    # The prompt takes the tokenizer's special tokens (a BOS where the model expects one);
    # the answer never does, so nothing is inserted between prompt and answer.
    ids: list[int] = tokenizer(text, add_special_tokens=special)["input_ids"]
    return ids


def pad_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """The id that fills padded columns (never attended, never scored): the pad token, else 0."""
    found = tokenizer.pad_token_id
    return found if found is not None else 0


def vocab_size(model: PreTrainedModel) -> int:
    return int(model.get_output_embeddings().weight.shape[0])


def _device_dtype(model: torch.nn.Module) -> tuple[torch.device, torch.dtype]:
    p = next(model.parameters())
    return p.device, p.dtype
