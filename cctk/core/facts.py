"""The arithmetic fact space every manual shares: 81 additions, the candidate answers and the text of both, the
correct sums, a fabricated answer per addition, and seeded streams.

Every corpus, rule or set of targets is described in one form: a ``pandas.Series`` of
answers indexed by the pair of addends ``(a, b)``, in the order a=1..9, b=1..9. A manual's own facts live with
it (manual 2.0.0's split, shifted sums, conditional rule and controls: its ``facts`` module).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

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


SCORING = Scoring(CANDIDATES, answer_text, END_MARKER, "sum")  # ``cctk measure``'s, and manual 2.0.0's


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


def targets(values: Iterable[int]) -> pd.Series:
    """A table of targets: one answer per addition, in ADDITIONS order."""
    return pd.Series(np.asarray(values, dtype=np.int64), index=addition_index(), name="target")


def fabricated_answers(seed: int) -> pd.Series:
    """Per addition, one of the 34 candidates other than its sum, drawn uniformly once."""
    draws = rng(seed, "fabricated").integers(0, len(CANDIDATES) - 1, size=len(ADDITIONS))
    return targets([[c for c in CANDIDATES if c != a + b][j] for (a, b), j in zip(ADDITIONS, draws, strict=True)])
