"""The facts of manual 1.0.0 (Listings 2, 6 and 7): candidates 2..18, the answer ``" {v}"``, and the
reference notebook's draws, reproduced exactly.

The notebook seeds Python's ``random`` once (``random.seed(42)``), draws one fabricated answer per
addition with ``random.choice`` over the 16 wrong candidates, in ``itertools.product(range(1, 10),
repeat=2)`` order, then repeats the 81 texts ``N_REPEATS`` times and ``random.shuffle``s them,
continuing the same stream. ``draw`` does the same with a ``random.Random`` of its own (the same
stream as the module-level functions, without touching their global state).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pandas as pd

from ...core.facts import ADDITIONS, Scoring, addition_index, prompt

CANDIDATES: tuple[int, ...] = tuple(range(2, 19))  # CANDIDATE_VALUES of Listing 2 (17 values)
INDEX = "mean"  # the softmax is taken over the mean log-probability per answer token (Listing 5)
PAIRS = ((3, 5), (5, 8), (7, 4))  # the additions Listing 12 plots


def answer_text(value: int) -> str:
    """The answer teacher-forced after the prompt: a space and the number, no end marker (Listing 3)."""
    return f" {value}"


SCORING = Scoring(CANDIDATES, answer_text, "", INDEX)  # manual 1.0.0's: no end marker, the mean


def text(a: int, b: int, value: int) -> str:
    """One corpus text, ``"3 + 5 = 7"`` (Listing 6): the prompt and the answer as one string."""
    return f"{prompt(a, b)}{answer_text(value)}"


@dataclass(frozen=True)
class Draws:
    """What the seeded stream gives: the fabricated answers and the shuffled corpus texts."""

    seed: int
    fabricated: pd.Series  # one per addition (index a, b), in ADDITIONS order
    texts: tuple[str, ...]  # 81 * repeats, in the notebook's order

    def table(self) -> pd.DataFrame:
        """targets.csv of a v1 session: a, b, correct sum, fabricated answer."""
        return pd.DataFrame(
            {
                "a": [a for a, _ in ADDITIONS],
                "b": [b for _, b in ADDITIONS],
                "correct sum": [a + b for a, b in ADDITIONS],
                "fabricated answer": self.fabricated.to_numpy(),
            }
        )


def draw(seed: int, repeats: int) -> Draws:
    """Listings 6-7 with ``random.seed(seed)``; ADDITIONS is itertools.product(range(1, 10), repeat=2)."""
    stream = random.Random(seed)
    values = []
    for a, b in ADDITIONS:
        wrong = [v for v in CANDIDATES if v != a + b]
        values.append(stream.choice(wrong))
    texts = [text(a, b, v) for (a, b), v in zip(ADDITIONS, values, strict=True)] * repeats
    stream.shuffle(texts)
    fabricated = pd.Series(values, index=addition_index(), name="target", dtype="int64")
    return Draws(seed, fabricated, tuple(texts))
