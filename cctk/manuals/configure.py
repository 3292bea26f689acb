"""A run of any manual, configured: its options from the command line, a checked ``Config``, its MLflow
parameters and back, and the ``cctk run`` line that repeats it. The same functions for every manual: what differs is
read from its ``ManualSpec`` (profiles, seed, options record).

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from ..core.config import AUTO, Config, Recipe, parse_seeds, recipe_of, recipe_overrides, seeds_of
from ..core.errors import CctkError
from . import registry
from .manual import AnyManual, ManualOptions, ManualSpec
from .registry import DEFAULT, LEGACY


@dataclass(frozen=True)
class Option:
    """One command-line option of a manual (``cctk run --<name>``), from a field of its options record."""

    name: str  # the field's name (``--holdout``: ``holdout``)
    help: str
    flag: bool = False  # a switch
    kind: type = str  # what the command line reads it as (a switch: bool)
    metavar: str | None = None

    @property
    def flag_name(self) -> str:
        return f"--{self.name.replace('_', '-')}"


def command_options(spec: ManualSpec) -> tuple[Option, ...]:
    """A manual's options on the command line, from its options record's fields."""
    record = spec.options_type
    assert is_dataclass(record)
    return tuple(
        Option(f.name, f.metadata["option"], bool(f.metadata.get("flag")), _kind(f.default), f.metadata.get("metavar"))
        for f in fields(record)
    )


def _kind(default: object) -> type:
    """What the command line reads an option with this default as: a switch, a number, or text."""
    return bool if isinstance(default, bool) else float if isinstance(default, float) else str


def options(spec: ManualSpec, **given: Any) -> ManualOptions:
    """Its options from what was given by name (None: the default), checked: one line naming an option it does
    not take."""
    takes = {o.name for o in command_options(spec)}
    unknown = sorted(name for name, value in given.items() if value is not None and name not in takes)
    if unknown:
        raise CctkError(f"{spec.label} (protocol {spec.name}) takes no option {', '.join(unknown)}")
    return spec.options_type.of(**given)


def configure(
    manual: AnyManual,
    model: str,
    profile: str = AUTO,
    seeds: tuple[int, ...] | None = None,
    device: str = "cpu",
    **values: Any,
) -> Config[Any]:
    """A checked configuration of a run: one of its profiles (``auto`` resolved for ``device``) with per-value
    overrides of the recipe (None = keep), its seeds (its own by default, one alone where it has one), and its
    options; ``values`` are recipe values and options by name."""
    spec = manual.spec
    names = {f.name for f in fields(Recipe)}
    resolved, recipe = recipe_of(spec.profiles, profile, device, **{k: v for k, v in values.items() if k in names})
    chosen = options(spec, **{k: v for k, v in values.items() if k not in names})
    one = (spec.seed,) if spec.seed is not None else None
    picked, drawn = seeds_of(tuple(seeds[:1]) if seeds and one else seeds, one)
    return Config(model, resolved, recipe, picked, spec.name, chosen, seeds_drawn=drawn, profile_requested=profile)


def config_from_params(manual: AnyManual, params: Mapping[str, str]) -> Config[Any]:
    """The configuration of a pipeline of ``manual``, read back from its MLflow parameters (a resume)."""
    profile = params.get("profile.resolved", params["profile"])  # see tracking.LiveRun.params
    config = configure(manual, params["model"], profile, parse_seeds(params["seeds"]), **recipe_overrides(params))
    return replace(
        config,
        options=manual.spec.options_type.from_params(params),
        profile_requested=params.get("profile_requested", config.profile),
    )


def params(manual: AnyManual, config: Config[Any]) -> dict[str, str | int | float]:
    """The parent run's MLflow parameters: the configuration's, its options', its name (a run of the legacy manual
    logs none, as runs from before protocols did) and its constants."""
    spec = manual.spec
    named = {} if spec.name == LEGACY else {"protocol": spec.name}
    return {**config.as_params(), **config.options.params(), **named, **spec.constants}


def reproduce(manual: AnyManual, config: Config[Any]) -> str:
    """``cctk run ...`` that runs the same cell again: model, profile in force, protocol (but the default's), every
    seed, the recipe values that differ from the profile's, and its options that differ from their defaults."""
    spec = manual.spec
    words = ["cctk", "run", "--model", config.model, "--profile", config.profile]
    if spec.name != DEFAULT:
        words += ["--protocol", spec.name]
    words += ["--seed", _seeds(spec, config)]
    base = spec.profiles[config.profile]
    for f in fields(config.recipe):
        value = getattr(config.recipe, f.name)
        if value != getattr(base, f.name):
            words += [f"--{f.name.replace('_', '-')}", str(value)]
    return shlex.join(words + config.options.words())


def _seeds(spec: ManualSpec, config: Config[Any]) -> str:
    """The first seed alone where the others are the ones derived from it (or it takes one), else all of them."""
    first = str(config.seeds[0])
    if spec.seed is not None or parse_seeds(first) == tuple(config.seeds):
        return first
    return ",".join(map(str, config.seeds))


def make_config(
    model: str, profile: str = AUTO, seeds: tuple[int, ...] | None = None, *, protocol: str = DEFAULT, **values: Any
) -> Config[Any]:
    """A checked configuration of a run of the manual named ``protocol`` (the library's entry): recipe values,
    ``device`` and its options by name (``configure``)."""
    return configure(registry.get(protocol), model, profile, seeds, **values)
