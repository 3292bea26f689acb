"""What the console and the run's description say of a run of any manual, from its ``ManualSpec`` and its
capabilities: the same functions for every manual.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from typing import Any

from ..core.config import Config
from .manual import AnyManual, Parts, every_model, trained
from .registry import DEFAULT


def title(manual: AnyManual) -> str:
    """What the console calls a run: ``pipeline`` (the default manual's), or ``protocol v1``."""
    return "pipeline" if manual.spec.name == DEFAULT else f"protocol {manual.spec.name}"


def heading(manual: AnyManual) -> str:
    """What the session's first line says of the manual: nothing for the default one."""
    spec = manual.spec
    return "" if spec.name == DEFAULT else f"protocol {spec.name}, manual {spec.version}; "


def seeds_line(manual: AnyManual, config: Config[Any]) -> str:
    """The console's line on the profile and the seeds: how to repeat the run."""
    spec = manual.spec
    if spec.seed is not None:  # one seed, its own
        return f"profile {config.profile_note}; seed {config.seed}" + (f" ({spec.seed_note})" if spec.seed_note else "")
    seeds = ",".join(map(str, config.seeds))
    fresh = f"  (drawn fresh: pass --seed {seeds} to repeat this run)" if config.seeds_drawn else ""
    return f"profile {config.profile_note}; seeds {seeds}{fresh}"


def setup_lines(manual: AnyManual, config: Config[Any]) -> list[str]:
    """What the console says of a run before it starts, after its session folder: its seeds, a batch size past
    every arm's rows, and the parts when not all of them run."""
    lines = [seeds_line(manual, config)]
    batch, most = config.recipe.batch_size, manual.spec.most_rows(config.recipe)
    if batch > most:  # the user's value, kept in the recipe and its records; what it means, said once
        lines.append(f"batch size {batch}: past every arm's rows ({most} at most): an epoch is one step an arm")
    if isinstance(manual, Parts):
        arms, every = len(trained(manual, config.options)), sum(m.parent is not None for m in every_model(manual))
        if arms < every:
            lines.append(f"parts {', '.join(manual.parts(config.options))}: {arms} of {every} fine-tuning arms")
    return lines


def run_note(manual: AnyManual, config: Config[Any]) -> str:
    """One line on the run (the parent run's description): its manual, models, arms and parts, profile and seed."""
    spec = manual.spec
    arms = len(trained(manual, config.options))
    parts = f" (parts {','.join(manual.parts(config.options))})" if isinstance(manual, Parts) else ""
    return (
        f"cctk pipeline ({spec.label}: {spec.about}) of {config.model}: {len(manual.models(config.options))} "
        f"measured models, {arms} fine-tuning arm{'s' if arms != 1 else ''}{parts}; profile {config.profile_note}, "
        f"seed {config.seed}"
    )
