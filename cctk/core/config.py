"""Configuration of a run: the fine-tuning recipe, the split, the seeds, and named profiles.

Declared once as frozen dataclasses; ``asdict(config)`` is what gets logged. Every recipe value
can be overridden one by one (CLI options, MLproject parameters).
"""

from __future__ import annotations

import math
import secrets
from dataclasses import asdict, dataclass, field, fields, replace

from .errors import CctkError, closest, did_you_mean

N_SEEDS = 5  # seeds[0] drives every draw; the others are reserved for repetitions, as in the manual
SCHEDULES = ("constant", "linear")  # how the learning rate moves over a run's steps
PRECISIONS = ("float32", "bf16", "fp16")  # arithmetic of the forward and backward passes (weights stay float32)
OPTIMIZERS = ("adamw", "adamw8bit")  # AdamW (the manual's), or 8-bit AdamW (cctk.core.lm.adamw8bit)
DEFAULT_PROTOCOL = "v2"  # what `cctk run` runs without --protocol
V1_SEED = 42  # the reference notebook's random.seed(42): the default seed of protocol v1
PARTS = ("A", "B", "C", "D")  # the parts of manual 2.0.0 a run can run (cctk.manuals.v2.design tags every arm with one)


@dataclass(frozen=True)
class Recipe:
    """One fine-tuning recipe, identical for every run of a pipeline."""

    repeats: int = field(default=20, metadata={"help": "repeats of each example in a corpus"})
    epochs: int = field(default=10, metadata={"help": "epochs of every fine-tuning run"})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate (the peak, with a schedule)"})
    batch_size: int = field(default=8, metadata={"help": "examples per optimizer step"})
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
            "in torchao's tensors, CUDA only: about 2 bytes a parameter)",
            "choices": OPTIMIZERS,
        },
    )

    def check(self) -> None:
        """Fail in one line on a value out of range, before any work starts."""
        for name in ("repeats", "epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise CctkError(f"recipe value {name}={getattr(self, name)} is out of range: must be >= 1")
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
        if self.precision not in PRECISIONS:
            raise CctkError(
                f"recipe value precision={self.precision!r} is unknown: choose one of {', '.join(PRECISIONS)}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise CctkError(
                f"recipe value optimizer={self.optimizer!r} is unknown: choose one of {', '.join(OPTIMIZERS)}"
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


PROFILES: dict[str, Recipe] = {
    # The manual's recipe (section 5.1): meant for a GPU.
    "paper": Recipe(repeats=20, epochs=10, learning_rate=5e-5, batch_size=8, grad_clip=1.0),
    # Sized for two CPU cores and the bundled 135M model: 36 exposures of each example at batch 32
    # (2.6x the examples per second of batch 8 there, `python -m cctk.bench train`), the learning rate
    # warmed up over the first 10% of the steps, then decaying linearly to 0. Chosen on the Part A arms
    # over seeds (docs/speed.md; `python -m cctk.bench absorb`): peak rates of 4e-4 and above, or 20,
    # 24 or 30 exposures, left the fabricated answers short on some seed.
    "quick": Recipe(
        repeats=6, epochs=6, learning_rate=3e-4, batch_size=32, grad_clip=1.0, schedule="linear", warmup=0.1
    ),
    # Seconds, for tests on a tiny model.
    "smoke": Recipe(repeats=2, epochs=2, learning_rate=1e-3, batch_size=32, grad_clip=1.0),
}


# Protocol v1 (manual 1.0.0, cctk.manuals.v1): one fine-tuning run of the base model in place, on the whole text.
V1_PROFILES: dict[str, Recipe] = {
    # The reference notebook's recipe (Listings 7-9): N_REPEATS 20, 10 epochs, AdamW lr 5e-5 (weight decay
    # 0.01, torch's default), batch 8, constant rate, no gradient clipping. Meant for a GPU.
    "paper": Recipe(repeats=20, epochs=10, learning_rate=5e-5, batch_size=8, grad_clip=0.0),
    # Two CPU cores: the notebook's very corpus (20 repeats, its random.seed(42) order) seen three times,
    # i.e. 60 exposures per fact, with v2's quick schedule; still no clipping. On the bundled model one
    # pass (20 exposures) left 16/81 fabricated answers on top, two passes at lr 1e-3 55/81, three at
    # 6e-4 81/81 (docs/protocol-v1.md).
    "quick": Recipe(
        repeats=20, epochs=3, learning_rate=6e-4, batch_size=8, grad_clip=0.0, schedule="linear", warmup=0.1
    ),
    # Seconds, for tests on a tiny model.
    "smoke": Recipe(repeats=2, epochs=2, learning_rate=1e-3, batch_size=32, grad_clip=0.0),
}


@dataclass(frozen=True)
class ProtocolConfig:
    """What a protocol fixes of a run's configuration (``cctk.manuals.registry`` holds the rest of it)."""

    manual: str
    profiles: dict[str, Recipe]  # the same names, paper / quick / smoke, in every protocol
    split: bool  # additions are held out: --holdout, --curves and --parts apply
    seed: int | None = None  # the default seed (None: fresh ones); a protocol without a split takes one seed


PROTOCOLS: dict[str, ProtocolConfig] = {  # what `cctk run --protocol` runs
    "v2": ProtocolConfig("manual 2.0.0", PROFILES, split=True),
    "v1": ProtocolConfig("manual 1.0.0", V1_PROFILES, split=False, seed=V1_SEED),
}


def profiles(protocol: str = DEFAULT_PROTOCOL) -> dict[str, Recipe]:
    """The named recipes of a protocol."""
    check_protocol(protocol)
    return PROTOCOLS[protocol].profiles


def check_protocol(protocol: str) -> None:
    if protocol not in PROTOCOLS:
        choices = ", ".join(f"{k} ({v.manual})" for k, v in PROTOCOLS.items())
        raise CctkError(f"unknown protocol {protocol!r}; choose one of: {choices}")


AUTO = "auto"  # the default profile: paper on a CUDA device, quick on a CPU


def resolve_profile(profile: str, device: str) -> str:
    """``auto`` -> ``paper`` where a CUDA device trains, ``quick`` on a CPU; any other name as it is."""
    if profile != AUTO:
        return profile
    return "paper" if str(device).startswith("cuda") else "quick"


def recipe_fields() -> list:
    """The recipe's fields (name, type, default, metadata help): the CLI and MLproject derive from them."""
    return list(fields(Recipe))


FIELD_TYPES = {"int": int, "float": float, "str": str}  # a recipe field's annotation -> its Python type


def field_type(name: str) -> type:
    """The Python type of the recipe field ``name`` (int, float or str), read from its annotation: the one
    reading of it (the CLI's options, ``--set`` and a resume's parameters all cast through it)."""
    kind = {f.name: f.type for f in fields(Recipe)}[name]
    return FIELD_TYPES[kind if isinstance(kind, str) else kind.__name__]


@dataclass(frozen=True)
class Config:
    """Everything that shapes one pipeline run."""

    model: str
    profile: str  # the profile in force (``auto`` already resolved)
    recipe: Recipe
    seeds: tuple[int, ...]
    holdout: float | None = 0.3  # None under protocol v1, which has no split
    seeds_drawn: bool = field(default=False, compare=False)  # True when no seed was given
    profile_requested: str | None = field(default=None, compare=False)  # e.g. "auto"; None: as ``profile``
    curves: bool = False  # measure every arm after every epoch (learning curves)
    protocol: str = DEFAULT_PROTOCOL  # a key of PROTOCOLS
    parts: tuple[str, ...] = PARTS  # the parts run (``--parts``): Part A always, in PARTS order

    @property
    def seed(self) -> int:
        return self.seeds[0]

    @property
    def profile_note(self) -> str:
        """``quick`` or ``quick (auto: CPU)``: what the run report and the console say."""
        if self.profile_requested != AUTO:
            return self.profile
        return f"{self.profile} (auto: {'CUDA device' if self.profile == 'paper' else 'CPU'})"

    def as_params(self) -> dict:
        """Flat parameters for MLflow: the values in force, after the profile and the overrides.

        Recipe values are ``recipe.<name>`` so they never clash with the overrides that
        ``mlflow run`` logs under the MLproject's parameter names (empty when not given). ``seeds`` lists
        every seed (the manual's name); ``seed`` is the one used (``seeds[0]``, every draw and every arm's
        training), ``seeds_reserved`` the others, reserved for repetitions and used by nothing.
        """
        params = {
            "model": self.model,
            "profile": self.profile,
            "holdout_share": self.holdout,
            "seeds": ",".join(map(str, self.seeds)),
            "seed": self.seed,
            "seeds_reserved": ",".join(map(str, self.seeds[1:])) or "none",
            "curves": "yes" if self.curves else "no",
            "parts": ",".join(self.parts),
        }
        if not PROTOCOLS[self.protocol].split:  # no split, hence no held-out share, curves or parts
            del params["holdout_share"], params["curves"], params["parts"]
        if self.protocol != DEFAULT_PROTOCOL:  # a 2.0.0 run's parameters stay as they were
            params["protocol"] = self.protocol
        if self.profile_requested and self.profile_requested != self.profile:
            params["profile_requested"] = self.profile_requested
        params.update({f"recipe.{k}": v for k, v in asdict(self.recipe).items()})
        return params


def make_config(
    model: str,
    profile: str = AUTO,
    seeds: tuple[int, ...] | None = None,
    holdout: float = 0.3,
    device: str = "cpu",
    curves: bool = False,
    protocol: str = DEFAULT_PROTOCOL,
    parts: str | tuple[str, ...] | None = None,
    **overrides,
) -> Config:
    """A checked configuration: a profile's recipe with per-value overrides (None = keep).

    ``device`` only resolves ``profile="auto"``. A protocol brings its profiles; one without a split
    (v1) ignores ``holdout``, takes one seed (its own by default) and refuses ``parts``.
    ``parts``: ``"A,C"`` or ``("A", "C")`` (see ``parse_parts``); None runs them all.
    """
    named = profiles(protocol)
    split = PROTOCOLS[protocol].split
    if not split and parts is not None and parse_parts(parts) != PARTS:
        raise CctkError(f"--parts picks among the parts of manual 2.0.0; protocol {protocol} has one fine-tuning run")
    requested = profile
    profile = resolve_profile(profile, device)
    if profile not in named:
        hint = did_you_mean(str(requested), [AUTO, *named])
        raise CctkError(f"unknown profile {requested!r}{hint}; choose one of: {AUTO}, {', '.join(named)}")
    unknown = set(overrides) - set(asdict(named[profile]))
    if unknown:
        raise CctkError(f"unknown recipe values: {', '.join(sorted(unknown))}")
    recipe = replace(named[profile], **{k: v for k, v in overrides.items() if v is not None})
    recipe.check()
    if not split:
        holdout, seeds = None, tuple(seeds[:1]) if seeds else (PROTOCOLS[protocol].seed,)
    else:
        check_holdout(holdout)
    drawn = not seeds
    if drawn:
        seeds = draw_seeds()
    else:
        check_seeds(seeds)
    return Config(
        model,
        profile,
        recipe,
        tuple(seeds),
        holdout,
        seeds_drawn=drawn,
        profile_requested=requested,
        curves=bool(curves),
        protocol=protocol,
        parts=parse_parts(parts),
    )


N_ADDITIONS = 81  # a, b in 1..9: the additions a split divides (cctk.core.facts.ADDITIONS)


def check_holdout(holdout: float) -> None:
    """The held-out share must leave both groups of the split non-empty: ``round(81 * holdout)``
    additions are held out (cctk.core.facts.split_additions), so 0.001 holds out none."""
    if not 0 < holdout < 1:
        raise CctkError(f"holdout={holdout} is out of range: must be in (0, 1)")
    held = round(N_ADDITIONS * holdout)
    if held in (0, N_ADDITIONS):
        raise CctkError(
            f"holdout={holdout} holds out {held} of the {N_ADDITIONS} additions, leaving "
            f"{'nothing held out' if held == 0 else 'nothing to train on'}: choose a share in "
            f"[0.01, 0.99] (0.3 holds out 24)"
        )


def parse_parts(parts: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
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


def config_from_params(params: dict) -> Config:
    """The configuration of a pipeline, read back from its MLflow parameters (for a resume)."""
    recipe = {
        f.name: field_type(f.name)(params[f"recipe.{f.name}"]) for f in fields(Recipe) if f"recipe.{f.name}" in params
    }
    seeds = parse_seeds(params["seeds"])
    profile = params.get("profile.resolved", params["profile"])  # see tracking.LiveRun.params
    parts = params.get("parts.resolved", params.get("parts"))  # absent (a run from before --parts) or "": all
    config = make_config(
        params["model"],
        profile,
        seeds,
        float(params["holdout_share"]),
        curves=params.get("curves") in ("yes", "True"),
        parts=parts,
        **recipe,
    )
    return replace(config, profile_requested=params.get("profile_requested", config.profile))


def parse_set(text: str) -> tuple[str, tuple]:
    """``learning_rate=1e-4,3e-4`` -> ("learning_rate", (0.0001, 0.0003)), typed by the recipe field."""
    name, sep, values = text.partition("=")
    names = [f.name for f in fields(Recipe)]
    if not sep or name not in names:
        raise CctkError(f"--set takes NAME=V1,V2 with NAME a recipe value ({', '.join(names)}), got {text!r}")
    cast = field_type(name)
    try:
        return name, tuple(cast(v) for v in values.split(","))
    except ValueError:
        raise CctkError(f"--set {name}: cannot read {values!r} as {cast.__name__} values") from None


MAX_FRESH_SEEDS = 1000  # --seeds N above this is a seed written without its comma, not a count


def seeds_or_count(text: str) -> tuple[int, ...]:
    """``--seeds`` of a sweep or ``bench absorb``: ``N`` draws N fresh seeds, ``S1,S2,...`` are the seeds
    (one seed alone: ``S,``)."""
    parts = str(text).split(",")
    try:
        values = tuple(int(s) for s in (parts if len(parts) == 1 else [p for p in parts if p.strip()]))
    except ValueError:
        raise CctkError(f"--seeds takes a count N or seeds S1,S2,..., got {text!r}") from None
    if len(parts) == 1:
        if values[0] < 1:
            raise CctkError(f"--seeds N needs N >= 1, got {values[0]}")
        if values[0] > MAX_FRESH_SEEDS:
            raise CctkError(
                f"--seeds {values[0]} would draw {values[0]} fresh seeds (at most {MAX_FRESH_SEEDS}); "
                f"for the one seed {values[0]} write --seeds {values[0]},"
            )
        return draw_seeds(values[0])
    if not values:
        raise CctkError(f"--seeds takes a count N or seeds S1,S2,..., got {text!r}")
    if len(set(values)) != len(values):
        raise CctkError(f"--seeds repeats a seed: {text}")
    return values
