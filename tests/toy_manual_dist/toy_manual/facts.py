"""The toy manual's facts: the 81 additions read as two digits of their sum, the last one and the tens one, answered
among the candidates 0..9 with cctk's answer text (a space, the number, the end marker)."""

from __future__ import annotations

import pandas as pd

from cctk.core.facts import ADDITIONS, END_MARKER, Scoring, answer_text, targets

CANDIDATES: tuple[int, ...] = tuple(range(10))
SCORING = Scoring(CANDIDATES, answer_text, END_MARKER, "sum")
DIGITS = ("last", "tens")  # its targets, by key: each arm is trained on one


def digits(which: str) -> pd.Series:
    """The last digit (``3 + 9`` -> 2) or the tens digit (-> 1) of every sum, in ADDITIONS order."""
    return targets([(a + b) % 10 if which == "last" else (a + b) // 10 for a, b in ADDITIONS])
