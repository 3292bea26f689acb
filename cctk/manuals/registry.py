"""What a manual is, and the one list of them.

A manual is one class in its own folder (``cctk.manuals.v2``, ``cctk.manuals.v1``) that implements ``Protocol``:
everything a run asks of it, from its options and profiles to its draws, corpora, tables, figures, design record,
MLflow parameters, session upgrade, reproduce command and comparison across runs. One orchestration
(``cctk.pipeline.stages``), one session folder (``cctk.store.session``) and one writer (``cctk.outputs``) serve every
manual through it. ``HOMES`` lists the manuals by name (``module:value``, imported when a name is resolved, as a
plugin is: no arrow points from here up to a manual); ``get`` is the one resolver of a name, called only at the
edges where a name comes in (the library's entry, run_info.json's reader, a resume's MLflow tags); ``DEFAULT`` is
what ``cctk run`` runs without ``--protocol``.

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar
from typing import Protocol as TypingProtocol

import pandas as pd

from ..core.config import (
    AUTO,
    Config,
    NoOptions,
    Recipe,
    parse_seeds,
    recipe_of,
    recipe_overrides,
    seeds_of,
)
from ..core.errors import CctkError
from ..core.facts import Scoring
from ..core.labels import Vocabulary
from ..core.lm.record import TrainRecord
from ..core.records import Design

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from transformers import PreTrainedTokenizerBase

    from ..figures.spec import Spec


class Logged(TypingProtocol):
    """A typed record of figures logged to an MLflow run as its metrics (by their MLflow names)."""

    def metrics(self) -> dict[str, float]: ...


class ManualOptions(TypingProtocol):
    """What a manual's options record does besides holding its fields (a frozen dataclass; each field's metadata is
    its command-line option: ``option``, its help; ``flag``: a switch; ``metavar``)."""

    def params(self) -> dict[str, str | float]:
        """Its MLflow parameters."""
        ...

    def words(self) -> list[str]:
        """Its options on a ``cctk run`` line that runs the same cell again (those that differ from the defaults)."""
        ...


D_co = TypeVar("D_co", covariant=True)


class Results(TypingProtocol[D_co]):
    """What the pipeline, the session and the outputs read of any manual's results."""

    @property
    def draws(self) -> D_co: ...

    @property
    def measurements(self) -> dict[str, pd.DataFrame]: ...  # model key -> measurement table

    @property
    def training(self) -> dict[str, TrainRecord]: ...  # model key -> its fine-tuning run


RecipeValue = int | float | str  # a value of the recipe (``Recipe``'s fields), as a run logged it
Row = tuple[list[int], list[int]]  # a training row: its input ids and labels (-100: not learned)
OptionsT = TypeVar("OptionsT", bound=ManualOptions)  # its options (2.0.0's StudyOptions; NoOptions: none)
D = TypeVar("D")  # what it draws before training (2.0.0's StudyInputs, 1.0.0's Draws)
R = TypeVar("R", bound=Results[Any])  # its results (2.0.0's StudyResults, 1.0.0's ComparisonResults)
H = TypeVar("H", bound=Logged)  # its headline (the parent run's metrics)
S = TypeVar("S", bound=Design[Any])  # its design record in run_info.json (2.0.0's StudyDesign)


@dataclass(frozen=True)
class Measured:
    """A measured model: the pretrained weights (no ``parent``), or a model fine-tuned from ``parent``."""

    key: str
    parent: str | None = None
    in_place: bool = False  # trained on its parent's very weights (1.0.0), not on a fresh copy of them
    stream: str | None = None  # the name its training draws are seeded from, when it is not ``key``


@dataclass(frozen=True)
class Report:
    """The tables and sections of a run's outputs, in plain language (its manual's labels)."""

    tables: dict[str, str]  # tableNN -> title (its folder name)
    captions: dict[str, str]
    sections: dict[str, str]  # report section key -> heading
    table_part: dict[str, str]  # tableNN -> its section
    about: dict[str, str]  # figure kind -> what it shows
    runs_table: str | None = None  # its table of fine-tuning runs (None: the reports list them from the run record)
    label_prefix: str = ""  # before a table's name in its LaTeX label
    paper_captions: dict[str, str] | None = None  # a paper's table captions (None: built from titles and captions)
    notes: dict[str, str] = field(default_factory=dict)  # section -> a paragraph under its heading
    loss: str = "mean over the answer tokens (prompt masked)"  # what its training loss is taken over


@dataclass(frozen=True)
class Absorption:
    """A model that must take up its corpus: its hits on its own target, of ``n``, against the ``needed`` ones."""

    key: str
    hits: int
    needed: int
    n: int

    @property
    def absorbed(self) -> bool:
        return self.hits >= self.needed


@dataclass(frozen=True)
class Option:
    """One command-line option of a manual (``cctk run --<name>``), from a field of its options record."""

    name: str  # the field's name (``--holdout``: ``holdout``)
    help: str
    flag: bool = False  # a switch
    kind: type = str  # what the command line reads it as (a switch: bool)
    metavar: str | None = None


@dataclass(frozen=True)
class PooledRun(Generic[R]):
    """One finished pipeline: its MLflow run id, base model key, seed, results (its manual's), its tables, the recipe
    it logged and its manual (whose comparison it is pooled into)."""

    run_id: str
    model: str
    seed: int
    protocol: Protocol[Any, Any, Any, Any, Any]
    results: R
    tables: dict[str, pd.DataFrame]
    recipe: dict[str, RecipeValue] = field(default_factory=dict)  # name -> value in force, as the run logged it
    parts: tuple[str, ...] = ()  # the parts of its manual it ran (none: a manual without parts)

    @classmethod
    def of(
        cls,
        run_id: str,
        model: str,
        seed: int,
        protocol: Protocol[Any, Any, R, Any, Any],
        results: R,
        recipe: dict[str, RecipeValue] | None = None,
        tables: dict[str, pd.DataFrame] | None = None,
        parts: tuple[str, ...] = (),
    ) -> PooledRun[R]:
        """A run from its results (its tables computed from them, under its manual, unless given)."""
        return cls(
            run_id,
            model,
            seed,
            protocol,
            results,
            protocol.compute_tables(results) if tables is None else tables,
            dict(recipe or {}),
            parts,
        )


@dataclass(frozen=True)
class Comparison:
    """What a manual computes of its runs across seeds: tables (by name, each with its caption), figures (by name,
    each with its title) and findings in words (sentence, verdict), whose table (``lead``) opens the page."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    findings: tuple[tuple[str, str], ...] = ()
    lead: str | None = None  # the table of the findings (None: none)
    note: str = ""  # under the findings, on the page


class Protocol(ABC, Generic[OptionsT, D, R, H, S]):
    """A manual: what a run of it takes (``OptionsT``, its options), draws (``D``), computes (``R``, its results),
    logs as its headline (``H``) and records of its design (``S``). One instance per manual, held by its module
    (``V2``, ``V1``); it holds no state, so it pickles as itself (a Ray worker gets the same manual back)."""

    name: ClassVar[str]  # the cctk.protocol tag, run_info.json's "protocol", ``cctk run --protocol``
    version: ClassVar[str]  # of its manual, in report titles
    about: ClassVar[str]  # what it runs, in a few words (``cctk run --help``)
    profiles: ClassVar[Mapping[str, Recipe]]  # its named recipes: paper, quick, smoke
    options_type: ClassVar[type[Any]] = NoOptions  # the record of its options (``OptionsT``)
    design_type: ClassVar[type[Design[Any]]]  # the record of its design (``S``)
    scoring: ClassVar[Scoring]
    report: ClassVar[Report]
    seed_roles: ClassVar[Mapping[str, str]]  # "seeds[0]" (and "seeds[1:]") -> what it controls
    constants: ClassVar[Mapping[str, str]]  # the parent run's parameters besides the configuration's
    vocabulary: ClassVar[Vocabulary]  # its plain names by kind and key, and former ones: keys back from labels on disk
    main_sequence: ClassVar[tuple[str, ...]]  # in colour on the loss charts
    seed: ClassVar[int | None] = None  # its seed when none is given (None: fresh ones); one seed a run if set
    renamed: ClassVar[Mapping[str, str]] = {}  # model keys of sessions written before -> today's
    resumable: ClassVar[bool] = False  # ``cctk run --resume`` continues its runs
    curve_columns: ClassVar[tuple[str, ...]] = ()  # curves.csv's columns, where it measures learning curves

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"<manual {self.version}: protocol {self.name}>"

    # --- What a run takes: its configuration and options. ---

    @property
    def manual(self) -> str:
        return f"manual {self.version}"

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT

    @property
    def title(self) -> str:
        """What the console calls a run: ``pipeline``, or ``protocol v1``."""
        return "pipeline" if self.is_default else f"protocol {self.name}"

    @classmethod
    def command_options(cls) -> tuple[Option, ...]:
        """Its options on the command line, from its options record's fields."""
        assert is_dataclass(cls.options_type)
        return tuple(
            Option(
                f.name, f.metadata["option"], bool(f.metadata.get("flag")), _kind(f.default), f.metadata.get("metavar")
            )
            for f in fields(cls.options_type)
        )

    def options(self, **given: Any) -> OptionsT:
        """Its options from what was given by name (None: the default), checked: a one-line ``CctkError`` else. A
        manual without options (``NoOptions``) refuses any."""
        unknown = sorted(name for name, value in given.items() if value is not None)
        if unknown:
            raise CctkError(f"{self.manual} (protocol {self.name}) takes no option {', '.join(unknown)}")
        options: OptionsT = self.options_type()
        return options

    def options_from_params(self, params: Mapping[str, str]) -> OptionsT:
        """Its options, read back from the parameters a pipeline logged (a resume); a manual without options: none."""
        return self.options()

    def configure(
        self,
        model: str,
        profile: str = AUTO,
        seeds: tuple[int, ...] | None = None,
        device: str = "cpu",
        **values: Any,
    ) -> Config[OptionsT]:
        """A checked configuration of a run: one of its profiles (``auto`` resolved for ``device``) with per-value
        overrides of the recipe (None = keep), its seeds (its own by default, one alone where it has one), and its
        options; ``values`` are recipe values and options by name."""
        names = {f.name for f in fields(Recipe)}
        resolved, recipe = recipe_of(self.profiles, profile, device, **{k: v for k, v in values.items() if k in names})
        options = self.options(**{k: v for k, v in values.items() if k not in names})
        one = (self.seed,) if self.seed is not None else None
        picked, drawn = seeds_of(tuple(seeds[:1]) if seeds and one else seeds, one)
        return Config(model, resolved, recipe, picked, self.name, options, seeds_drawn=drawn, profile_requested=profile)

    def config_from_params(self, params: Mapping[str, str]) -> Config[OptionsT]:
        """The configuration of a pipeline of this manual, read back from its MLflow parameters (a resume)."""
        profile = params.get("profile.resolved", params["profile"])  # see tracking.LiveRun.params
        config = self.configure(params["model"], profile, parse_seeds(params["seeds"]), **recipe_overrides(params))
        return replace(
            config,
            options=self.options_from_params(params),
            profile_requested=params.get("profile_requested", config.profile),
        )

    def params(self, config: Config[OptionsT]) -> dict[str, str | int | float]:
        """The parent run's MLflow parameters: the configuration's, its options', its name (a run of the default
        manual logs none, as it always has) and its constants."""
        named = {} if self.is_default else {"protocol": self.name}
        return {**config.as_params(), **config.options.params(), **named, **self.constants}

    def reproduce(self, config: Config[OptionsT]) -> str:
        """``cctk run ...`` that runs the same cell again: model, profile in force, protocol, every seed, the recipe
        values that differ from the profile's, and its options that differ from their defaults."""
        words = ["cctk", "run", "--model", config.model, "--profile", config.profile]
        if not self.is_default:
            words += ["--protocol", self.name]
        words += ["--seed", self._seeds(config)]
        base = self.profiles[config.profile]
        for f in fields(config.recipe):
            value = getattr(config.recipe, f.name)
            if value != getattr(base, f.name):
                words += [f"--{f.name.replace('_', '-')}", str(value)]
        return shlex.join(words + config.options.words())

    def _seeds(self, config: Config[OptionsT]) -> str:
        """The first seed alone where the others are the ones derived from it (or it takes one), else all of them."""
        first = str(config.seeds[0])
        if self.seed is not None or parse_seeds(first) == tuple(config.seeds):
            return first
        return ",".join(map(str, config.seeds))

    def seeds_line(self, config: Config[OptionsT]) -> str:
        """The console's line on the profile and the seeds: how to repeat the run."""
        seeds = ",".join(map(str, config.seeds))
        fresh = f"  (drawn fresh: pass --seed {seeds} to repeat this run)" if config.seeds_drawn else ""
        return f"profile {config.profile_note}; seeds {seeds}{fresh}"

    def parts(self, options: OptionsT) -> tuple[str, ...]:
        """The parts of it a run with ``options`` runs (none: a manual without parts)."""
        return ()

    def setup_lines(self, config: Config[OptionsT]) -> list[str]:
        """What the console says of a run before it starts, after its session folder: its seeds, and what else."""
        return [self.seeds_line(config)]

    # --- Its models and what it draws. ---

    @abstractmethod
    def models(self, options: OptionsT) -> tuple[Measured, ...]:
        """The models a run with ``options`` measures, parents before their children."""

    def every_model(self) -> tuple[Measured, ...]:
        """Every model a run of it can measure (its default options'): the files a session may hold."""
        return self.models(self.options())

    def trained(self, options: OptionsT) -> tuple[Measured, ...]:
        return tuple(m for m in self.models(options) if m.parent is not None)

    def model_keys(self, options: OptionsT | None = None) -> tuple[str, ...]:
        return tuple(m.key for m in (self.every_model() if options is None else self.models(options)))

    @abstractmethod
    def model_name(self, key: str) -> str:
        """A model key's plain name: its files, runs and table rows (its labels)."""

    @abstractmethod
    def draw(self, config: Config[OptionsT]) -> D:
        """Everything drawn before training."""

    @abstractmethod
    def draws_table(self, draws: D) -> pd.DataFrame:
        """targets.csv."""

    def corpus_texts(self, draws: D) -> tuple[str, ...]:
        """corpus.txt, where it has one corpus (none where the corpora are per arm)."""
        return ()

    @abstractmethod
    def rows(self, draws: D, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        """The tokenized training rows of model ``key``."""

    @abstractmethod
    def corpus_note(self, key: str) -> str:
        """A fine-tuned model's "corpus" parameter."""

    def dataset(self, draws: D, key: str) -> tuple[str, pd.DataFrame] | None:
        """Model ``key``'s MLflow dataset: (name, table); None: it logs none."""
        return None

    @abstractmethod
    def describe(self, draws: D, key: str) -> str:
        """One line on a measured model (its run's description)."""

    @abstractmethod
    def run_note(self, config: Config[OptionsT]) -> str:
        """One line on the run (the parent run's description)."""

    # --- Its results, tables, headline and figures. ---

    @abstractmethod
    def new_results(
        self,
        draws: D,
        config: Config[OptionsT],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
        curves: pd.DataFrame | None = None,
    ) -> R:
        """Its results from the draws, the measurements and fine-tuning runs so far and the learning curves."""

    @abstractmethod
    def compute_tables(self, results: R) -> dict[str, pd.DataFrame]: ...

    @abstractmethod
    def headline(self, results: R) -> H:
        """The parent run's figures (its metrics)."""

    @abstractmethod
    def model_metrics(self, results: R, key: str) -> Logged:
        """A measured model's readings (its run's metrics)."""

    @abstractmethod
    def summary(self, results: R, head: H) -> list[str]:
        """What the console says at the end."""

    @abstractmethod
    def figures(self, results: R, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        """Its figures, in order."""

    def model_figures(self, results: R, key: str) -> list[Spec]:
        """The figures of one model, drawn as soon as it is measured."""
        return []

    def absorption(self, results: R) -> tuple[Absorption, ...]:
        """Its models that must absorb their corpora before the rest reads them, each against its threshold
        (none by default)."""
        return ()

    def curves(self, config: Config[OptionsT]) -> bool:
        """Whether the run measures every arm after every epoch (learning curves)."""
        return False

    def curve_rows(self, draws: D, key: str, epoch: int, table: pd.DataFrame) -> list[dict[str, Any]]:
        """One point of an arm's learning curve (curves.csv's rows, ``curve_columns``)."""
        return []

    def compare(self, runs: Sequence[PooledRun[R]]) -> Comparison:
        """Its tables and figures across finished runs (``cctk compare``); none by default."""
        return Comparison()

    # --- What run_info.json records of it, and the reports say. ---

    @abstractmethod
    def design(self, results: R, config: Config[OptionsT]) -> S:
        """run_info.json's record of its own design."""

    def upgrade(self, data: dict[str, Any]) -> dict[str, Any]:
        """run_info.json as an older cctk wrote it, with what that code meant of its design filled in."""
        return data

    def design_rows(self, design: S) -> list[tuple[str, str]]:
        """What the run report says of its design under the model and recipe (label, value)."""
        return []

    def measurement_rows(self, design: S) -> list[tuple[str, str]]:
        """What the HTML report says of its design under the measurement (label, value)."""
        return []

    def warnings(self, design: S) -> tuple[str, ...]:
        """What the reports warn of (a model that did not absorb its corpus)."""
        return ()

    def ran(self, design: S) -> str | None:
        """One sentence on what a run of some of its parts ran (None: it ran the whole manual)."""
        return None


def _kind(default: object) -> type:
    """What the command line reads an option with this default as: a switch, a number, or text."""
    return bool if isinstance(default, bool) else float if isinstance(default, float) else str


# The one list of manuals: where each lives (``module:value``), by its name. A manual is added with one line here.
HOMES: dict[str, str] = {
    "v2": "cctk.manuals.v2.manual:V2",
    "v1": "cctk.manuals.v1.manual:V1",
}
DEFAULT = "v2"  # what ``cctk run`` runs without --protocol, and a session from before protocols


def names() -> tuple[str, ...]:
    """Every manual's name, in ``HOMES`` order (``cctk run --protocol``'s choices)."""
    return tuple(HOMES)


def get(name: str | None) -> Protocol[Any, Any, Any, Any, Any]:
    """The manual of a name; the default for None (a session from before protocols). The one resolver: called
    only where a name comes in (tests/manuals/test_protocol_value.py names the edges)."""
    name = name or DEFAULT
    if name not in HOMES:
        raise CctkError(f"unknown protocol {name!r}; choose one of: {', '.join(_choices())}")
    module, value = HOMES[name].split(":")
    manual: Protocol[Any, Any, Any, Any, Any] = getattr(import_module(module), value)
    return manual


def default() -> Protocol[Any, Any, Any, Any, Any]:
    """The manual ``cctk run`` runs without --protocol (and a sweep's cells, and the benchmarks', run)."""
    return get(DEFAULT)


def _choices() -> list[str]:
    return [f"{name} ({get(name).manual})" for name in HOMES]


def every() -> tuple[Protocol[Any, Any, Any, Any, Any], ...]:
    """Every manual, in ``HOMES`` order: the command line reads their options and profiles."""
    return tuple(get(name) for name in HOMES)


def make_config(
    model: str, profile: str = AUTO, seeds: tuple[int, ...] | None = None, *, protocol: str = DEFAULT, **values: Any
) -> Config[Any]:
    """A checked configuration of a run of the manual named ``protocol`` (the library's entry): recipe values,
    ``device`` and its options by name (``Protocol.configure``)."""
    return get(protocol).configure(model, profile, seeds, **values)


__all__ = ["DEFAULT", "HOMES", "Config", "Measured", "NoOptions", "Option", "Protocol", "Report", "get", "make_config"]
