"""Plain-language names for everything a user sees, translated from internal keys in one place."""
from __future__ import annotations

MODELS: dict[str, str] = {
    "base": "base model",
    "m_correct": "correct sums",
    "m_random": "fabricated answers",
    "m_recover": "recovery",
    "c18_correct": "sum + 18 from correct sums",
    "c18_random": "sum + 18 from fabricated answers",
    "c3_correct": "sum + 3 from correct sums",
    "c3_random": "sum + 3 from fabricated answers",
    "c18ctl_correct": "control for + 18",
    "c3ctl_correct": "control for + 3",
    "d_correct": "conditional rule from correct sums",
    "d_random": "conditional rule from fabricated answers",
    "dctl_correct": "control for the conditional rule from correct sums",
    "dctl_random": "control for the conditional rule from fabricated answers",
}

TARGETS: dict[str, str] = {
    "correct": "correct sum",
    "random": "fabricated answer",
    "plus18": "sum + 18",
    "plus3": "sum + 3",
    "ctl18": "random offset 1..18",
    "ctl3": "random offset 1..3",
    "cond": "conditional rule",
    "condctl": "shuffled conditional answers",
}

GROUPS = {"seen": "seen", "heldout": "never seen", "all": "all additions"}


def model_name(key: str) -> str:
    return MODELS[key]


def target_name(key: str) -> str:
    return TARGETS[key]


def file_stem(text: str) -> str:
    """A plain name made safe for a file name: ``sum + 18 from correct sums`` -> ``sum_plus_18_from_correct_sums``."""
    cleaned = text.replace("+", "plus").replace(".", "_")
    return "_".join("".join(c if c.isalnum() else " " for c in cleaned).split())
