"""Manual 2.0.0's own facts: the one split of a run into seen and held-out additions, the shifted sums of the simple
rules, the conditional rule, the controls of both, and the additions whose fabricated answer already is a target.

Pure and seeded, in the form of every table of targets (``cctk.core.facts``): a ``pandas.Series`` of answers
indexed by ``(a, b)``, in ADDITIONS order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...core.errors import CctkError
from ...core.facts import ADDITIONS, CANDIDATES, Pair, correct_sums, rng, targets
from .config import HOLDOUT


@dataclass(frozen=True)
class Split:
    """The one split of a run; both groups in ADDITIONS order."""

    seen: tuple[Pair, ...]
    heldout: tuple[Pair, ...]


def split_additions(seed: int, holdout: float = HOLDOUT) -> Split:
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
    return targets([a + b + k for a, b in ADDITIONS])


def control_offsets(seed: int, k: int) -> pd.Series:
    """The control for ``+k``: the sum plus an offset in 1..k drawn once per addition."""
    if k < 1:
        raise CctkError(f"a control offset needs k >= 1, got {k}")
    offsets = rng(seed, f"control+{k}").integers(1, k + 1, size=len(ADDITIONS))
    return targets([a + b + int(o) for (a, b), o in zip(ADDITIONS, offsets, strict=True)])


def conditional_rule() -> pd.Series:
    """Sum + 18 when a >= b, sum + 9 when a < b (the diagonal joins the first branch, 4.11)."""
    return targets([a + b + (18 if a >= b else 9) for a, b in ADDITIONS])


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
    return targets(shuffled)


def condition(a: int, b: int) -> str:
    """The condition an addition falls in: ``">"``, ``"="`` or ``"<"``."""
    return ">" if a > b else "=" if a == b else "<"


def coincident(fabricated: pd.Series, target: pd.Series, pairs: Iterable[Pair]) -> tuple[Pair, ...]:
    """The pairs whose fabricated answer already equals the target (left out, manual 4.12)."""
    return tuple((a, b) for a, b in pairs if fabricated.loc[(a, b)] == target.loc[(a, b)])
