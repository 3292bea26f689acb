"""What a manual is: a small contract.

A manual (``cctk.manuals.v2``, ``cctk.manuals.v1``, or a package of your own registered by an entry point, see
``cctk.manuals.registry``) is one ``Manual``: a frozen ``ManualSpec`` of what it is (its name, profiles, scoring,
words, tables and sections) and ten methods about its science: the models it measures, what it draws, each
arm's training rows, its results and tables, the headline and each model's readings, its figures, the record of
its design and a line on each measured model. What only some manuals do is an optional capability, a mixin the
pipeline asks for with ``isinstance``: ``Resumable``, ``Parts``, ``Curves``, ``Comparable``, ``Absorbs``,
``ModelFigures``, ``Datasets``, ``OneCorpus``. How a run of any manual is configured, logged and announced is
plain functions (``cctk.manuals.configure``, ``cctk.manuals.words``), the same for every manual.

The records a manual speaks in are typed: its options (a frozen dataclass, ``ManualOptions``), its draws
(``Draws``), its results (``Results``), its headline (``Headline``: metrics and the console's closing lines) and
its design record (``cctk.core.records.Design``: what run_info.json and the reports say of it).

Torch-free and matplotlib-free at import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, TypeVar

import pandas as pd

from ..core.config import Config, Recipe
from ..core.facts import ADDITIONS, Scoring
from ..core.labels import BASE_MODEL, TABLE_HEADERS, Vocabulary
from ..core.lm.record import TrainRecord
from ..core.records import Design

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from transformers import PreTrainedTokenizerBase

    from ..figures.spec import Spec

Row = tuple[list[int], list[int]]  # a training row: its input ids and labels (-100: not learned)
RecipeValue = int | float | str  # a value of the recipe (``Recipe``'s fields), as a run logged it


class ManualOptions(Protocol):
    """A manual's options besides the shared configuration: a frozen dataclass whose fields' metadata are their
    command-line options (``option``: the help; ``flag``: a switch; ``metavar``), read and checked by ``of``."""

    @classmethod
    def of(cls, **given: Any) -> Self:
        """The options from what was given by name (None: the default), checked: a one-line ``CctkError`` else."""
        ...

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> Self:
        """The options read back from the parameters a pipeline logged (a resume)."""
        ...

    def params(self) -> dict[str, str | float]:
        """Its MLflow parameters."""
        ...

    def words(self) -> list[str]:
        """Its options on a ``cctk run`` line that runs the same cell again (those that differ from the defaults)."""
        ...


class Logged(Protocol):
    """A typed record of figures logged to an MLflow run as its metrics (by their MLflow names)."""

    def metrics(self) -> dict[str, float]: ...


class Headline(Logged, Protocol):
    """A run's headline: the parent run's metrics, and what the console says of them at the end."""

    def lines(self) -> list[str]: ...


class Draws(Protocol):
    """What a manual draws before training: seeded by ``seed``, on file as targets.csv (``table``)."""

    @property
    def seed(self) -> int: ...

    def table(self) -> pd.DataFrame: ...


D_co = TypeVar("D_co", covariant=True)


class Results(Protocol[D_co]):
    """What the pipeline, the session and the outputs read of any manual's results."""

    @property
    def draws(self) -> D_co: ...

    @property
    def measurements(self) -> dict[str, pd.DataFrame]: ...  # model key -> measurement table

    @property
    def training(self) -> dict[str, TrainRecord]: ...  # model key -> its fine-tuning run


OptionsT = TypeVar("OptionsT", bound=ManualOptions)  # its options (2.0.0's StudyOptions; NoOptions: none)
D = TypeVar("D", bound=Draws)  # what it draws (2.0.0's StudyInputs, 1.0.0's Draws)
R = TypeVar("R", bound=Results[Any])  # its results (2.0.0's StudyResults, 1.0.0's ComparisonResults)


@dataclass(frozen=True)
class Measured:
    """A measured model: the pretrained weights (no ``parent``), or a model fine-tuned from ``parent`` on
    ``corpus`` (its run's "corpus" parameter, in a few words)."""

    key: str
    parent: str | None = None
    corpus: str = ""
    in_place: bool = False  # trained on its parent's very weights (1.0.0), not on a fresh copy of them
    stream: str | None = None  # the name its training draws are seeded from, when it is not ``key``


@dataclass(frozen=True)
class TableSpec:
    """One table of a manual: ``key`` (``table01``), its plain ``title`` (its folder and file names), its caption,
    the report ``section`` it sits in, and its caption in a paper (None: the title and the caption)."""

    key: str
    title: str
    caption: str
    section: str
    paper_caption: str | None = None

    @classmethod
    def every(
        cls,
        titles: Mapping[str, str],
        captions: Mapping[str, str],
        sections: Mapping[str, str],
        paper_captions: Mapping[str, str | None],
    ) -> tuple[TableSpec, ...]:
        """A manual's tables in the order of ``titles`` (key -> title), each with its caption, section and paper
        caption by key."""
        return tuple(cls(k, t, captions[k], sections[k], paper_captions[k]) for k, t in titles.items())


@dataclass(frozen=True)
class ManualSpec:
    """What a manual is, as data: every value a run, its reports and the command line read of it."""

    name: str  # the cctk.protocol tag, run_info.json's "protocol", ``cctk run --protocol``
    version: str  # of its manual, in report titles
    about: str  # what it runs, in a few words (``cctk run --help``)
    profiles: Mapping[str, Recipe]  # its named recipes: paper, quick, smoke
    scoring: Scoring  # its candidates, answer text and index
    vocabulary: Vocabulary  # its plain names by kind and key, and former ones: keys back from labels on disk
    tables: tuple[TableSpec, ...]
    sections: Mapping[str, str]  # report section key -> heading, in order
    figure_about: Mapping[str, str]  # figure kind -> what it shows (report.html)
    paper_figure_about: Mapping[str, str]  # figure kind -> what it shows in a paper's caption (its reading after)
    headers: Mapping[str, str]  # its tables' own columns -> their headers in a paper (cctk's: core.labels)
    seed_roles: Mapping[str, str]  # "seeds[0]" (and "seeds[1:]") -> what it controls
    design_type: type[Design[Any]]  # the record of its design in run_info.json
    options_type: type[ManualOptions]  # the record of its options
    constants: Mapping[str, str] = field(default_factory=dict)  # the parent run's parameters besides the config's
    main_sequence: tuple[str, ...] = ()  # model keys in colour on the loss charts
    seed: int | None = None  # its seed when none is given (None: fresh ones); one seed a run if set
    seed_note: str = ""  # after the seed on the console, where it means more than cctk's seeds do
    runs_table: str | None = None  # its table of fine-tuning runs (None: the reports list them from the record)
    label_prefix: str = ""  # before a table's name in its LaTeX label
    notes: Mapping[str, str] = field(default_factory=dict)  # section -> a paragraph under its heading
    loss: str = "mean over the answer tokens (prompt masked)"  # what its training loss is taken over
    renamed: Mapping[str, str] = field(default_factory=dict)  # model keys of sessions written before -> today's
    # an arm's distinct training rows at most (each of the 81 additions once, with the one answer its corpus gives
    # it); each comes ``repeats`` times at most: the memory plan bounds a batch by them (``most_rows``)
    distinct_rows: int = len(ADDITIONS)

    def most_rows(self, recipe: Recipe) -> int:
        """An arm's training rows at most under ``recipe``: a batch holds no more."""
        return self.distinct_rows * recipe.repeats

    @property
    def label(self) -> str:
        """``manual 2.0.0``."""
        return f"manual {self.version}"

    def model_name(self, key: str) -> str:
        """A model key's plain name: its files, runs and table rows."""
        return self.vocabulary.name("model", key)

    def table(self, key: str) -> TableSpec:
        return next(t for t in self.tables if t.key == key)

    @property
    def column_headers(self) -> dict[str, str]:
        """Every column of its tables -> its header in a paper and report.html: cctk's shared ones, then its own."""
        return {**TABLE_HEADERS, **self.headers}

    @property
    def table_captions(self) -> dict[str, str]:
        """Each table's caption in LaTeX (a paper, a session's tables/*.tex), in the words of ``column_headers``:
        its ``paper_caption``, else its title and report caption."""
        return {t.key: t.paper_caption or f"{t.title[0].upper()}{t.title[1:]}. {t.caption}" for t in self.tables}

    @property
    def titles(self) -> dict[str, str]:
        """tableNN -> title, in order."""
        return {t.key: t.title for t in self.tables}


class Manual(ABC, Generic[OptionsT, D, R]):
    """A manual: its ``spec`` and what a run of it takes (``OptionsT``), draws (``D``) and computes (``R``). One
    instance per manual, held by its module (``V2``, ``V1``); it holds no state, so it pickles as itself (a Ray
    worker gets the same manual back)."""

    spec: ClassVar[ManualSpec]

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return f"<{self.spec.label}: protocol {self.spec.name}>"

    @abstractmethod
    def models(self, options: OptionsT) -> tuple[Measured, ...]:
        """The models a run with ``options`` measures, parents before their children."""

    @abstractmethod
    def draw(self, config: Config[OptionsT]) -> D:
        """Everything drawn before training."""

    @abstractmethod
    def rows(self, draws: D, key: str, recipe: Recipe, tokenizer: PreTrainedTokenizerBase) -> list[Row]:
        """The tokenized training rows of model ``key``: at most ``spec.distinct_rows`` distinct ones, each at most
        ``recipe.repeats`` times."""

    @abstractmethod
    def results(
        self,
        draws: D,
        config: Config[OptionsT],
        measurements: Mapping[str, pd.DataFrame] | None = None,
        training: Mapping[str, TrainRecord] | None = None,
    ) -> R:
        """Its results from the draws and the measurements and fine-tuning runs so far."""

    @abstractmethod
    def tables(self, results: R) -> dict[str, pd.DataFrame]:
        """Its tables, by key, computed from the measurement tables."""

    @abstractmethod
    def headline(self, results: R) -> Headline:
        """The parent run's figures (its metrics) and the console's closing lines."""

    @abstractmethod
    def readings(self, results: R, key: str) -> Logged:
        """A measured model's readings (its run's metrics)."""

    @abstractmethod
    def figures(self, results: R, tables: Mapping[str, pd.DataFrame], model_label: str) -> list[Spec]:
        """Its figures, in order."""

    @abstractmethod
    def design(self, results: R, config: Config[OptionsT]) -> Design[OptionsT]:
        """run_info.json's record of its own design."""

    def describe(self, draws: D, key: str) -> str:
        """One line on a measured model (its run's description)."""
        model = next(m for m in every_model(self) if m.key == key)
        if model.parent is None:
            return f"{BASE_MODEL}: the pretrained weights, measured before any fine-tuning"
        return f"{self.spec.model_name(key)}: fine-tuned from {self.spec.model_name(model.parent)} on {model.corpus}"


AnyManual = Manual[Any, Any, Any]


# --- What a comparison across runs reads and gives (``Comparable``; grouped by ``cctk.manuals.pooled``). ---


@dataclass(frozen=True)
class PooledRun(Generic[R]):
    """One finished pipeline: its MLflow run id, base model key, seed, manual, results (its manual's), tables, the
    recipe it logged and the parts it ran."""

    run_id: str
    model: str
    seed: int
    manual: AnyManual
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
        manual: AnyManual,
        results: R,
        recipe: dict[str, RecipeValue] | None = None,
        tables: dict[str, pd.DataFrame] | None = None,
        parts: tuple[str, ...] = (),
    ) -> PooledRun[R]:
        """A run from its results (its tables computed from them, under its manual, unless given)."""
        tables = manual.tables(results) if tables is None else tables
        return cls(run_id, model, seed, manual, results, tables, dict(recipe or {}), parts)


@dataclass(frozen=True)
class Comparison:
    """What a manual computes of its runs across seeds: tables (by name, each with its caption and title), figures
    (by name, each with its title) and findings in words (sentence, verdict), whose table (``lead``) opens the page."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    figures: dict[str, Figure] = field(default_factory=dict)
    titles: dict[str, str] = field(default_factory=dict)
    findings: tuple[tuple[str, str], ...] = ()
    lead: str | None = None  # the table of the findings (None: none)
    note: str = ""  # under the findings, on the page
    table_titles: dict[str, str] = field(default_factory=dict)  # a table's heading on the page (else its name)


# --- Optional capabilities: what only some manuals do. ---


class Resumable:
    """``cctk run --resume`` continues its runs: finished arms are taken from MLflow, parents from checkpoints
    (its options are read back from the logged parameters, ``ManualOptions.from_params``)."""


class Parts(ABC, Generic[OptionsT]):
    """A run runs some of its parts (``--parts``); the others' tables and figures are absent."""

    @abstractmethod
    def parts(self, options: OptionsT) -> tuple[str, ...]:
        """The parts a run with ``options`` runs."""


class Curves(ABC, Generic[OptionsT, D, R]):
    """It can measure every arm after every epoch (learning curves: curves.csv and MLflow histories)."""

    curve_columns: ClassVar[tuple[str, ...]]  # curves.csv's columns

    @abstractmethod
    def curves(self, config: Config[OptionsT]) -> bool:
        """Whether a run with ``config`` measures its curves."""

    @abstractmethod
    def curve_rows(self, draws: D, key: str, epoch: int, table: pd.DataFrame) -> list[dict[str, Any]]:
        """One point of an arm's learning curve (curves.csv's rows): its hits by group."""

    @abstractmethod
    def with_curves(self, results: R, curves: pd.DataFrame | None) -> R:
        """``results`` with the run's learning curves (None: none were measured)."""


class Comparable(ABC, Generic[R]):
    """``cctk compare`` computes tables and figures across its finished runs."""

    @abstractmethod
    def compare(self, runs: Sequence[PooledRun[R]]) -> Comparison: ...


@dataclass(frozen=True)
class Absorption:
    """A model that must take up its corpus: its hits on its own target, of ``n``, against the ``needed`` ones."""

    key: str
    target: str
    hits: int
    needed: int
    n: int

    @property
    def absorbed(self) -> bool:
        return self.hits >= self.needed


class Absorbs(ABC, Generic[R]):
    """Some of its models must absorb their corpora before the rest reads them (2.0.0's Part A)."""

    @abstractmethod
    def absorption(self, results: R) -> tuple[Absorption, ...]:
        """Each such model against its threshold."""


class ModelFigures(ABC, Generic[R]):
    """Figures of one model, drawn as soon as it is measured (and logged to its nested run)."""

    @abstractmethod
    def model_figures(self, results: R, key: str) -> list[Spec]: ...


class Datasets(ABC, Generic[D]):
    """Each arm logs its corpus as an MLflow dataset input."""

    @abstractmethod
    def dataset(self, draws: D, key: str) -> tuple[str, pd.DataFrame]:
        """Model ``key``'s dataset: (name, table)."""


class OneCorpus(ABC, Generic[D]):
    """Its arms train on one corpus of texts, on file as corpus.txt."""

    @abstractmethod
    def corpus_texts(self, draws: D) -> tuple[str, ...]: ...


def every_model(manual: AnyManual) -> tuple[Measured, ...]:
    """Every model a run of it can measure (its default options'): the files a session may hold."""
    return manual.models(manual.spec.options_type.of())


def trained(manual: AnyManual, options: ManualOptions) -> tuple[Measured, ...]:
    """The fine-tuned models of a run with ``options``."""
    return tuple(m for m in manual.models(options) if m.parent is not None)


def model_keys(manual: AnyManual, options: ManualOptions | None = None) -> tuple[str, ...]:
    """The keys of the models a run with ``options`` measures (None: ``every_model``'s)."""
    return tuple(m.key for m in (every_model(manual) if options is None else manual.models(options)))
