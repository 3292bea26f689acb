"""Manual 2.0.0's configuration: its profiles, its parts, the held-out share (written here once) and its options.

What ``cctk run`` takes for this manual besides the shared configuration (``cctk.core.config``): ``--holdout``,
``--curves`` and ``--parts`` (``StudyOptions``: each field's metadata is its command-line option). Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core.config import Recipe
from ...core.errors import CctkError, closest
from ...core.facts import ADDITIONS

PARTS = ("A", "B", "C", "D")  # the parts a run can run (``design.ARMS`` tags every arm with one)
HOLDOUT = 0.3  # the share of the 81 additions held out of the arms trained on the seen ones (24)

PROFILES: dict[str, Recipe] = {
    # The manual's recipe (section 5.1): meant for a GPU.
    "paper": Recipe(repeats=20, epochs=10, learning_rate=5e-5, batch_size=8, grad_clip=1.0),
    # Sized for two CPU cores and the bundled 135M model: 42 exposures of each example at batch 32
    # (2.6x the examples per second of batch 8 there, `python -m cctk.bench train`), the learning rate
    # warmed up over the first 10% of the steps, then decaying linearly to 0. Chosen on the Part A arms
    # over seeds (docs/speed.md; `python -m cctk.bench absorb`): peak rates of 4e-4 and above, or 20,
    # 24, 30 or 36 exposures, left the fabricated answers short on some seed.
    "quick": Recipe(
        repeats=6, epochs=7, learning_rate=3e-4, batch_size=32, grad_clip=1.0, schedule="linear", warmup=0.1
    ),
    # Seconds, for tests on a tiny model.
    "smoke": Recipe(repeats=2, epochs=2, learning_rate=1e-3, batch_size=32, grad_clip=1.0),
}

PARTS_HELP = (
    f"Parts of manual 2.0.0 to run, comma-separated among {','.join(PARTS)} (default: all): only "
    "the arms they need are trained (Part A always runs: every other part starts from its models)."
)


@dataclass(frozen=True)
class StudyOptions:
    """What a run of manual 2.0.0 takes besides the shared configuration. Each field's metadata is its command-line
    option (``option``: its help; ``flag``: a switch; ``metavar``) and its MLflow parameter (``param``)."""

    holdout: float = field(
        default=HOLDOUT,
        metadata={"option": f"Share of additions held out [default: {HOLDOUT}].", "param": "holdout_share"},
    )
    curves: bool = field(
        default=False,
        metadata={
            "option": "Measure every arm after every epoch: learning curves (MLflow histories and one more figure).",
            "flag": True,
            "param": "curves",
        },
    )
    parts: tuple[str, ...] = field(default=PARTS, metadata={"option": PARTS_HELP, "metavar": "A,C", "param": "parts"})

    @classmethod
    def of(cls, **given: Any) -> StudyOptions:
        """The options of a run from ``holdout``, ``curves`` and ``parts`` (None or absent: the default), checked:
        the held-out share leaves both groups non-empty, ``parts`` as ``parse_parts`` reads them."""
        holdout = HOLDOUT if given.get("holdout") is None else float(given["holdout"])
        check_holdout(holdout)
        return cls(holdout, bool(given.get("curves")), parse_parts(given.get("parts")))

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> StudyOptions:
        """The options a pipeline or sweep logged (a resume): ``parts`` absent (a run from before ``--parts``) or
        empty: all; no held-out share (a sweep from before ``--protocol``): the default."""
        parts = params.get("parts.resolved", params.get("parts"))  # see tracking.LiveRun.params
        curves = params.get("curves") in ("yes", "True")
        return cls.of(holdout=params.get("holdout_share"), curves=curves, parts=parts)

    def params(self) -> dict[str, str | float]:
        """Its MLflow parameters (those a 2.0.0 run has always logged)."""
        return {"holdout_share": self.holdout, "curves": "yes" if self.curves else "no", "parts": ",".join(self.parts)}

    def words(self) -> list[str]:
        """Its options on a ``cctk run`` line that runs the same cell again: those that differ from the defaults."""
        words = ["--holdout", str(self.holdout)] if self.holdout != HOLDOUT else []
        words += ["--parts", ",".join(self.parts)] if self.parts != PARTS else []
        return words + (["--curves"] if self.curves else [])


def check_holdout(holdout: float) -> None:
    """The held-out share must leave both groups of the split non-empty: ``round(81 * holdout)``
    additions are held out (``facts.split_additions``), so 0.001 holds out none."""
    if not 0 < holdout < 1:
        raise CctkError(f"holdout={holdout} is out of range: must be in (0, 1)")
    n = len(ADDITIONS)
    held = round(n * holdout)
    if held in (0, n):
        raise CctkError(
            f"holdout={holdout} holds out {held} of the {n} additions, leaving "
            f"{'nothing held out' if held == 0 else 'nothing to train on'}: choose a share in "
            f"[0.01, 0.99] ({HOLDOUT} holds out {round(n * HOLDOUT)})"
        )


def parse_parts(parts: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"A,C"`` (or ``("A", "C")``) -> ``("A", "C")``: the parts to run, in PARTS order, Part A always
    (every other part's arms are trained from its models); None or empty: all of them."""
    if parts is None or (isinstance(parts, str) and not parts.strip()):
        return PARTS
    asked = [p.strip().upper() for p in (parts.split(",") if isinstance(parts, str) else parts)]
    unknown = [p for p in asked if p not in PARTS]
    if unknown or not asked:
        given = parts if isinstance(parts, str) else ",".join(parts)
        first = (unknown or [""])[0]
        raise CctkError(
            f"unknown part {first!r} in --parts {given}{_part_hint(first)}: choose among "
            f"{', '.join(PARTS)}, comma-separated (e.g. --parts A,C; Part A always runs)"
        )
    return tuple(p for p in PARTS if p == "A" or p in asked)


def _part_hint(text: str) -> str:
    """`` (did you mean 'C'?)`` for ``PARTC``, ``PART C``, ``C.``, ``CD``; nothing where no part is near."""
    near = closest(text.removeprefix("PART").strip(" .") or text, PARTS) if text else None
    return f" (did you mean {near!r}?)" if near else ""
