"""The fourteen measured models: who is trained from whom, on which targets, over which additions.

Pure and seeded: ``build_study_inputs(seed, holdout)`` gives every target table, the split and
the coincident-addition exclusions; the same seed gives the same tables byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ...core import facts
from ...core.facts import Pair
from . import facts as study_facts
from .config import HOLDOUT, PARTS
from .facts import Split
from .labels import model_name, target_name


@dataclass(frozen=True)
class Arm:
    """One fine-tuning run from a fresh copy of ``parent``, on ``target`` over ``pairs``.

    The study design is declared here and nowhere else: a rule names the ``control`` it is read against
    on the held-out additions; every other list (rule / control pairs, a part's arms, a profile's
    models) derives from ``ARMS``."""

    key: str
    parent: str
    target: str  # key of a target table (see build_targets)
    pairs: str  # "all" or "seen"
    part: str  # one of config.PARTS: the part whose tables and figures read it
    control: str | None = None  # a rule's control (an arm's key); None for every other arm

    @property
    def is_rule(self) -> bool:
        return self.control is not None

    @property
    def is_control(self) -> bool:
        return any(arm.control == self.key for arm in ARMS)

    @property
    def family(self) -> str | None:
        """The rule's target a rule and its controls share (``plus18``, ``plus3``, ``cond``); None for the others."""
        if self.is_rule:
            return self.target
        return next((arm.target for arm in ARMS if arm.control == self.key), None)


ARMS: tuple[Arm, ...] = (
    Arm("m_correct", "base", "correct", "all", "A"),
    Arm("m_random", "m_correct", "fabricated", "all", "A"),
    Arm("m_recover", "m_random", "correct", "seen", "B"),
    Arm("c18_correct", "m_correct", "plus18", "seen", "C", control="c18ctl_correct"),
    Arm("c18_random", "m_random", "plus18", "seen", "C", control="c18ctl_correct"),  # the simple rules'
    Arm("c3_correct", "m_correct", "plus3", "seen", "C", control="c3ctl_correct"),  # controls are trained
    Arm("c3_random", "m_random", "plus3", "seen", "C", control="c3ctl_correct"),  # from m_correct only
    Arm("c18ctl_correct", "m_correct", "ctl18", "seen", "C"),
    Arm("c3ctl_correct", "m_correct", "ctl3", "seen", "C"),
    Arm("d_correct", "m_correct", "cond", "seen", "D", control="dctl_correct"),
    Arm("d_random", "m_random", "cond", "seen", "D", control="dctl_random"),
    Arm("dctl_correct", "m_correct", "condctl", "seen", "D"),
    Arm("dctl_random", "m_random", "condctl", "seen", "D"),
)
ARM_BY_KEY = {arm.key: arm for arm in ARMS}
MODEL_KEYS: tuple[str, ...] = ("base", *tuple(arm.key for arm in ARMS))
PARENTS: frozenset[str] = frozenset(arm.parent for arm in ARMS) - {"base"}  # checkpointed when trained
# Each rule and the control it is read against, in ARMS order.
RULE_VS_CONTROL: tuple[tuple[str, str], ...] = tuple((arm.key, arm.control) for arm in ARMS if arm.control is not None)
CONTROLS: frozenset[str] = frozenset(control for _, control in RULE_VS_CONTROL)
# The arms that are neither a rule nor a control (Parts A and B): in colour on the loss charts.
MAIN_SEQUENCE: tuple[str, ...] = tuple(arm.key for arm in ARMS if not (arm.is_rule or arm.is_control))


def part_arms(part: str) -> tuple[str, ...]:
    """The keys of the arms of one part, in ARMS order."""
    return tuple(arm.key for arm in ARMS if arm.part == part)


def family_arms(family: str) -> tuple[str, ...]:
    """The rules of one family and their controls, in ARMS order (the models of its profile chart)."""
    return tuple(arm.key for arm in ARMS if arm.family == family)


def arms_for(parts: tuple[str, ...] = PARTS) -> tuple[Arm, ...]:
    """The arms a run of ``parts`` trains, in ARMS order: those of the parts, and every ancestor
    they are trained from (Part C's arms need Part A's models, whether or not A was asked)."""
    needed = {arm.key for arm in ARMS if arm.part in parts}
    for arm in reversed(ARMS):  # ARMS lists a parent before its children: one pass back reaches every ancestor
        if arm.key in needed and arm.parent in ARM_BY_KEY:
            needed.add(arm.parent)
    return tuple(arm for arm in ARMS if arm.key in needed)


def models_for(parts: tuple[str, ...] = PARTS) -> tuple[str, ...]:
    """The models a run of ``parts`` measures: the base model and the arms of ``arms_for``."""
    return ("base", *tuple(arm.key for arm in arms_for(parts)))


def own_target(key: str) -> str:
    """The target a model is scored on by default: its corpus's (the correct sum for the base)."""
    return "correct" if key == "base" else ARM_BY_KEY[key].target


def build_targets(seed: int) -> dict[str, pd.Series]:
    """Every target table of a run, each drawn once from ``seed``."""
    return {
        "correct": facts.correct_sums(),
        "fabricated": facts.fabricated_answers(seed),
        "plus18": study_facts.shifted_sums(18),
        "plus3": study_facts.shifted_sums(3),
        "ctl18": study_facts.control_offsets(seed, 18),
        "ctl3": study_facts.control_offsets(seed, 3),
        "cond": study_facts.conditional_rule(),
        "condctl": study_facts.conditional_control(seed),
    }


@dataclass(frozen=True)
class StudyInputs:
    """Targets, split and exclusions: everything a run draws before training."""

    seed: int
    targets: dict[str, pd.Series]
    split: Split
    excluded: dict[str, tuple[Pair, ...]] = field(default_factory=dict)  # arm -> held-out pairs left out

    def corpus_pairs(self, key: str) -> tuple[Pair, ...]:
        return facts.ADDITIONS if ARM_BY_KEY[key].pairs == "all" else self.split.seen

    def table(self) -> pd.DataFrame:
        """targets.csv (``targets_table``)."""
        return targets_table(self)

    def heldout(self, key: str) -> tuple[Pair, ...]:
        """The held-out additions a model is read on, without its coincident ones."""
        left_out = set(self.excluded.get(key, ()))
        return tuple(p for p in self.split.heldout if p not in left_out)


def build_study_inputs(seed: int, holdout: float = HOLDOUT) -> StudyInputs:
    targets = build_targets(seed)
    split = study_facts.split_additions(seed, holdout)
    excluded = {
        arm.key: study_facts.coincident(targets["fabricated"], targets[arm.target], split.heldout)
        for arm in ARMS
        if arm.parent == "m_random" and arm.pairs == "seen"
    }
    return StudyInputs(seed, targets, split, excluded)


def targets_table(inputs: StudyInputs) -> pd.DataFrame:
    """The draws of a run on one page: per addition, its split group, every target table (by plain
    name) and the arms that leave it out of their held-out results (``;``-separated)."""
    held = set(inputs.split.heldout)
    table = pd.DataFrame(
        {
            "a": [a for a, _ in facts.ADDITIONS],
            "b": [b for _, b in facts.ADDITIONS],
            "split": ["held out" if p in held else "seen" for p in facts.ADDITIONS],
        }
    )
    for key, targets in inputs.targets.items():
        table[target_name(key)] = targets.to_numpy()
    table["excluded"] = [
        ";".join(model_name(arm) for arm, pairs in inputs.excluded.items() if p in pairs) for p in facts.ADDITIONS
    ]
    return table


def corpus_table(inputs: StudyInputs, key: str) -> pd.DataFrame:
    """The distinct examples of an arm's corpus (before repeats and shuffling): its MLflow dataset."""
    targets = inputs.targets[ARM_BY_KEY[key].target]
    pairs = inputs.corpus_pairs(key)
    return pd.DataFrame(
        {
            "a": [a for a, _ in pairs],
            "b": [b for _, b in pairs],
            "prompt": [facts.prompt(a, b) for a, b in pairs],
            "completion": [facts.answer_text(int(targets.loc[p])) for p in pairs],
        }
    )
