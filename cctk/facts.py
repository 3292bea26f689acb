"""The arithmetic fact space: 81 additions, the candidate answers and the text of both.

Every corpus, rule or set of targets is described in one form: a ``pandas.Series`` of
answers indexed by the pair of addends ``(a, b)``, in the order a=1..9, b=1..9.
"""
from __future__ import annotations

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


def addition_index() -> pd.MultiIndex:
    return pd.MultiIndex.from_tuples(ADDITIONS, names=["a", "b"])


def correct_sums() -> pd.Series:
    """The first table of targets: the plain sum of every addition."""
    return pd.Series([a + b for a, b in ADDITIONS], index=addition_index(), name="target")
