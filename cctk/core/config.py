"""Configuration of a run, what every manual shares: the fine-tuning recipe, the seeds, a profile's recipe with
per-value overrides, and the configuration of one run (``Config``), generic over what its manual takes besides.

Declared once as frozen dataclasses; ``asdict(config)`` is what gets logged. Every recipe value can be overridden
one by one (CLI options, MLproject parameters). Each manual's profiles and options live with it
(each one's ``config`` module, in its folder under ``cctk/manuals/``); nothing here names a manual.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from dataclasses import Field, asdict, dataclass, field, fields, replace
from typing import Any, Generic, TypeVar

from .errors import CctkError, did_you_mean

N_SEEDS = 5  # seeds[0] drives every draw; the others are reserved for repetitions, as in the manual
SCHEDULES = ("constant", "linear")  # how the learning rate moves over a run's steps
PRECISIONS = ("float32", "bf16", "fp16")  # arithmetic of the forward and backward passes (weights stay float32)
OPTIMIZERS = ("adamw", "adamw8bit")  # AdamW (the manual's), or 8-bit AdamW (cctk.core.lm.adamw8bit)


MOST = 10_000  # the most repeats and epochs a recipe takes (the manual's: 20 and 10)


@dataclass(frozen=True)
class Recipe:
    """One fine-tuning recipe, identical for every run of a pipeline."""

    repeats: int = field(default=20, metadata={"help": "repeats of each example in a corpus"})
    epochs: int = field(default=10, metadata={"help": "epochs of every fine-tuning run"})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate (the peak, with a schedule)"})
    batch_size: int = field(
        default=8, metadata={"help": "examples per optimizer step (an arm with fewer rows trains all of them in one)"}
    )
    grad_clip: float = field(default=1.0, metadata={"help": "gradient-norm clipping (0 = none, as manual 1.0.0)"})
    # torch.optim.AdamW's default, as in the manual's listing
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    schedule: str = field(
        default="constant",
        metadata={
            "help": "learning rate over the steps: constant (the manual's listing) or linear decay to 0",
            "choices": SCHEDULES,
        },
    )
    warmup: float = field(
        default=0.0,
        metadata={"help": "share of the steps over which the learning rate rises linearly from 0 (0 = none)"},
    )
    precision: str = field(
        default="float32",
        metadata={
            "help": "forward and backward arithmetic: float32 (the manual's), bf16 autocast, or fp16 autocast with a "
            "gradient scaler (CUDA devices without bf16, such as the T4); weights, optimizer and measurement "
            "stay float32",
            "choices": PRECISIONS,
        },
    )
    optimizer: str = field(
        default="adamw",
        metadata={
            "help": "adamw (the manual's: two float32 moments, 8 bytes a parameter) or adamw8bit (8-bit moments "
            "with torchao's AdamW8bit, CUDA only: about 2 bytes a parameter)",
            "choices": OPTIMIZERS,
        },
    )

    def check(self) -> None:
        """Fail in one line on a value out of range, before any work starts."""
        for name in ("repeats", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise CctkError(f"recipe value {name}={getattr(self, name)} is out of range: must be >= 1")
        for name in ("repeats", "epochs"):  # a digit too many: the corpus (81 x repeats rows) is built before the
            if getattr(self, name) > MOST:  # forecast could say how long it would take
                raise CctkError(
                    f"recipe value {name}={getattr(self, name)} is out of range: at most {MOST:,} (the manual's "
                    "recipe takes 20 repeats and 10 epochs)"
                )
        if not (math.isfinite(self.learning_rate) and 0 < self.learning_rate < 1):
            raise CctkError(f"recipe value learning_rate={self.learning_rate} is out of range: must be in (0, 1)")
        if not (math.isfinite(self.grad_clip) and self.grad_clip >= 0):
            raise CctkError(f"recipe value grad_clip={self.grad_clip} is out of range: must be >= 0 (0 = no clipping)")
        if not (math.isfinite(self.weight_decay) and 0 <= self.weight_decay < 1):
            raise CctkError(f"recipe value weight_decay={self.weight_decay} is out of range: must be in [0, 1)")
        if self.schedule not in SCHEDULES:
            raise CctkError(f"recipe value schedule={self.schedule!r} is unknown: choose one of {', '.join(SCHEDULES)}")
        if not (math.isfinite(self.warmup) and 0 <= self.warmup < 1):
            raise CctkError(f"recipe value warmup={self.warmup} is out of range: must be in [0, 1)")
        for name, choices in (("precision", PRECISIONS), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in choices:
                raise CctkError(
                    f"recipe value {name}={getattr(self, name)!r} is unknown: choose one of {', '.join(choices)}"
                )

    def steps(self, n_examples: int) -> int:
        """Optimizer steps of a run on ``n_examples``: every epoch ends with a partial batch if need be."""
        return self.epochs * math.ceil(n_examples / self.batch_size)

    def lr_factor(self, step: int, total: int) -> float:
        """Multiplier of ``learning_rate`` at optimizer step ``step`` (0-based) of ``total``."""
        warm = round(self.warmup * total)  # warm-up steps: factors 1/warm, 2/warm, ..., 1
        if step < warm:
            return (step + 1) / warm
        if self.schedule == "linear":  # 1 at the end of the warm-up, 1/(total - warm) at the last step
            return (total - step) / (total - warm)
        return 1.0


AUTO = "auto"  # the default profile: paper on a CUDA device, quick on a CPU


def resolve_profile(profile: str, device: str) -> str:
    """``auto`` -> ``paper`` where a CUDA device trains, ``quick`` on a CPU; any other name as it is."""
    if profile != AUTO:
        return profile
    return "paper" if str(device).startswith("cuda") else "quick"


def recipe_fields() -> list[Field[Any]]:
    """The recipe's fields (name, type, default, metadata help): the CLI and MLproject derive from them."""
    return list(fields(Recipe))


FIELD_TYPES = {"int": int, "float": float, "str": str}  # a recipe field's annotation -> its Python type


def field_type(name: str) -> type:
    """The Python type of the recipe field ``name`` (int, float or str), read from its annotation: the one
    reading of it (the CLI's options, ``--set`` and a resume's parameters all cast through it)."""
    kind = {f.name: f.type for f in fields(Recipe)}[name]
    return FIELD_TYPES[kind if isinstance(kind, str) else kind.__name__]


OptionsT = TypeVar("OptionsT")  # what a manual takes besides the shared configuration (``NoOptions``: nothing)


@dataclass(frozen=True)
class NoOptions:
    """The options of a manual that takes none besides the shared configuration."""

    @classmethod
    def of(cls, **given: Any) -> NoOptions:
        return cls()  # nothing to read: an option given by name is refused before (cctk.manuals.configure)

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> NoOptions:
        return cls()

    def params(self) -> dict[str, str | float]:
        return {}

    def words(self) -> list[str]:
        return []


@dataclass(frozen=True)
class Config(Generic[OptionsT]):
    """Everything that shapes one pipeline run: what every manual shares, its manual's name and that manual's own
    options (manual 2.0.0: the held-out share, curves and parts)."""

    model: str
    profile: str  # the profile in force (``auto`` already resolved)
    recipe: Recipe
    seeds: tuple[int, ...]
    protocol: str  # its manual's name (``cctk.manuals.registry``): run_info.json's "protocol", the cctk.protocol tag
    options: OptionsT
    seeds_drawn: bool = field(default=False, compare=False)  # True when no seed was given
    profile_requested: str | None = field(default=None, compare=False)  # e.g. "auto"; None: as ``profile``

    @property
    def seed(self) -> int:
        return self.seeds[0]

    @property
    def profile_note(self) -> str:
        """``quick`` or ``quick (auto: CPU)``: what the run report and the console say."""
        if self.profile_requested != AUTO:
            return self.profile
        return f"{self.profile} (auto: {'CUDA device' if self.profile == 'paper' else 'CPU'})"

    def as_params(self) -> dict[str, str | int | float]:
        """Flat MLflow parameters of what every manual shares, the values in force (its manual adds its own).

        Recipe values are ``recipe.<name>``, never clashing with the MLproject's parameters that ``mlflow run``
        logs. ``seeds`` lists every seed; ``seed`` is the one used (``seeds[0]``), ``seeds_reserved`` the others.
        """
        params: dict[str, str | int | float] = {
            "model": self.model,
            "profile": self.profile,
            "seeds": ",".join(map(str, self.seeds)),
            "seed": self.seed,
            "seeds_reserved": ",".join(map(str, self.seeds[1:])) or "none",
        }
        if self.profile_requested and self.profile_requested != self.profile:
            params["profile_requested"] = self.profile_requested
        params.update({f"recipe.{k}": v for k, v in asdict(self.recipe).items()})
        return params


def recipe_of(
    profiles: Mapping[str, Recipe], profile: str = AUTO, device: str = "cpu", **overrides: int | float | str | None
) -> tuple[str, Recipe]:
    """(profile in force, its recipe with per-value overrides, checked): ``profile`` one of ``profiles`` (a
    manual's), or ``auto`` resolved for ``device``; an override of None keeps the profile's value."""
    requested = profile
    profile = resolve_profile(profile, device)
    if profile not in profiles:
        hint = did_you_mean(str(requested), [AUTO, *profiles])
        raise CctkError(f"unknown profile {requested!r}{hint}; choose one of: {AUTO}, {', '.join(profiles)}")
    unknown = set(overrides) - set(asdict(profiles[profile]))
    if unknown:
        raise CctkError(f"unknown recipe values: {', '.join(sorted(unknown))}")
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}  # each checked by Recipe.check
    recipe = replace(profiles[profile], **given)
    recipe.check()
    return profile, recipe


def seeds_of(seeds: tuple[int, ...] | None, default: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], bool]:
    """(the seeds of a run, whether they were drawn fresh): ``seeds`` checked, else ``default`` (a manual's), else
    fresh ones."""
    given = seeds or default
    if not given:
        return draw_seeds(), True
    check_seeds(given)
    return tuple(given), False


def recipe_overrides(params: Mapping[str, str]) -> dict[str, Any]:
    """The recipe values a pipeline logged (``recipe.<name>``), typed by their fields: for a resume."""
    return {
        f.name: field_type(f.name)(params[f"recipe.{f.name}"]) for f in fields(Recipe) if f"recipe.{f.name}" in params
    }


def draw_seeds(n: int = N_SEEDS) -> tuple[int, ...]:
    """Fresh, distinct seeds (printed and recorded by the caller, so the run can be repeated)."""
    drawn: list[int] = []
    while len(drawn) < n:
        s = secrets.randbelow(2**31)
        if s not in drawn:
            drawn.append(s)
    return tuple(drawn)


def parse_seeds(text: str | None) -> tuple[int, ...] | None:
    """``"7"`` or ``"7,11,13"`` -> a tuple; a lone seed is completed with reserved ones derived from it."""
    if text is None or str(text).strip() == "":
        return None
    try:
        values = tuple(int(s) for s in str(text).split(","))
    except ValueError:
        raise CctkError(f"seeds must be integers separated by commas, got {text!r}") from None
    check_seeds(values)  # what the user typed, before any is derived from it
    if len(values) == 1:  # reserved seeds wrap past the top (4294967295 -> 0, 1, ...), as seeds are mod 2**32
        values += tuple((values[0] + i) % 2**32 for i in range(1, N_SEEDS))
    return values


def check_seeds(seeds: tuple[int, ...]) -> None:
    bad = [s for s in seeds if s < 0 or s >= 2**32]
    if bad:
        raise CctkError(f"seeds must be in 0..2**32-1 (4294967295), got {', '.join(map(str, bad))}")


def parse_set(text: str) -> tuple[str, tuple[int | float | str, ...]]:
    """``learning_rate=1e-4,3e-4`` -> ("learning_rate", (0.0001, 0.0003)), typed by the recipe field."""
    name, sep, values = text.partition("=")
    names = [f.name for f in fields(Recipe)]
    if not sep or name not in names:
        raise CctkError(f"--set takes NAME=V1,V2 with NAME a recipe value ({', '.join(names)}), got {text!r}")
    cast = field_type(name)
    try:
        parsed = tuple(cast(v) for v in values.split(","))
    except ValueError:
        raise CctkError(f"--set {name}: cannot read {values!r} as {cast.__name__} values") from None
    if len(set(parsed)) < len(parsed):  # two cells of one recipe would be one cell run twice
        raise CctkError(f"--set {name}={values}: a value is given twice")
    return name, parsed


MAX_FRESH_SEEDS = 1000  # --seeds N above this is a seed written without its comma, not a count


def seeds_or_count(text: str) -> tuple[int, ...]:
    """``--seeds`` of a sweep or ``bench absorb``: ``N`` draws N fresh seeds, ``S1,S2,...`` are the seeds
    (one seed alone: ``S,``)."""
    parts = str(text).split(",")
    count = len(parts) == 1  # N, not S1,S2,... nor S, (one seed alone)
    if not count and parts[-1].strip() == "":
        parts.pop()
    try:
        values = tuple(int(s) for s in parts)  # an empty part (1,,2 or ,1) is no seed: refused here
    except ValueError:
        raise CctkError(f"--seeds takes a count N or seeds S1,S2,..., got {text!r}") from None
    if count:
        if values[0] < 1:
            raise CctkError(f"--seeds N needs N >= 1, got {values[0]}")
        if values[0] > MAX_FRESH_SEEDS:
            raise CctkError(
                f"--seeds {values[0]} would draw {values[0]} fresh seeds (at most {MAX_FRESH_SEEDS}); "
                f"for the one seed {values[0]} write --seeds {values[0]},"
            )
        return draw_seeds(values[0])
    check_seeds(values)
    if len(set(values)) != len(values):
        raise CctkError(f"--seeds repeats a seed: {text}")
    return values
