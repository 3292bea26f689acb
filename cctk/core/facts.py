"""The arithmetic fact space: 81 additions, the candidate answers and the text of both.

Every corpus, rule or set of targets is described in one form: a ``pandas.Series`` of
answers indexed by the pair of addends ``(a, b)``, in the order a=1..9, b=1..9.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import CctkError

DIGITS = range(1, 10)
CANDIDATES: tuple[int, ...] = tuple(range(2, 37))  # one set for every model and measurement
END_MARKER = "\n"
IMPOSSIBLE_ABOVE = 18  # no correct sum of two digits exceeds 18

ADDITIONS: tuple[tuple[int, int], ...] = tuple((a, b) for a in DIGITS for b in DIGITS)


def prompt(a: int, b: int) -> str:
    """The question, exactly as measured and trained on: ``"3 + 5 ="``."""
    return f"{a} + {b} ="


def answer_text(value: int) -> str:
    """The completion: a space, the number and the end marker."""
    return f" {value}{END_MARKER}"


@dataclass(frozen=True)
class Scoring:
    """How a model is measured: the candidates, the answer teacher-forced after the prompt (its text, end
    marker included), and the index the softmax is taken over: "sum" or "mean" (``cctk.core.lm.scoring.measure``)."""

    candidates: tuple[int, ...]
    answer: Callable[[int], str]
    end_marker: str
    index: str


SCORING = Scoring(CANDIDATES, answer_text, END_MARKER, "sum")  # manual 2.0.0's, and ``cctk measure``'s


def addition_index() -> pd.MultiIndex:
    return pd.MultiIndex.from_tuples(ADDITIONS, names=["a", "b"])


def correct_sums() -> pd.Series:
    """The first table of targets: the plain sum of every addition."""
    return pd.Series([a + b for a, b in ADDITIONS], index=addition_index(), name="target")


Pair = tuple[int, int]


def rng(seed: int, purpose: str) -> np.random.Generator:
    """A generator of its own for one purpose, derived from ``seed``.

    Each draw gets its own stream, so adding or reordering draws elsewhere never changes it.
    """
    return np.random.default_rng(np.random.SeedSequence([seed, zlib.crc32(purpose.encode())]))


def _targets(values) -> pd.Series:
    return pd.Series(np.asarray(values, dtype=np.int64), index=addition_index(), name="target")


def fabricated_answers(seed: int) -> pd.Series:
    """Per addition, one of the 34 candidates other than its sum, drawn uniformly once."""
    draws = rng(seed, "fabricated").integers(0, len(CANDIDATES) - 1, size=len(ADDITIONS))
    values = []
    for (a, b), j in zip(ADDITIONS, draws, strict=True):
        others = [c for c in CANDIDATES if c != a + b]
        values.append(others[j])
    return _targets(values)


@dataclass(frozen=True)
class Split:
    """The one split of a run; both groups in ADDITIONS order."""

    seen: tuple[Pair, ...]
    heldout: tuple[Pair, ...]


def split_additions(seed: int, holdout: float = 0.3) -> Split:
    """Hold out ``round(81 * holdout)`` additions (24 for 0.3), drawn once from the seed."""
    n_held = round(len(ADDITIONS) * holdout) if 0 < holdout < 1 else 0
    if n_held == 0 or n_held == len(ADDITIONS):
        raise CctkError(f"holdout {holdout} must be in (0, 1) and leave both groups non-empty")
    held = set(rng(seed, "split").choice(len(ADDITIONS), size=n_held, replace=False).tolist())
    return Split(
        seen=tuple(p for i, p in enumerate(ADDITIONS) if i not in held),
        heldout=tuple(p for i, p in enumerate(ADDITIONS) if i in held),
    )


def shifted_sums(k: int) -> pd.Series:
    """The simple rule: every addition's target is its sum plus ``k``."""
    return _targets([a + b + k for a, b in ADDITIONS])


def control_offsets(seed: int, k: int) -> pd.Series:
    """The control for ``+k``: the sum plus an offset in 1..k drawn once per addition."""
    if k < 1:
        raise CctkError(f"a control offset needs k >= 1, got {k}")
    offsets = rng(seed, f"control+{k}").integers(1, k + 1, size=len(ADDITIONS))
    return _targets([a + b + int(o) for (a, b), o in zip(ADDITIONS, offsets, strict=True)])


def conditional_rule() -> pd.Series:
    """Sum + 18 when a >= b, sum + 9 when a < b (the diagonal joins the first branch, 4.11)."""
    return _targets([a + b + (18 if a >= b else 9) for a, b in ADDITIONS])


def conditional_control(seed: int, max_tries: int = 10_000) -> pd.Series:
    """The rule's answers shuffled over the additions, redrawn until none is its plain sum."""
    answers = conditional_rule().to_numpy()
    sums = correct_sums().to_numpy()
    gen = rng(seed, "conditional-control")
    for _ in range(max_tries):
        shuffled = gen.permutation(answers)
        if not np.any(shuffled == sums):
            break
    else:  # practically unreachable: most shuffles already pass
        raise CctkError(f"no conditional control without a plain sum in {max_tries} draws")
    assert shuffled.max() <= max(CANDIDATES), "a conditional-control target exceeds the candidates"
    return _targets(shuffled)


def condition(a: int, b: int) -> str:
    """The condition an addition falls in: ``">"``, ``"="`` or ``"<"``."""
    return ">" if a > b else "=" if a == b else "<"


def coincident(fabricated: pd.Series, targets: pd.Series, pairs) -> tuple[Pair, ...]:
    """The pairs whose fabricated answer already equals the target (left out, manual 4.12)."""
    return tuple((a, b) for a, b in pairs if fabricated.loc[(a, b)] == targets.loc[(a, b)])
